import { expect } from "vitest";
import { call, createKey, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";

test("sign in, mint a key, use it on the agent routes", async ({ app }) => {
  const user = await signIn(app);
  const me = await call(app, { method: "GET", path: "/v1/me", headers: { cookie: user.cookie } });
  expect(me.status).toBe(200);
  expect(me.body).toEqual({
    accountId: user.accountId,
    walletAddress: user.walletAddress.toLowerCase(),
    authProvider: "idp",
  });
  const key = await createKey(app, user);
  expect(key.apiKey).toMatch(/^svc_[A-Za-z0-9_-]{43}$/);
  const agentMe = await call(app, {
    method: "GET",
    path: "/v1/agent/me",
    headers: { authorization: `Bearer ${key.apiKey}` },
  });
  expect(agentMe.status).toBe(200);
  expect(agentMe.body).toMatchObject({
    accountId: user.accountId,
    confirmedUsdc: "0.000000",
    confirmationBlocks: 20,
    maxPriceCentsPerDollar: 80,
  });
});
