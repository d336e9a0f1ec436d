import { randomBytes, randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { bearer, call, createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectAuthFailed } from "../../../testkit/errors.js";
import { createInferenceRequest } from "../../../testkit/fixtures.js";
import type { TestApp } from "../../../testkit/harness.js";
import { activeKeyCount, cookieValueOf, expireSession, maxPriceOf, sha256Hex } from "../../../testkit/identity.js";

/**
 * SPEC "Authentication": session routes take only the `svc_session` cookie (a Bearer → 401), agent
 * routes take only a Bearer key (a cookie → 401, even next to a valid Bearer). Every 401 is the JSON
 * error envelope with `authentication_failed`, and a refused request changes nothing.
 */

/** A fresh signed-in user with one key, a second key to revoke, and one request of its own. */
interface World {
  user: SignedInUser;
  key: { id: string; apiKey: string };
  spareKeyId: string;
  supportReference: string;
}

/** An active key stored as the service stores it (sha256 only); the matrix needs many, fast. */
async function insertKey(app: TestApp, accountId: string, name: string): Promise<{ id: string; apiKey: string }> {
  const apiKey = `svc_${randomBytes(32).toString("base64url")}`;
  const row = await app.rt.db.apiKey.create({
    data: { accountId, name, keyPrefix: apiKey.slice(0, 12), keyHash: sha256Hex(apiKey), source: "session" },
  });
  return { id: row.id, apiKey };
}

async function freshWorld(app: TestApp): Promise<World> {
  const user = await signIn(app);
  const [key, spare, req] = await Promise.all([
    insertKey(app, user.accountId, "caller"),
    insertKey(app, user.accountId, "spare"),
    createInferenceRequest(app.rt.db, user.accountId, { status: "succeeded" }),
  ]);
  return { user, key, spareKeyId: spare.id, supportReference: req.supportReference };
}

type Family = "session" | "bearer";
interface RouteCase {
  name: string;
  family: Family;
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: (w: World) => string;
  body?: unknown;
  /** status with the right credential */
  ok: number;
  /** checks the effect of a successful call */
  verify?: (app: TestApp, w: World, res: { body: unknown }) => Promise<void>;
}

const routes: RouteCase[] = [
  {
    name: "POST /auth/logout",
    family: "session",
    method: "POST",
    path: () => "/auth/logout",
    ok: 200,
    verify: async (app, w, res) => {
      expect(res.body).toEqual({ status: "ok" });
      const s = await app.rt.db.session.findUniqueOrThrow({
        where: { tokenHash: sha256Hex(cookieValueOf(w.user.cookie)) },
      });
      expect(s.revokedAt).not.toBeNull();
    },
  },
  {
    name: "GET /v1/me",
    family: "session",
    method: "GET",
    path: () => "/v1/me",
    ok: 200,
    verify: async (_app, w, res) => expect((res.body as { accountId: string }).accountId).toBe(w.user.accountId),
  },
  {
    name: "GET /v1/account",
    family: "session",
    method: "GET",
    path: () => "/v1/account",
    ok: 200,
    verify: async (_app, w, res) => expect((res.body as { accountId: string }).accountId).toBe(w.user.accountId),
  },
  {
    name: "PATCH /v1/account/max-price",
    family: "session",
    method: "PATCH",
    path: () => "/v1/account/max-price",
    body: { maxPriceCentsPerDollar: 55 },
    ok: 200,
    verify: async (app, w) => expect(await maxPriceOf(app, w.user.accountId)).toBe(55),
  },
  {
    name: "POST /v1/account/api-keys",
    family: "session",
    method: "POST",
    path: () => "/v1/account/api-keys",
    body: { name: "matrix" },
    ok: 201,
    verify: async (app, w) => expect(await activeKeyCount(app, w.user.accountId)).toBe(3),
  },
  {
    name: "GET /v1/account/api-keys",
    family: "session",
    method: "GET",
    path: () => "/v1/account/api-keys",
    ok: 200,
    verify: async (_app, _w, res) => expect((res.body as { active: number }).active).toBe(2),
  },
  {
    name: "DELETE /v1/account/api-keys/{id}",
    family: "session",
    method: "DELETE",
    path: (w) => `/v1/account/api-keys/${w.spareKeyId}`,
    ok: 200,
    verify: async (app, w) => expect(await activeKeyCount(app, w.user.accountId)).toBe(1),
  },
  {
    name: "GET /v1/account/inference-history",
    family: "session",
    method: "GET",
    path: () => "/v1/account/inference-history",
    ok: 200,
    verify: async (_app, w, res) =>
      expect((res.body as { data: { supportReference: string }[] }).data.map((r) => r.supportReference)).toEqual([
        w.supportReference,
      ]),
  },
  {
    name: "GET /v1/account/savings",
    family: "session",
    method: "GET",
    path: () => "/v1/account/savings",
    ok: 200,
    verify: async (_app, _w, res) => expect((res.body as { clears: number }).clears).toBe(0),
  },
  {
    name: "GET /v1/agent/me",
    family: "bearer",
    method: "GET",
    path: () => "/v1/agent/me",
    ok: 200,
    verify: async (_app, w, res) => expect((res.body as { accountId: string }).accountId).toBe(w.user.accountId),
  },
  {
    name: "PATCH /v1/agent/max-price",
    family: "bearer",
    method: "PATCH",
    path: () => "/v1/agent/max-price",
    body: { maxPriceCentsPerDollar: 55 },
    ok: 200,
    verify: async (app, w) => expect(await maxPriceOf(app, w.user.accountId)).toBe(55),
  },
  {
    name: "POST /v1/agent/keys",
    family: "bearer",
    method: "POST",
    path: () => "/v1/agent/keys",
    body: { name: "matrix" },
    ok: 201,
    verify: async (app, w) => expect(await activeKeyCount(app, w.user.accountId)).toBe(3),
  },
  {
    name: "GET /v1/agent/keys",
    family: "bearer",
    method: "GET",
    path: () => "/v1/agent/keys",
    ok: 200,
    verify: async (_app, _w, res) => expect((res.body as { active: number }).active).toBe(2),
  },
  {
    name: "DELETE /v1/agent/keys/{id}",
    family: "bearer",
    method: "DELETE",
    path: (w) => `/v1/agent/keys/${w.spareKeyId}`,
    ok: 200,
    verify: async (app, w) => expect(await activeKeyCount(app, w.user.accountId)).toBe(1),
  },
  {
    name: "GET /v1/agent/requests/{uuid}",
    family: "bearer",
    method: "GET",
    path: (w) => `/v1/agent/requests/${w.supportReference}`,
    ok: 200,
    verify: async (_app, w, res) =>
      expect((res.body as { supportReference: string }).supportReference).toBe(w.supportReference),
  },
];

type CredentialCase = "none" | "cookie" | "bearer" | "revokedBearer" | "expiredSession" | "cookieAndBearer";
const credentials: CredentialCase[] = [
  "none",
  "cookie",
  "bearer",
  "revokedBearer",
  "expiredSession",
  "cookieAndBearer",
];

async function headersFor(app: TestApp, c: CredentialCase, w: World): Promise<Record<string, string>> {
  switch (c) {
    case "none":
      return {};
    case "cookie":
      return { cookie: w.user.cookie };
    case "bearer":
      return bearer(w.key.apiKey);
    case "revokedBearer": {
      const r = await call(app, {
        method: "DELETE",
        path: `/v1/account/api-keys/${w.key.id}`,
        headers: { cookie: w.user.cookie },
      });
      expect(r.status).toBe(200);
      return bearer(w.key.apiKey);
    }
    case "expiredSession":
      await expireSession(app, w.user);
      return { cookie: w.user.cookie };
    case "cookieAndBearer":
      return { cookie: w.user.cookie, ...bearer(w.key.apiKey) };
  }
}

function expectedStatus(route: RouteCase, c: CredentialCase): number {
  if (route.family === "session" && c === "cookie") return route.ok;
  if (route.family === "bearer" && c === "bearer") return route.ok;
  return 401;
}

async function snapshot(app: TestApp, w: World) {
  const session = await app.rt.db.session.findUniqueOrThrow({
    where: { tokenHash: sha256Hex(cookieValueOf(w.user.cookie)) },
  });
  return {
    maxPrice: await maxPriceOf(app, w.user.accountId),
    activeKeys: await activeKeyCount(app, w.user.accountId),
    sessionRevoked: session.revokedAt !== null,
  };
}

const matrix = routes.flatMap((route) =>
  credentials.map((credential) => ({ route, credential, expected: expectedStatus(route, credential) })),
);

describe("credential matrix: route × credential → status", () => {
  test.concurrent.for(matrix.map((m) => [m.route.name, m.credential, m.expected, m] as const))(
    "%s with %s → %i",
    async ([_name, credential, expected, { route }], { app }) => {
      const w = await freshWorld(app);
      const headers = await headersFor(app, credential, w);
      const before = await snapshot(app, w);
      const res = await call(app, { method: route.method, path: route.path(w), body: route.body, headers });
      if (expected === 401) {
        expectAuthFailed(res, `${route.name} / ${credential}`);
        // a refused request changes nothing
        expect(await snapshot(app, w)).toEqual(before);
      } else {
        expect(res.status, JSON.stringify(res.body)).toBe(expected);
        await route.verify?.(app, w, res);
      }
    },
  );

  test("the matrix covers every route and credential (15 × 6)", () => {
    expect(matrix).toHaveLength(90);
    expect(matrix.filter((m) => m.expected !== 401)).toHaveLength(15);
  });
});

describe("rejection: forged, tampered, revoked and expired cookies", () => {
  const sessionPaths = ["/v1/me", "/v1/account", "/v1/account/api-keys"];

  test("a forged cookie of the right shape (random secret, wrong HMAC) → 401", async ({ app }) => {
    const forged = `svc_session=${randomBytes(32).toString("base64url")}.${randomBytes(32).toString("base64url")}`;
    for (const path of sessionPaths) {
      expectAuthFailed(await call(app, { method: "GET", path, headers: { cookie: forged } }), path);
    }
    expectAuthFailed(await call(app, { method: "POST", path: "/auth/logout", headers: { cookie: forged } }));
  });

  test("a real cookie with a tampered signature → 401, and the untampered cookie still works", async ({ app }) => {
    const user = await signIn(app);
    const value = cookieValueOf(user.cookie);
    const last = value.at(-1) === "A" ? "B" : "A";
    const tampered = `svc_session=${value.slice(0, -1)}${last}`;
    for (const path of sessionPaths) {
      expectAuthFailed(await call(app, { method: "GET", path, headers: { cookie: tampered } }), path);
    }
    expectAuthFailed(await call(app, { method: "POST", path: "/auth/logout", headers: { cookie: tampered } }));
    const ok = await call(app, { method: "GET", path: "/v1/me", headers: { cookie: user.cookie } });
    expect(ok.status).toBe(200);
  });

  test("a real cookie with a tampered secret (signature kept) → 401", async ({ app }) => {
    const user = await signIn(app);
    const value = cookieValueOf(user.cookie);
    const first = value[0] === "A" ? "B" : "A";
    const res = await call(app, {
      method: "GET",
      path: "/v1/me",
      headers: { cookie: `svc_session=${first}${value.slice(1)}` },
    });
    expectAuthFailed(res);
  });

  test("a cookie whose signature is valid but whose session was never stored → 401", async ({ app }) => {
    // the HMAC only proves we minted it; the database must still know it
    const user = await signIn(app);
    await app.rt.db.session.deleteMany({ where: { accountId: user.accountId } });
    expectAuthFailed(await call(app, { method: "GET", path: "/v1/me", headers: { cookie: user.cookie } }));
  });

  test("malformed cookie values (no dot, empty, oversized) → 401", async ({ app }) => {
    for (const v of ["nodot", "", ".", `${"a".repeat(300)}.${"b".repeat(43)}`]) {
      expectAuthFailed(
        await call(app, { method: "GET", path: "/v1/me", headers: { cookie: `svc_session=${v}` } }),
        JSON.stringify(v),
      );
    }
  });

  test("a session past its absolute expiry → 401 even though the sliding expiry is in the future", async ({ app }) => {
    const user = await signIn(app);
    await app.rt.db.session.updateMany({
      where: { accountId: user.accountId },
      data: { absoluteExpiresAt: new Date(Date.now() - 1000) },
    });
    expectAuthFailed(await call(app, { method: "GET", path: "/v1/me", headers: { cookie: user.cookie } }));
  });

  test("a revoked session (revokedAt set) → 401", async ({ app }) => {
    const user = await signIn(app);
    await app.rt.db.session.updateMany({ where: { accountId: user.accountId }, data: { revokedAt: new Date() } });
    expectAuthFailed(await call(app, { method: "GET", path: "/v1/account", headers: { cookie: user.cookie } }));
  });

  test("an expired session is not revived by using it", async ({ app }) => {
    const user = await signIn(app);
    await expireSession(app, user);
    expectAuthFailed(await call(app, { method: "GET", path: "/v1/me", headers: { cookie: user.cookie } }));
    const s = await app.rt.db.session.findFirstOrThrow({ where: { accountId: user.accountId } });
    expect(s.expiresAt.getTime()).toBeLessThan(Date.now());
    expectAuthFailed(await call(app, { method: "GET", path: "/v1/me", headers: { cookie: user.cookie } }));
  });
});

describe("rejection: invalid Bearer shapes on agent routes", () => {
  test("unknown svc_ key, non-svc token, wrong scheme, empty Bearer → 401", async ({ app }) => {
    const user = await signIn(app);
    const key = await createKey(app, user);
    const cases: Record<string, string> = {
      unknown: `Bearer svc_${randomBytes(32).toString("base64url")}`,
      notSvc: `Bearer ${randomBytes(32).toString("base64url")}`,
      basic: `Basic ${Buffer.from(`x:${key.apiKey}`).toString("base64")}`,
      tokenScheme: `Token ${key.apiKey}`,
      empty: "Bearer ",
      truncated: `Bearer ${key.apiKey.slice(0, -1)}`,
      twoTokens: `Bearer ${key.apiKey} ${key.apiKey}`,
    };
    for (const [label, authorization] of Object.entries(cases)) {
      expectAuthFailed(await call(app, { method: "GET", path: "/v1/agent/me", headers: { authorization } }), label);
    }
    // the real key still works (nothing above disturbed it)
    const ok = await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer(key.apiKey) });
    expect(ok.status).toBe(200);
  });

  test("unrelated cookies do not disturb either credential", async ({ app }) => {
    const user = await signIn(app);
    const key = await insertKey(app, user.accountId, "k");
    const agent = await call(app, {
      method: "GET",
      path: "/v1/agent/me",
      headers: { cookie: "theme=dark; _ga=GA1.2.3", ...bearer(key.apiKey) },
    });
    expect(agent.status).toBe(200);
    const session = await call(app, {
      method: "GET",
      path: "/v1/me",
      headers: { cookie: `theme=dark; ${user.cookie}; other=1` },
    });
    expect(session.status).toBe(200);
    // but an empty svc_session next to a Bearer is still a session cookie on an agent route
    expectAuthFailed(
      await call(app, {
        method: "GET",
        path: "/v1/agent/me",
        headers: { cookie: "svc_session=", ...bearer(key.apiKey) },
      }),
    );
  });

  test("without a credential, 401 comes before 404 (unknown id) and 400 (non-uuid)", async ({ app }) => {
    const res = await call(app, { method: "DELETE", path: `/v1/agent/keys/${randomUUID()}` });
    expectAuthFailed(res);
    const res2 = await call(app, { method: "GET", path: "/v1/agent/requests/not-a-uuid" });
    expectAuthFailed(res2);
  });
});
