import { privateKeyToAccount } from "viem/accounts";
import { createSiweMessage, generateSiweNonce } from "viem/siwe";
import { describe, expect } from "vitest";
import { call, cookieFrom, newWallet, rawPost } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectAuthFailed, expectError } from "../../../testkit/errors.js";
import type { TestApp } from "../../../testkit/harness.js";
import { countAccounts, countSessions, nothingCreated } from "../../../testkit/identity.js";

/**
 * SIWE sign-in (docs/decisions.md; the spec leaves it "not shown"): POST /auth/siwe/nonce then
 * POST /auth/siwe/verify with an EIP-4361 message signed by the wallet.
 */

interface NonceBody {
  nonce: string;
  expiresAt: string;
  domain: string;
  uri: string;
  chainId: number;
}

async function getNonce(app: TestApp): Promise<NonceBody> {
  const r = await call(app, { method: "POST", path: "/auth/siwe/nonce" });
  expect(r.status).toBe(200);
  return r.body as NonceBody;
}

type Overrides = Partial<Parameters<typeof createSiweMessage>[0]>;

/** A signed EIP-4361 sign-in for `wallet` (default: a fresh wallet and a fresh nonce). */
async function signedMessage(
  app: TestApp,
  opts: { wallet?: ReturnType<typeof newWallet>; signer?: `0x${string}`; o?: Overrides } = {},
) {
  const wallet = opts.wallet ?? newWallet();
  const n = opts.o?.nonce ? undefined : await getNonce(app);
  const message = createSiweMessage({
    address: privateKeyToAccount(wallet.privateKey).address,
    domain: new URL(app.baseUrl).host,
    uri: app.baseUrl,
    chainId: 8453,
    version: "1",
    nonce: n?.nonce ?? "",
    issuedAt: new Date(),
    statement: "Sign in to svc",
    ...opts.o,
  });
  const signature = await privateKeyToAccount(opts.signer ?? wallet.privateKey).signMessage({ message });
  return { wallet, message, signature };
}

async function verify(app: TestApp, body: unknown) {
  const res = await fetch(`${app.baseUrl}/auth/siwe/verify`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers, res };
}

describe("success", () => {
  test("POST /auth/siwe/nonce → a fresh nonce with the domain, uri and chain the message must carry", async ({
    app,
  }) => {
    const before = Date.now();
    const a = await getNonce(app);
    const b = await getNonce(app);
    expect(a.nonce).toMatch(/^[A-Za-z0-9]{8,}$/);
    expect(b.nonce).not.toBe(a.nonce);
    expect(a.domain).toBe(new URL(app.baseUrl).host);
    expect(a.uri).toBe(`${app.baseUrl}/app`); // {web_url}: the web app signs in
    expect(a.chainId).toBe(8453);
    const ttl = Date.parse(a.expiresAt) - before;
    expect(ttl).toBeGreaterThan(9 * 60_000);
    expect(ttl).toBeLessThanOrEqual(10 * 60_000 + 5_000);
    const row = await app.rt.db.siweNonce.findUniqueOrThrow({ where: { nonce: a.nonce } });
    expect(row.usedAt).toBeNull();
  });

  test("a signed EIP-4361 message → 200, cookie, a siwe account; the nonce is consumed", async ({ app }) => {
    const { wallet, message, signature } = await signedMessage(app);
    const r = await verify(app, { message, signature });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({
      accountId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      walletAddress: wallet.address.toLowerCase(),
      authProvider: "siwe",
      sessionExpiresAt: expect.any(String),
      sessionAbsoluteExpiresAt: expect.any(String),
      createdAccount: true,
    });
    const setCookie = r.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^svc_session=[^;]+;/);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Lax/);

    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: wallet.address.toLowerCase() },
    });
    expect(account.authProvider).toBe("siwe");
    expect(account.id).toBe((r.body as { accountId: string }).accountId);

    const me = await call(app, { method: "GET", path: "/v1/me", headers: { cookie: cookieFrom(r.res) } });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ accountId: account.id, walletAddress: account.walletAddress, authProvider: "siwe" });

    const nonce = /Nonce: (\S+)/.exec(message)?.[1] ?? "";
    const row = await app.rt.db.siweNonce.findUniqueOrThrow({ where: { nonce } });
    expect(row.usedAt).not.toBeNull();
  });

  test("a second SIWE sign-in of the same wallet (new nonce) returns the same account", async ({ app }) => {
    const wallet = newWallet();
    const first = await signedMessage(app, { wallet });
    const r1 = await verify(app, { message: first.message, signature: first.signature });
    expect(r1.status).toBe(200);
    const accounts = await countAccounts(app);
    const second = await signedMessage(app, { wallet });
    const r2 = await verify(app, { message: second.message, signature: second.signature });
    expect(r2.status).toBe(200);
    expect((r2.body as { accountId: string }).accountId).toBe((r1.body as { accountId: string }).accountId);
    expect((r2.body as { createdAccount: boolean }).createdAccount).toBe(false);
    expect(await countAccounts(app)).toBe(accounts);
  });

  test("an x402-created account upgrades in place to siwe", async ({ app }) => {
    const wallet = newWallet();
    const existing = await app.rt.db.account.create({
      data: { walletAddress: wallet.address.toLowerCase(), authProvider: "x402" },
    });
    const m = await signedMessage(app, { wallet });
    const r = await verify(app, { message: m.message, signature: m.signature });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ accountId: existing.id, authProvider: "siwe", createdAccount: false });
    expect((await app.rt.db.account.findUniqueOrThrow({ where: { id: existing.id } })).authProvider).toBe("siwe");
  });
});

describe("rejection → 401, nothing created", () => {
  test("replaying a used message (single-use nonce) → 401", async ({ app }) => {
    const { message, signature } = await signedMessage(app);
    expect((await verify(app, { message, signature })).status).toBe(200);
    await nothingCreated(app, async () => {
      expectAuthFailed(await verify(app, { message, signature }));
    });
  });

  test("concurrent submissions of one signed message: exactly one succeeds", async ({ app }) => {
    const { message, signature } = await signedMessage(app);
    const accounts = await countAccounts(app);
    const sessions = await countSessions(app);
    const results = await Promise.all(Array.from({ length: 5 }, () => verify(app, { message, signature })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 401, 401, 401, 401]);
    for (const r of results.filter((x) => x.status === 401)) expectAuthFailed(r);
    expect(await countAccounts(app)).toBe(accounts + 1);
    expect(await countSessions(app)).toBe(sessions + 1);
  });

  test("a message for another domain → 401", async ({ app }) => {
    await nothingCreated(app, async () => {
      const m = await signedMessage(app, { o: { domain: "evil.example" } });
      expectAuthFailed(await verify(app, { message: m.message, signature: m.signature }));
      const m2 = await signedMessage(app, { o: { domain: "127.0.0.1:1" } });
      expectAuthFailed(await verify(app, { message: m2.message, signature: m2.signature }));
    });
  });

  test("an expired message (expirationTime in the past) → 401", async ({ app }) => {
    await nothingCreated(app, async () => {
      const m = await signedMessage(app, {
        o: { issuedAt: new Date(Date.now() - 120_000), expirationTime: new Date(Date.now() - 60_000) },
      });
      expectAuthFailed(await verify(app, { message: m.message, signature: m.signature }));
    });
  });

  test("a message not yet valid (notBefore in the future) → 401", async ({ app }) => {
    await nothingCreated(app, async () => {
      const m = await signedMessage(app, { o: { notBefore: new Date(Date.now() + 3_600_000) } });
      expectAuthFailed(await verify(app, { message: m.message, signature: m.signature }));
    });
  });

  test("a signature by another key → 401", async ({ app }) => {
    await nothingCreated(app, async () => {
      const m = await signedMessage(app, { signer: newWallet().privateKey });
      expectAuthFailed(await verify(app, { message: m.message, signature: m.signature }));
    });
  });

  test("a signature over a different message (address altered after signing) → 401", async ({ app }) => {
    await nothingCreated(app, async () => {
      const victim = newWallet();
      const m = await signedMessage(app);
      const altered = m.message.replace(privateKeyToAccount(m.wallet.privateKey).address, victim.address);
      expect(altered).not.toBe(m.message);
      expectAuthFailed(await verify(app, { message: altered, signature: m.signature }));
    });
  });

  test("a nonce we never issued → 401", async ({ app }) => {
    await nothingCreated(app, async () => {
      const m = await signedMessage(app, { o: { nonce: generateSiweNonce() } });
      expectAuthFailed(await verify(app, { message: m.message, signature: m.signature }));
    });
  });

  test("an issued nonce past its expiry → 401", async ({ app }) => {
    const n = await getNonce(app);
    await app.rt.db.siweNonce.update({ where: { nonce: n.nonce }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await nothingCreated(app, async () => {
      const m = await signedMessage(app, { o: { nonce: n.nonce } });
      expectAuthFailed(await verify(app, { message: m.message, signature: m.signature }));
    });
  });

  test("a signature that is hex but not a valid signature → 401", async ({ app }) => {
    await nothingCreated(app, async () => {
      const m = await signedMessage(app);
      expectAuthFailed(await verify(app, { message: m.message, signature: `0x${"00".repeat(65)}` }));
      expectAuthFailed(await verify(app, { message: m.message, signature: "0x1234" }));
    });
  });
});

describe("rejection → 400, nothing created", () => {
  test("non-SIWE text → 400 invalid_request", async ({ app }) => {
    await nothingCreated(app, async () => {
      for (const message of ["hello world", "Sign in please\nNonce: abcdefgh12"]) {
        const signature = await privateKeyToAccount(newWallet().privateKey).signMessage({ message });
        expectError(await verify(app, { message, signature }), 400, "invalid_request", message);
      }
    });
  });

  test("missing or ill-typed fields, non-hex signature, malformed JSON → 400", async ({ app }) => {
    const m = await signedMessage(app);
    await nothingCreated(app, async () => {
      expectError(await verify(app, { signature: m.signature }), 400, "invalid_request", "no message");
      expectError(await verify(app, { message: m.message }), 400, "invalid_request", "no signature");
      expectError(await verify(app, { message: 1, signature: m.signature }), 400, "invalid_request", "numeric message");
      expectError(
        await verify(app, { message: m.message, signature: "zz" }),
        400,
        "invalid_request",
        "non-hex signature",
      );
      expectError(await rawPost(app, "/auth/siwe/verify", '{"message":'), 400, "invalid_request", "bad JSON");
    });
    // the 400s did not burn the nonce: the genuine message still signs in
    expect((await verify(app, { message: m.message, signature: m.signature })).status).toBe(200);
  });
});

describe("concurrency", () => {
  // regression: fixed bug in src/domain/identity/identity-service.ts
  test("concurrent first SIWE sign-ins of one wallet (distinct nonces) all succeed on one account", async ({ app }) => {
    for (let round = 0; round < 3; round++) {
      const wallet = newWallet();
      const msgs = await Promise.all(Array.from({ length: 5 }, () => signedMessage(app, { wallet })));
      const results = await Promise.all(msgs.map((m) => verify(app, { message: m.message, signature: m.signature })));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      expect(new Set(results.map((r) => (r.body as { accountId: string }).accountId)).size).toBe(1);
    }
  });
});
