import { randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { bearer, call, createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";

/**
 * Issue 28 deliverable 1: a key's policy, set at creation and changed later, on the session routes
 * (`/v1/account/api-keys`), the agent routes (`/v1/agent/keys`) and GraphQL: every field optional,
 * null removes a setting, each invalid field a 400 naming it with nothing changed, another
 * account's or a revoked key 404 as DELETE answers, an expired key 409.
 */

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
const app = () => world.app;

const TEXT_MODEL = "zai-org-glm-5-1";
const VIDEO_MODEL = "wan-2.6-text-to-video";

type Route = "session" | "agent";
interface Actor {
  user: SignedInUser;
  key: { id: string; apiKey: string };
}

async function actor(): Promise<Actor> {
  const user = await signIn(app());
  return { user, key: await createKey(app(), user, "main") };
}

const future = (ms = 3_600_000) => new Date(app().rt.clock.now().getTime() + ms).toISOString();

function auth(a: Actor, route: Route): Record<string, string> {
  return route === "session" ? { cookie: a.user.cookie } : bearer(a.key.apiKey);
}
const base = (route: Route) => (route === "session" ? "/v1/account/api-keys" : "/v1/agent/keys");

const mint = (a: Actor, route: Route, body: unknown) =>
  call(app(), { method: "POST", path: base(route), body, headers: auth(a, route) });
const patch = (a: Actor, route: Route, id: string, body: unknown) =>
  call(app(), { method: "PATCH", path: `${base(route)}/${id}`, body, headers: auth(a, route) });
const list = (a: Actor, route: Route) => call(app(), { method: "GET", path: base(route), headers: auth(a, route) });

/** The stored key and policy, for "nothing changed" (lastUsedAt moves with use: left out). */
const rowOf = (id: string) =>
  app().rt.db.apiKey.findUniqueOrThrow({
    where: { id },
    select: {
      name: true,
      status: true,
      limitMicroUsdc: true,
      limitReset: true,
      maxPriceCentsPerDollar: true,
      models: true,
      expiresAt: true,
    },
  });
const activeKeys = (accountId: string) => app().rt.db.apiKey.count({ where: { accountId, status: "active" } });

type KeyBody = Record<string, unknown>;
const NO_POLICY = {
  limitUsdc: null,
  limitReset: "never",
  maxPriceCentsPerDollar: null,
  models: null,
  expiresAt: null,
  spentUsdc: "0.000000",
  remainingUsdc: null,
  resetsAt: null,
};

/** Each invalid value of each field: a 400 naming the field, on create and on update. */
const INVALID: [string, KeyBody][] = [
  ["limitUsdc", { limitUsdc: "0.000000" }],
  ["limitUsdc", { limitUsdc: "-1.000000" }],
  ["limitUsdc", { limitUsdc: "1.5" }],
  ["limitUsdc", { limitUsdc: 5 }],
  ["limitUsdc", { limitUsdc: "1000000000.000001" }],
  ["limitUsdc", { limitUsdc: "five" }],
  ["limitReset", { limitReset: "hourly" }],
  ["limitReset", { limitReset: 1 }],
  ["maxPriceCentsPerDollar", { maxPriceCentsPerDollar: 29 }],
  ["maxPriceCentsPerDollar", { maxPriceCentsPerDollar: 81 }],
  ["maxPriceCentsPerDollar", { maxPriceCentsPerDollar: 50.5 }],
  ["maxPriceCentsPerDollar", { maxPriceCentsPerDollar: "50" }],
  ["models", { models: [] }],
  ["models", { models: "zai-org-glm-5-1" }],
  ["models", { models: [1] }],
  ["models", { models: [TEXT_MODEL, "no-such-model"] }],
  ["models", { models: Array.from({ length: 101 }, () => TEXT_MODEL) }],
  ["expiresAt", { expiresAt: "2020-01-01T00:00:00Z" }],
  ["expiresAt", { expiresAt: "tomorrow" }],
  ["expiresAt", { expiresAt: 1_900_000_000 }],
];

describe("create with a policy", () => {
  test.each<Route>(["session", "agent"])("%s route: every field, stored bare, shown with its usage", async (route) => {
    const a = await actor();
    const expiresAt = future();
    const r = await mint(a, route, {
      name: "sub-agent",
      limitUsdc: "2.500000",
      limitReset: "daily",
      maxPriceCentsPerDollar: 55,
      models: [`svc/${TEXT_MODEL}`, VIDEO_MODEL, TEXT_MODEL],
      expiresAt,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const body = r.body as KeyBody;
    const midnight = new Date(app().rt.clock.now());
    midnight.setUTCHours(24, 0, 0, 0);
    expect(body).toMatchObject({
      name: "sub-agent",
      source: route,
      limitUsdc: "2.500000",
      limitReset: "daily",
      maxPriceCentsPerDollar: 55,
      models: [TEXT_MODEL, VIDEO_MODEL],
      expiresAt: new Date(expiresAt).toISOString(),
      spentUsdc: "0.000000",
      remainingUsdc: "2.500000",
      resetsAt: midnight.toISOString(),
    });
    expect(body.apiKey).toMatch(/^svc_/);
    const row = await rowOf(String(body.id));
    expect(row).toMatchObject({
      limitMicroUsdc: 2_500_000n,
      limitReset: "daily",
      maxPriceCentsPerDollar: 55,
      models: [TEXT_MODEL, VIDEO_MODEL],
    });
    const listed = (await list(a, route)).body as { keys: KeyBody[] };
    const { apiKey: _plaintext, ...shown } = body;
    expect(listed.keys.find((k) => k.id === body.id)).toEqual(shown);
  });

  test("without a policy a key is unlimited (the default of every field)", async () => {
    const a = await actor();
    const r = await mint(a, "agent", { name: "plain" });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject(NO_POLICY);
    const explicitNulls = await mint(a, "session", {
      name: "nulls",
      limitUsdc: null,
      limitReset: null,
      maxPriceCentsPerDollar: null,
      models: null,
      expiresAt: null,
    });
    expect(explicitNulls.status).toBe(201);
    expect(explicitNulls.body).toMatchObject(NO_POLICY);
  });

  test("a limit that never resets: remaining shown, resetsAt null", async () => {
    const a = await actor();
    const r = await mint(a, "session", { name: "once", limitUsdc: "1.000000" });
    expect(r.body).toMatchObject({ limitReset: "never", remainingUsdc: "1.000000", resetsAt: null });
  });

  test.each<Route>(["session", "agent"])(
    "%s route: each invalid field → 400 naming it, no key minted",
    async (route) => {
      const a = await actor();
      const before = await activeKeys(a.user.accountId);
      for (const [field, bad] of INVALID) {
        const r = await mint(a, route, { name: "bad", ...bad });
        expectError(r, 400, "invalid_request", `${route} create ${JSON.stringify(bad).slice(0, 80)}`);
        expect((r.body as { error: { field?: string } }).error.field, JSON.stringify(bad).slice(0, 80)).toBe(field);
      }
      expect(await activeKeys(a.user.accountId)).toBe(before);
    },
  );
});

describe("PATCH a key's policy", () => {
  test.each<Route>(["session", "agent"])("%s route: only the fields sent change; null removes", async (route) => {
    const a = await actor();
    const k = (await mint(a, "session", { name: "k", limitUsdc: "3.000000", limitReset: "weekly" })).body as KeyBody;
    const id = String(k.id);

    const r1 = await patch(a, route, id, { maxPriceCentsPerDollar: 40, models: [TEXT_MODEL] });
    expect(r1.status, JSON.stringify(r1.body)).toBe(200);
    expect(r1.body).toMatchObject({
      id,
      name: "k",
      limitUsdc: "3.000000",
      limitReset: "weekly",
      maxPriceCentsPerDollar: 40,
      models: [TEXT_MODEL],
      expiresAt: null,
    });
    expect((r1.body as KeyBody).resetsAt).toEqual(expect.any(String));

    const expiresAt = future(86_400_000);
    const r2 = await patch(a, route, id, { name: "renamed", limitUsdc: null, expiresAt });
    expect(r2.body).toMatchObject({
      name: "renamed",
      limitUsdc: null,
      limitReset: "weekly",
      maxPriceCentsPerDollar: 40,
      models: [TEXT_MODEL],
      expiresAt: new Date(expiresAt).toISOString(),
      remainingUsdc: null,
      resetsAt: null,
    });

    const r3 = await patch(a, route, id, {
      limitReset: null,
      maxPriceCentsPerDollar: null,
      models: null,
      expiresAt: null,
    });
    expect(r3.body).toMatchObject({ name: "renamed", ...NO_POLICY });
    const row = await rowOf(id);
    expect(row).toMatchObject({
      limitMicroUsdc: null,
      limitReset: "never",
      maxPriceCentsPerDollar: null,
      models: [],
      expiresAt: null,
    });
  });

  test.each<Route>(["session", "agent"])(
    "%s route: each invalid field → 400 naming it; nothing changed (the valid fields beside it neither)",
    async (route) => {
      const a = await actor();
      const k = (await mint(a, "session", { name: "k", limitUsdc: "1.000000", models: [TEXT_MODEL] })).body as KeyBody;
      const id = String(k.id);
      const before = await rowOf(id);
      const cases: [string, KeyBody][] = [
        ...INVALID,
        ["name", { name: "" }],
        ["name", { name: "x".repeat(65) }],
        ["name", { name: null }],
      ];
      for (const [field, bad] of cases) {
        // a valid change beside the bad field must not be written either
        const r = await patch(a, route, id, { maxPriceCentsPerDollar: 33, ...bad });
        expectError(r, 400, "invalid_request", `${route} patch ${JSON.stringify(bad).slice(0, 80)}`);
        expect((r.body as { error: { field?: string } }).error.field, JSON.stringify(bad).slice(0, 80)).toBe(field);
      }
      expect(await rowOf(id)).toEqual(before);
    },
  );

  test.each<Route>(["session", "agent"])(
    "%s route: a body that names nothing → 400, nothing changed",
    async (route) => {
      const a = await actor();
      const before = await rowOf(a.key.id);
      for (const body of [{}, { walletAddress: a.user.walletAddress }, { unknownField: 1 }]) {
        const r = await patch(a, route, a.key.id, body);
        expectError(r, 400, "invalid_request", `${route} ${JSON.stringify(body)}`);
        expect((r.body as { error: { message: string } }).error.message).toContain("Nothing to change");
      }
      expect(await rowOf(a.key.id)).toEqual(before);
    },
  );

  test.each<Route>(["session", "agent"])(
    "%s route: another account's key, an unknown id or a revoked key → 404 (as DELETE); a malformed id → 400",
    async (route) => {
      const owner = await actor();
      const other = await actor();
      const before = await rowOf(owner.key.id);
      const foreign = await patch(other, route, owner.key.id, { limitUsdc: "1.000000" });
      expectError(foreign, 404, "not_found", "another account's key");
      expectError(await patch(other, route, randomUUID(), { limitUsdc: "1.000000" }), 404, "not_found", "unknown");
      const spare = await createKey(app(), owner.user, "spare");
      const revoke = await call(app(), {
        method: "DELETE",
        path: `/v1/account/api-keys/${spare.id}`,
        headers: { cookie: owner.user.cookie },
      });
      expect(revoke.status).toBe(200);
      expectError(await patch(owner, route, spare.id, { limitUsdc: "1.000000" }), 404, "not_found", "revoked");
      const malformed = await patch(owner, route, "not-a-uuid", { limitUsdc: "1.000000" });
      expectError(malformed, 400, "invalid_request", "malformed id");
      expect((malformed.body as { error: { field?: string } }).error.field).toBe("id");
      expect(await rowOf(owner.key.id)).toEqual(before);
      expect((await rowOf(spare.id)).limitMicroUsdc).toBeNull();
    },
  );

  test("an expired key: 409 conflict (expiry is final), nothing changed; it stays listed until revoked", async () => {
    const a = await actor();
    const k = (await mint(a, "session", { name: "short", expiresAt: future(60_000) })).body as KeyBody;
    const id = String(k.id);
    await app().rt.db.apiKey.update({ where: { id }, data: { expiresAt: new Date(Date.now() - 1_000) } });
    const before = await rowOf(id);
    const r = await patch(a, "session", id, { expiresAt: future(), limitUsdc: "1.000000" });
    expectError(r, 409, "conflict", "expired");
    expect((r.body as { error: { field?: string } }).error.field).toBe("expiresAt");
    expect(await rowOf(id)).toEqual(before);
    const listed = (await list(a, "agent")).body as { keys: KeyBody[] };
    expect(listed.keys.find((x) => x.id === id)?.expiresAt).toBe(before.expiresAt?.toISOString());
    const del = await call(app(), {
      method: "DELETE",
      path: `/v1/agent/keys/${id}`,
      headers: bearer(a.key.apiKey),
    });
    expect(del.status).toBe(200);
  });
});

describe("expiresAt: after it the key is refused as a revoked key is", () => {
  test("REST Bearer, GraphQL Bearer and MCP: 401 authentication_failed once the expiry passed", async () => {
    const a = await actor();
    // every scope (a key with a policy holds `inference` alone unless it names them: issue 38)
    const scopes = ["inference", "keys", "account"];
    const k = (await mint(a, "session", { name: "soon", expiresAt: future(60_000), scopes })).body as KeyBody & {
      apiKey: string;
    };
    const me = () => call(app(), { method: "GET", path: "/v1/agent/me", headers: bearer(k.apiKey) });
    expect((await me()).status).toBe(200);
    await app().rt.db.apiKey.update({ where: { id: String(k.id) }, data: { expiresAt: new Date(Date.now() - 1) } });
    expectError(await me(), 401, "authentication_failed", "REST after expiry");
    expectError(
      await call(app(), { method: "GET", path: "/v1/agent/key", headers: bearer(k.apiKey) }),
      401,
      "authentication_failed",
      "GET /v1/agent/key after expiry",
    );
    const gql = await call(app(), {
      method: "POST",
      path: "/graphql",
      headers: bearer(k.apiKey),
      body: { query: "{ viewer { accountId } }" },
    });
    expect(gql.body).toEqual({ data: { viewer: null } });
    const mcp = await fetch(`${app().baseUrl}/mcp`, {
      method: "POST",
      headers: {
        ...bearer(k.apiKey),
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(mcp.status).toBe(401);
    expect(mcp.headers.get("x-svc-error-code")).toBe("authentication_failed");
    // the account's other key is unaffected
    expect((await call(app(), { method: "GET", path: "/v1/agent/me", headers: bearer(a.key.apiKey) })).status).toBe(
      200,
    );
  });
});

describe("GraphQL: createApiKey and updateApiKey carry the same policy", () => {
  const gql = (a: Actor, query: string, variables: Record<string, unknown> = {}) =>
    call(app(), { method: "POST", path: "/graphql", headers: bearer(a.key.apiKey), body: { query, variables } });
  const FIELDS =
    "id name limitUsdc limitReset maxPriceCentsPerDollar models expiresAt spentUsdc remainingUsdc resetsAt";

  test("create with a policy, update, remove with null; the listing shows it", async () => {
    const a = await actor();
    const created = await gql(
      a,
      `mutation { createApiKey(input: { name: "gql", limitUsdc: "1500000", limitReset: MONTHLY,
        maxPriceCentsPerDollar: 60, models: ["svc/${TEXT_MODEL}"] }) { apiKey key { ${FIELDS} } } }`,
    );
    const key = (created.body as { data: { createApiKey: { key: KeyBody } } }).data.createApiKey.key;
    expect(key).toMatchObject({
      limitUsdc: "1500000",
      limitReset: "MONTHLY",
      maxPriceCentsPerDollar: 60,
      models: [TEXT_MODEL],
      expiresAt: null,
      spentUsdc: "0",
      remainingUsdc: "1500000",
      resetsAt: expect.stringMatching(/-01T00:00:00\.000Z$/),
    });
    const updated = await gql(
      a,
      `mutation($id: ID!) { updateApiKey(input: { id: $id, limitUsdc: null, models: null, maxPriceCentsPerDollar: 45 }) {
        key { ${FIELDS} } } }`,
      { id: key.id },
    );
    expect((updated.body as { data: { updateApiKey: { key: KeyBody } } }).data.updateApiKey.key).toMatchObject({
      limitUsdc: null,
      limitReset: "MONTHLY",
      maxPriceCentsPerDollar: 45,
      models: null,
      remainingUsdc: null,
      resetsAt: null,
    });
    const viewer = await gql(a, `{ viewer { apiKeys { ${FIELDS} } } }`);
    const listed = (viewer.body as { data: { viewer: { apiKeys: KeyBody[] } } }).data.viewer.apiKeys;
    expect(listed.find((k) => k.id === key.id)).toMatchObject({ maxPriceCentsPerDollar: 45, limitUsdc: null });
  });

  test("invalid fields → invalid_request naming them, nothing changed; another account's key → not_found", async () => {
    const a = await actor();
    const before = await rowOf(a.key.id);
    for (const [field, input] of [
      ["limitUsdc", 'limitUsdc: "0"'],
      ["maxPriceCentsPerDollar", "maxPriceCentsPerDollar: 90"],
      ["models", 'models: ["no-such-model"]'],
      ["models", "models: []"],
      ["expiresAt", 'expiresAt: "2020-01-01T00:00:00Z"'],
      ["name", 'name: ""'],
    ]) {
      const r = await gql(a, `mutation($id: ID!) { updateApiKey(input: { id: $id, ${input} }) { key { id } } }`, {
        id: a.key.id,
      });
      const err = (r.body as { errors?: { extensions?: { code?: string; details?: { field?: string } } }[] })
        .errors?.[0];
      expect(err?.extensions?.code, input).toBe("invalid_request");
      expect(err?.extensions?.details?.field, input).toBe(field);
    }
    const empty = await gql(a, "mutation($id: ID!) { updateApiKey(input: { id: $id }) { key { id } } }", {
      id: a.key.id,
    });
    expect((empty.body as { errors?: { extensions?: { code?: string } }[] }).errors?.[0]?.extensions?.code).toBe(
      "invalid_request",
    );
    const other = await actor();
    const foreign = await gql(
      other,
      'mutation($id: ID!) { updateApiKey(input: { id: $id, limitUsdc: "1" }) { key { id } } }',
      { id: a.key.id },
    );
    expect((foreign.body as { errors?: { extensions?: { code?: string } }[] }).errors?.[0]?.extensions?.code).toBe(
      "not_found",
    );
    const badCreate = await gql(
      a,
      'mutation { createApiKey(input: { name: "x", limitReset: DAILY, limitUsdc: "-5" }) { apiKey } }',
    );
    expect(
      (badCreate.body as { errors?: { extensions?: { details?: { field?: string } } }[] }).errors?.[0]?.extensions
        ?.details?.field,
    ).toBe("limitUsdc");
    expect(await rowOf(a.key.id)).toEqual(before);
    expect(await activeKeys(a.user.accountId)).toBe(1);
  });
});
