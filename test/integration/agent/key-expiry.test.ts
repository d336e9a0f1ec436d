import { beforeAll, describe, expect } from "vitest";
import { mcpPathOf } from "../../../src/contract/openapi.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import { movableClock } from "../../../testkit/harness.js";
import { addSupply, chat, fundedBuyerKey } from "../../../testkit/market.js";

/**
 * Issue 28: after its `expiresAt` a key is refused exactly as a revoked key is (401
 * `authentication_failed`), on every Bearer path: the inference routes, whose key check is cached in
 * each process (an expired key is never served from that cache, not even one request after a cached
 * success, and a change of expiry reaches another process's cache), the agent routes, GraphQL and MCP.
 * The clock is the service's injected one, moved forward by the test.
 */

const clock = movableClock();
test.override("appOptions", { sim: {}, syncCatalog: true, clock, peer: true });
const world = fileWorld(test);
const MODEL = "zai-org-glm-5-1";

beforeAll(async () => {
  await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 100_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
  world.peer.rt.services.inference.invalidateBook();
});

const hi = { model: MODEL, messages: [{ role: "user", content: "hi [[sim:tokens=5]]" }] };
const inSeconds = (s: number) => new Date(clock.now().getTime() + s * 1_000).toISOString();

function expectRefused(r: { status: number; headers: Headers }, label: string) {
  expect(r.status, label).toBe(401);
  expect(r.headers.get("x-svc-error-code"), label).toBe("authentication_failed");
}

async function mintExpiring(app: TestApp, cookie: string, expiresAt: string) {
  const r = await call(app, {
    method: "POST",
    path: "/v1/account/api-keys",
    headers: { cookie },
    body: { name: "expiring", expiresAt },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; apiKey: string };
}

describe("an expired key is refused as a revoked key", () => {
  test("one request after a cached success: inference 401, and the agent routes, GraphQL and MCP", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const k = await mintExpiring(world.app, buyer.user.cookie, inSeconds(5));
    // two successes: the second is served by the cached key check
    expect((await chat(world.app, k.apiKey, hi)).status).toBe(200);
    expect((await chat(world.app, k.apiKey, hi)).status).toBe(200);

    clock.advance(6_000);
    expectRefused(await chat(world.app, k.apiKey, hi), "chat right after the expiry");
    expectRefused(
      await call(world.app, {
        method: "POST",
        path: "/v1/responses",
        headers: { authorization: `Bearer ${k.apiKey}` },
        body: { model: MODEL, input: "hi" },
      }),
      "responses",
    );
    expectRefused(
      await call(world.app, { method: "GET", path: "/v1/agent/me", headers: { authorization: `Bearer ${k.apiKey}` } }),
      "agent/me",
    );
    const gql = await call(world.app, {
      method: "POST",
      path: "/graphql",
      headers: { authorization: `Bearer ${k.apiKey}` },
      body: { query: "{ viewer { accountId } }" },
    });
    expect(gql.body).toEqual({ data: { viewer: null } });
    const mcp = await fetch(`${world.app.baseUrl}${mcpPathOf(world.app.rt.config.urls)}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${k.apiKey}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "agent_me", arguments: {} },
      }),
    });
    expectRefused(mcp, "mcp");
    // nothing was recorded for the refused calls, and the account's other key still works
    const records = await world.app.rt.db.inferenceRequest.count({ where: { apiKeyId: k.id } });
    expect(records).toBe(2);
    expect((await chat(world.app, buyer.apiKey, hi)).status).toBe(200);
    // still listed, with its expiry, until revoked
    const listed = await call(world.app, {
      method: "GET",
      path: "/v1/account/api-keys",
      headers: { cookie: buyer.user.cookie },
    });
    const keys = (listed.body as { keys: { id: string; expiresAt: string | null }[] }).keys;
    expect(keys.find((x) => x.id === k.id)?.expiresAt).toEqual(expect.any(String));
  });

  test("an expiry set in one process reaches another process's cached key check", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    // the peer process caches the key with no expiry
    expect((await chat(world.peer, buyer.apiKey, hi)).status).toBe(200);
    expect((await chat(world.peer, buyer.apiKey, hi)).status).toBe(200);
    const keyId = (await world.app.rt.db.apiKey.findFirstOrThrow({ where: { accountId: buyer.accountId } })).id;
    // the owner sets it from a session (a key never changes its own policy: issue 38)
    const patched = await call(world.app, {
      method: "PATCH",
      path: `/v1/account/api-keys/${keyId}`,
      headers: { cookie: buyer.user.cookie },
      body: { expiresAt: inSeconds(5) },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    clock.advance(6_000);
    // the peer heard of the change and reads the key again: refused well within its 30 s cache time
    let status = 0;
    for (let i = 0; i < 40 && status !== 401; i++) {
      status = (await chat(world.peer, buyer.apiKey, hi)).status;
      if (status !== 401) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(401);
  });
});
