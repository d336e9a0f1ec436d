import { describe, expect } from "vitest";
import { createLocalIdp, type MintTokenOptions } from "../../../src/local/idp/index.js";
import { call, cookieFrom, newWallet, rawPost, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectAuthFailed, expectError } from "../../../testkit/errors.js";
import type { TestApp } from "../../../testkit/harness.js";
import { cookieValueOf, countAccounts, nothingCreated, sha256Hex } from "../../../testkit/identity.js";

/** SPEC "Identity and session": POST /auth/idp/verify and POST /auth/logout. */

async function verify(app: TestApp, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${app.baseUrl}/auth/idp/verify`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers, res };
}

async function tokensFor(app: TestApp, wallet: string, opts?: MintTokenOptions) {
  const { accessToken, identityToken } = await app.idp.mintTokens(wallet, opts);
  return { accessToken, identityToken };
}

describe("success", () => {
  test("good tokens → 200 with the session identity and an HttpOnly, Lax, Path=/ cookie (no Secure locally)", async ({
    app,
  }) => {
    const wallet = newWallet();
    const before = Date.now();
    const r = await verify(app, { ...(await tokensFor(app, wallet.address)), walletAddress: wallet.address });
    expect(r.status).toBe(200);
    const body = r.body as Record<string, unknown>;
    expect(body).toEqual({
      accountId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      walletAddress: wallet.address.toLowerCase(),
      authProvider: "idp",
      sessionExpiresAt: expect.any(String),
      sessionAbsoluteExpiresAt: expect.any(String),
      createdAccount: true,
    });
    // sliding 7 days, absolute 30 days (docs/decisions: sessions)
    const sliding = Date.parse(body.sessionExpiresAt as string);
    const absolute = Date.parse(body.sessionAbsoluteExpiresAt as string);
    expect(sliding).toBeGreaterThan(before);
    expect(absolute).toBeGreaterThanOrEqual(sliding);

    const setCookie = r.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^svc_session=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+;/);
    const attrs = setCookie.split(";").map((p) => p.trim());
    expect(attrs).toContain("HttpOnly");
    expect(attrs).toContain("SameSite=Lax");
    expect(attrs).toContain("Path=/");
    expect(attrs.some((a) => /^secure$/i.test(a))).toBe(false);
    expect(attrs.find((a) => a.startsWith("Max-Age="))).toMatch(/^Max-Age=\d+$/);

    const account = await app.rt.db.account.findUniqueOrThrow({ where: { id: body.accountId as string } });
    expect(account.walletAddress).toBe(wallet.address.toLowerCase());
    expect(account.authProvider).toBe("idp");
    expect(account.idpSubject).toMatch(/^did:privy:/);
    expect(account.maxPriceCentsPerDollar).toBe(80);

    // the cookie works, and the stored session belongs to the account
    const cookie = cookieFrom(r.res);
    const me = await call(app, { method: "GET", path: "/v1/me", headers: { cookie } });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ accountId: account.id, walletAddress: account.walletAddress, authProvider: "idp" });
    const session = await app.rt.db.session.findUniqueOrThrow({
      where: { tokenHash: sha256Hex(cookieValueOf(cookie)) },
    });
    expect(session.accountId).toBe(account.id);
    expect(session.authProvider).toBe("idp");
  });

  test("a second sign-in returns the same accountId, a new session, and createdAccount false", async ({ app }) => {
    const wallet = newWallet();
    const first = await signIn(app, wallet);
    const accounts = await countAccounts(app);
    const r = await verify(app, { ...(await tokensFor(app, wallet.address)), walletAddress: wallet.address });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ accountId: first.accountId, createdAccount: false, authProvider: "idp" });
    expect(await countAccounts(app)).toBe(accounts);
    const second = cookieFrom(r.res);
    expect(second).not.toBe(first.cookie);
    // both sessions are live
    for (const cookie of [first.cookie, second]) {
      expect((await call(app, { method: "GET", path: "/v1/me", headers: { cookie } })).status).toBe(200);
    }
  });

  test("the wallet address is case-insensitive: lower, upper and checksummed forms map to one account", async ({
    app,
  }) => {
    const wallet = newWallet();
    const hex = wallet.address.slice(2);
    const forms = [wallet.address, `0x${hex.toLowerCase()}`, `0x${hex.toUpperCase()}`];
    const ids = new Set<string>();
    for (const form of forms) {
      // tokens link the wallet in one form, the body names it in another
      const r = await verify(app, { ...(await tokensFor(app, wallet.address)), walletAddress: form });
      expect(r.status, form).toBe(200);
      expect((r.body as { walletAddress: string }).walletAddress).toBe(wallet.address.toLowerCase());
      ids.add((r.body as { accountId: string }).accountId);
    }
    const r = await verify(app, { ...(await tokensFor(app, `0x${hex.toUpperCase()}`)), walletAddress: wallet.address });
    expect(r.status).toBe(200);
    ids.add((r.body as { accountId: string }).accountId);
    expect(ids.size).toBe(1);
    expect(await app.rt.db.account.count({ where: { walletAddress: wallet.address.toLowerCase() } })).toBe(1);
  });

  test("an existing SIWE account for the wallet upgrades in place to idp (same id)", async ({ app }) => {
    const wallet = newWallet();
    const existing = await app.rt.db.account.create({
      data: { walletAddress: wallet.address.toLowerCase(), authProvider: "siwe", maxPriceCentsPerDollar: 42 },
    });
    const accounts = await countAccounts(app);
    const r = await verify(app, { ...(await tokensFor(app, wallet.address)), walletAddress: wallet.address });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ accountId: existing.id, authProvider: "idp", createdAccount: false });
    expect(await countAccounts(app)).toBe(accounts);
    const after = await app.rt.db.account.findUniqueOrThrow({ where: { id: existing.id } });
    expect(after.authProvider).toBe("idp");
    // the upgrade keeps the account's settings
    expect(after.maxPriceCentsPerDollar).toBe(42);
  });

  test("a wallet among several linked wallets signs in; idpLoginSurface is recorded", async ({ app }) => {
    const wallet = newWallet();
    const other = newWallet();
    const r = await verify(app, {
      ...(await tokensFor(app, wallet.address, { linkedWallets: [other.address, wallet.address] })),
      walletAddress: wallet.address,
      idpLoginSurface: "embedded",
    });
    expect(r.status).toBe(200);
    const s = await app.rt.db.session.findUniqueOrThrow({
      where: { tokenHash: sha256Hex(cookieValueOf(cookieFrom(r.res))) },
    });
    expect(s.idpLoginSurface).toBe("embedded");
  });
});

describe("rejection: token verification → 401, nothing created", () => {
  const cases: { name: string; opts: (app: TestApp) => MintTokenOptions }[] = [
    {
      name: "tokens signed by another key",
      opts: (app) => ({ signWith: createLocalIdp({ appId: app.idp.appId }).keyPair }),
    },
    { name: "wrong audience", opts: () => ({ audience: "some-other-app" }) },
    { name: "wrong issuer", opts: () => ({ issuer: "evil.example" }) },
    { name: "expired tokens", opts: () => ({ expired: true }) },
    { name: "wallet not in linked_accounts", opts: () => ({ linkedWallets: [newWallet().address] }) },
    { name: "no wallet linked at all", opts: () => ({ linkedWallets: [] }) },
    {
      name: "subject mismatch between the tokens",
      opts: () => ({ identitySubject: "did:privy:cnotthesameuser000000000000" }),
    },
  ];

  test.for(cases)("$name → 401 authentication_failed", async ({ opts }, { app }) => {
    const wallet = newWallet();
    await nothingCreated(app, async () => {
      const r = await verify(app, {
        ...(await tokensFor(app, wallet.address, opts(app))),
        walletAddress: wallet.address,
      });
      expectAuthFailed(r);
      expect(r.headers.get("set-cookie")).toBeNull();
    });
    expect(await app.rt.db.account.findUnique({ where: { walletAddress: wallet.address.toLowerCase() } })).toBeNull();
  });

  test("an existing SIWE account is not upgraded by a failed sign-in", async ({ app }) => {
    const wallet = newWallet();
    const existing = await app.rt.db.account.create({
      data: { walletAddress: wallet.address.toLowerCase(), authProvider: "siwe" },
    });
    await nothingCreated(app, async () => {
      const r = await verify(app, {
        ...(await tokensFor(app, wallet.address, { audience: "other" })),
        walletAddress: wallet.address,
      });
      expectAuthFailed(r);
    });
    const after = await app.rt.db.account.findUniqueOrThrow({ where: { id: existing.id } });
    expect(after.authProvider).toBe("siwe");
    expect(after.idpSubject).toBeNull();
  });

  test("tokens of one wallet cannot sign in another wallet", async ({ app }) => {
    const alice = newWallet();
    const mallory = newWallet();
    await nothingCreated(app, async () => {
      expectAuthFailed(await verify(app, { ...(await tokensFor(app, mallory.address)), walletAddress: alice.address }));
    });
  });

  test("swapped tokens (access token as identity token and vice versa) → 401", async ({ app }) => {
    const wallet = newWallet();
    const t = await tokensFor(app, wallet.address);
    await nothingCreated(app, async () => {
      expectAuthFailed(
        await verify(app, {
          accessToken: t.identityToken,
          identityToken: t.accessToken,
          walletAddress: wallet.address,
        }),
      );
      expectAuthFailed(
        await verify(app, { accessToken: t.accessToken, identityToken: t.accessToken, walletAddress: wallet.address }),
      );
    });
  });

  test("non-JWT token strings → 401 (not 500)", async ({ app }) => {
    const wallet = newWallet();
    await nothingCreated(app, async () => {
      expectAuthFailed(await verify(app, { accessToken: "abc", identityToken: "def", walletAddress: wallet.address }));
    });
  });
});

describe("rejection: invalid bodies → 400 invalid_request, nothing created", () => {
  test("missing fields", async ({ app }) => {
    const wallet = newWallet();
    const t = await tokensFor(app, wallet.address);
    const full = { ...t, walletAddress: wallet.address };
    await nothingCreated(app, async () => {
      for (const field of ["accessToken", "identityToken", "walletAddress"] as const) {
        const { [field]: _omit, ...rest } = full;
        const r = await verify(app, rest);
        expectError(r, 400, "invalid_request", `missing ${field}`);
        expect((r.body as { error: { field?: string } }).error.field).toBe(field);
      }
      expectError(await verify(app, {}), 400, "invalid_request", "empty object");
      expectError(await verify(app, { ...full, accessToken: "" }), 400, "invalid_request", "empty accessToken");
      expectError(await verify(app, { ...full, identityToken: 12 }), 400, "invalid_request", "numeric identityToken");
    });
  });

  test("malformed walletAddress", async ({ app }) => {
    const wallet = newWallet();
    const t = await tokensFor(app, wallet.address);
    const hex = wallet.address.slice(2);
    await nothingCreated(app, async () => {
      for (const bad of [hex, `0x${hex.slice(1)}`, `0x${hex}0`, `0x${hex.slice(1)}g`, `${wallet.address} `, ""]) {
        expectError(await verify(app, { ...t, walletAddress: bad }), 400, "invalid_request", JSON.stringify(bad));
      }
    });
  });

  test("idpLoginSurface outside wallet|embedded|unknown", async ({ app }) => {
    const wallet = newWallet();
    const t = await tokensFor(app, wallet.address);
    await nothingCreated(app, async () => {
      for (const bad of ["desktop", "", "WALLET", 1]) {
        const r = await verify(app, { ...t, walletAddress: wallet.address, idpLoginSurface: bad });
        expectError(r, 400, "invalid_request", JSON.stringify(bad));
      }
    });
    // each valid surface is accepted
    for (const surface of ["wallet", "embedded", "unknown"]) {
      const r = await verify(app, {
        ...(await tokensFor(app, wallet.address)),
        walletAddress: wallet.address,
        idpLoginSurface: surface,
      });
      expect(r.status, surface).toBe(200);
    }
  });

  test("malformed JSON and non-object bodies", async ({ app }) => {
    await nothingCreated(app, async () => {
      expectError(await rawPost(app, "/auth/idp/verify", '{"accessToken": "x",'), 400, "invalid_request", "truncated");
      expectError(await rawPost(app, "/auth/idp/verify", "[]"), 400, "invalid_request", "array");
      expectError(await rawPost(app, "/auth/idp/verify", '"text"'), 400, "invalid_request", "string");
      expectError(await rawPost(app, "/auth/idp/verify", "null"), 400, "invalid_request", "null");
    });
  });
});

describe("logout", () => {
  test("logout → 200 status-ok and a cleared cookie; the cookie is then refused, and a second logout is 401", async ({
    app,
  }) => {
    const user = await signIn(app);
    const r = await call(app, { method: "POST", path: "/auth/logout", headers: { cookie: user.cookie } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: "ok" });
    const cleared = r.headers.get("set-cookie") ?? "";
    expect(cleared).toMatch(/^svc_session=;/);
    expect(cleared).toMatch(/Max-Age=0/);

    expectAuthFailed(await call(app, { method: "GET", path: "/v1/me", headers: { cookie: user.cookie } }));
    expectAuthFailed(await call(app, { method: "GET", path: "/v1/account", headers: { cookie: user.cookie } }));
    expectAuthFailed(await call(app, { method: "POST", path: "/auth/logout", headers: { cookie: user.cookie } }));

    const s = await app.rt.db.session.findUniqueOrThrow({
      where: { tokenHash: sha256Hex(cookieValueOf(user.cookie)) },
    });
    expect(s.revokedAt).not.toBeNull();
  });

  test("logout revokes only the presented session; another session of the same account stays live", async ({ app }) => {
    const wallet = newWallet();
    const a = await signIn(app, wallet);
    const b = await signIn(app, wallet);
    expect(b.accountId).toBe(a.accountId);
    expect((await call(app, { method: "POST", path: "/auth/logout", headers: { cookie: a.cookie } })).status).toBe(200);
    expectAuthFailed(await call(app, { method: "GET", path: "/v1/me", headers: { cookie: a.cookie } }));
    expect((await call(app, { method: "GET", path: "/v1/me", headers: { cookie: b.cookie } })).status).toBe(200);
  });

  test("logout without a cookie → 401", async ({ app }) => {
    expectAuthFailed(await call(app, { method: "POST", path: "/auth/logout" }));
  });
});

describe("concurrency", () => {
  test("concurrent sign-ins of an existing account all succeed on the same account", async ({ app }) => {
    const wallet = newWallet();
    const first = await signIn(app, wallet);
    const bodies = await Promise.all(
      Array.from({ length: 5 }, async () => ({
        ...(await tokensFor(app, wallet.address)),
        walletAddress: wallet.address,
      })),
    );
    const results = await Promise.all(bodies.map((b) => verify(app, b)));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(new Set(results.map((r) => (r.body as { accountId: string }).accountId))).toEqual(
      new Set([first.accountId]),
    );
  });

  // regression: fixed bug in src/domain/identity/identity-service.ts
  test("concurrent FIRST sign-ins of one new wallet all succeed with a single account", async ({ app }) => {
    for (let round = 0; round < 3; round++) {
      const wallet = newWallet();
      const bodies = await Promise.all(
        Array.from({ length: 6 }, async () => ({
          ...(await tokensFor(app, wallet.address)),
          walletAddress: wallet.address,
        })),
      );
      const results = await Promise.all(bodies.map((b) => verify(app, b)));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(new Set(results.map((r) => (r.body as { accountId: string }).accountId)).size).toBe(1);
    }
  });
});
