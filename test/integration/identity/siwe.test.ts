import { privateKeyToAccount } from "viem/accounts";
import { createSiweMessage, generateSiweNonce } from "viem/siwe";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { call, cookieFrom, newWallet, rawPost } from "../../../testkit/actors.js";
import { expectAuthFailed, expectError } from "../../../testkit/errors.js";
import { isolatedWorld, startTestApp, type TestApp } from "../../../testkit/harness.js";
import { countAccounts, countSessions } from "../../../testkit/identity.js";

/**
 * SIWE sign-in (docs/decisions.md; the spec leaves it "not shown"): POST /auth/siwe/nonce then
 * POST /auth/siwe/verify with an EIP-4361 message signed by the wallet.
 */

let app: TestApp;
let drop: () => Promise<void>;
beforeAll(async () => {
  const w = await isolatedWorld();
  drop = w.drop;
  app = await startTestApp({ databaseUrl: w.databaseUrl, prefix: w.prefix });
});
afterAll(async () => {
  await app?.close();
  await drop?.();
});

interface NonceBody {
  nonce: string;
  expiresAt: string;
  domain: string;
  uri: string;
  chainId: number;
}

async function getNonce(): Promise<NonceBody> {
  const r = await call(app, { method: "POST", path: "/auth/siwe/nonce" });
  expect(r.status).toBe(200);
  return r.body as NonceBody;
}

type Overrides = Partial<Parameters<typeof createSiweMessage>[0]>;

/** A signed EIP-4361 sign-in for `wallet` (default: a fresh wallet and a fresh nonce). */
async function signedMessage(
  opts: { wallet?: ReturnType<typeof newWallet>; signer?: `0x${string}`; o?: Overrides } = {},
) {
  const wallet = opts.wallet ?? newWallet();
  const n = opts.o?.nonce ? undefined : await getNonce();
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

async function verify(body: unknown) {
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

async function nothingCreated(fn: () => Promise<void>) {
  const accounts = await countAccounts(app);
  const sessions = await countSessions(app);
  await fn();
  expect(await countAccounts(app), "accounts").toBe(accounts);
  expect(await countSessions(app), "sessions").toBe(sessions);
}

describe("success", () => {
  test("POST /auth/siwe/nonce → a fresh nonce with the domain, uri and chain the message must carry", async () => {
    const before = Date.now();
    const a = await getNonce();
    const b = await getNonce();
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

  test("a signed EIP-4361 message → 200, cookie, a siwe account; the nonce is consumed", async () => {
    const { wallet, message, signature } = await signedMessage();
    const r = await verify({ message, signature });
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

  test("a second SIWE sign-in of the same wallet (new nonce) returns the same account", async () => {
    const wallet = newWallet();
    const first = await signedMessage({ wallet });
    const r1 = await verify({ message: first.message, signature: first.signature });
    expect(r1.status).toBe(200);
    const accounts = await countAccounts(app);
    const second = await signedMessage({ wallet });
    const r2 = await verify({ message: second.message, signature: second.signature });
    expect(r2.status).toBe(200);
    expect((r2.body as { accountId: string }).accountId).toBe((r1.body as { accountId: string }).accountId);
    expect((r2.body as { createdAccount: boolean }).createdAccount).toBe(false);
    expect(await countAccounts(app)).toBe(accounts);
  });

  test("an x402-created account upgrades in place to siwe", async () => {
    const wallet = newWallet();
    const existing = await app.rt.db.account.create({
      data: { walletAddress: wallet.address.toLowerCase(), authProvider: "x402" },
    });
    const m = await signedMessage({ wallet });
    const r = await verify({ message: m.message, signature: m.signature });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ accountId: existing.id, authProvider: "siwe", createdAccount: false });
    expect((await app.rt.db.account.findUniqueOrThrow({ where: { id: existing.id } })).authProvider).toBe("siwe");
  });
});

describe("rejection → 401, nothing created", () => {
  test("replaying a used message (single-use nonce) → 401", async () => {
    const { message, signature } = await signedMessage();
    expect((await verify({ message, signature })).status).toBe(200);
    await nothingCreated(async () => {
      expectAuthFailed(await verify({ message, signature }));
    });
  });

  test("concurrent submissions of one signed message: exactly one succeeds", async () => {
    const { message, signature } = await signedMessage();
    const accounts = await countAccounts(app);
    const sessions = await countSessions(app);
    const results = await Promise.all(Array.from({ length: 5 }, () => verify({ message, signature })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 401, 401, 401, 401]);
    for (const r of results.filter((x) => x.status === 401)) expectAuthFailed(r);
    expect(await countAccounts(app)).toBe(accounts + 1);
    expect(await countSessions(app)).toBe(sessions + 1);
  });

  test("a message for another domain → 401", async () => {
    await nothingCreated(async () => {
      const m = await signedMessage({ o: { domain: "evil.example" } });
      expectAuthFailed(await verify({ message: m.message, signature: m.signature }));
      const m2 = await signedMessage({ o: { domain: "127.0.0.1:1" } });
      expectAuthFailed(await verify({ message: m2.message, signature: m2.signature }));
    });
  });

  test("an expired message (expirationTime in the past) → 401", async () => {
    await nothingCreated(async () => {
      const m = await signedMessage({
        o: { issuedAt: new Date(Date.now() - 120_000), expirationTime: new Date(Date.now() - 60_000) },
      });
      expectAuthFailed(await verify({ message: m.message, signature: m.signature }));
    });
  });

  test("a message not yet valid (notBefore in the future) → 401", async () => {
    await nothingCreated(async () => {
      const m = await signedMessage({ o: { notBefore: new Date(Date.now() + 3_600_000) } });
      expectAuthFailed(await verify({ message: m.message, signature: m.signature }));
    });
  });

  test("a signature by another key → 401", async () => {
    await nothingCreated(async () => {
      const m = await signedMessage({ signer: newWallet().privateKey });
      expectAuthFailed(await verify({ message: m.message, signature: m.signature }));
    });
  });

  test("a signature over a different message (address altered after signing) → 401", async () => {
    await nothingCreated(async () => {
      const victim = newWallet();
      const m = await signedMessage();
      const altered = m.message.replace(privateKeyToAccount(m.wallet.privateKey).address, victim.address);
      expect(altered).not.toBe(m.message);
      expectAuthFailed(await verify({ message: altered, signature: m.signature }));
    });
  });

  test("a nonce we never issued → 401", async () => {
    await nothingCreated(async () => {
      const m = await signedMessage({ o: { nonce: generateSiweNonce() } });
      expectAuthFailed(await verify({ message: m.message, signature: m.signature }));
    });
  });

  test("an issued nonce past its expiry → 401", async () => {
    const n = await getNonce();
    await app.rt.db.siweNonce.update({ where: { nonce: n.nonce }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await nothingCreated(async () => {
      const m = await signedMessage({ o: { nonce: n.nonce } });
      expectAuthFailed(await verify({ message: m.message, signature: m.signature }));
    });
  });

  test("a signature that is hex but not a valid signature → 401", async () => {
    await nothingCreated(async () => {
      const m = await signedMessage();
      expectAuthFailed(await verify({ message: m.message, signature: `0x${"00".repeat(65)}` }));
      expectAuthFailed(await verify({ message: m.message, signature: "0x1234" }));
    });
  });
});

describe("rejection → 400, nothing created", () => {
  test("non-SIWE text → 400 invalid_request", async () => {
    await nothingCreated(async () => {
      for (const message of ["hello world", "Sign in please\nNonce: abcdefgh12"]) {
        const signature = await privateKeyToAccount(newWallet().privateKey).signMessage({ message });
        expectError(await verify({ message, signature }), 400, "invalid_request", message);
      }
    });
  });

  test("missing or ill-typed fields, non-hex signature, malformed JSON → 400", async () => {
    const m = await signedMessage();
    await nothingCreated(async () => {
      expectError(await verify({ signature: m.signature }), 400, "invalid_request", "no message");
      expectError(await verify({ message: m.message }), 400, "invalid_request", "no signature");
      expectError(await verify({ message: 1, signature: m.signature }), 400, "invalid_request", "numeric message");
      expectError(await verify({ message: m.message, signature: "zz" }), 400, "invalid_request", "non-hex signature");
      expectError(await rawPost(app, "/auth/siwe/verify", '{"message":'), 400, "invalid_request", "bad JSON");
    });
    // the 400s did not burn the nonce: the genuine message still signs in
    expect((await verify({ message: m.message, signature: m.signature })).status).toBe(200);
  });
});

describe("concurrency", () => {
  // regression: fixed bug in src/domain/identity/identity-service.ts
  test("concurrent first SIWE sign-ins of one wallet (distinct nonces) all succeed on one account", async () => {
    for (let round = 0; round < 3; round++) {
      const wallet = newWallet();
      const msgs = await Promise.all(Array.from({ length: 5 }, () => signedMessage({ wallet })));
      const results = await Promise.all(msgs.map((m) => verify({ message: m.message, signature: m.signature })));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      expect(new Set(results.map((r) => (r.body as { accountId: string }).accountId)).size).toBe(1);
    }
  });
});
