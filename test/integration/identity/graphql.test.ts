import { randomBytes, randomUUID } from "node:crypto";
import { createClient } from "graphql-sse";
import { describe, expect } from "vitest";
import { bearer, call, createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import type { TestApp } from "../../../testkit/harness.js";
import { activeKeyCount, maxPriceOf, sha256Hex } from "../../../testkit/identity.js";

/**
 * GraphQL at /graphql serves both credentials: `viewer`, key mutations and `setMaxPrice`, the
 * CSRF rule for cookie-authenticated writes, and the owner-only `balanceChanged` subscription.
 */

interface GqlError {
  message: string;
  extensions?: { code?: string; status?: number };
}
interface GqlResult<T = Record<string, unknown>> {
  status: number;
  data?: T | null;
  errors?: GqlError[];
  headers: Headers;
  raw: unknown;
}

async function gql<T = Record<string, unknown>>(
  app: TestApp,
  query: string,
  opts: { headers?: Record<string, string>; variables?: Record<string, unknown> } = {},
): Promise<GqlResult<T>> {
  const res = await fetch(`${app.baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", ...opts.headers },
    body: JSON.stringify({ query, variables: opts.variables }),
  });
  const text = await res.text();
  let raw: unknown = text;
  try {
    raw = JSON.parse(text);
  } catch {}
  const body = raw as { data?: T | null; errors?: GqlError[] };
  return { status: res.status, data: body?.data, errors: body?.errors, headers: res.headers, raw };
}

interface Actor {
  user: SignedInUser;
  key: { id: string; apiKey: string };
}
async function actor(app: TestApp): Promise<Actor> {
  const user = await signIn(app);
  return { user, key: await createKey(app, user, "gql") };
}
const asCookie = (a: Actor) => ({ cookie: a.user.cookie });
const asBearer = (a: Actor) => bearer(a.key.apiKey);

const VIEWER = `{ viewer { accountId walletAddress authProvider maxPriceCentsPerDollar confirmedUsdc pendingUsdc
  apiKeys { id name keyPrefix } ledger(first: 5) { edges { node { id } } pageInfo { hasNextPage } } } }`;
const CREATE = `mutation($name: String!) { createApiKey(input: { name: $name }) { apiKey key { id name keyPrefix source } } }`;
const REVOKE = `mutation($id: ID!) { revokeApiKey(input: { id: $id }) { id status } }`;
const SET_MAX = `mutation($v: Int!) { setMaxPrice(input: { maxPriceCentsPerDollar: $v }) { walletAddress maxPriceCentsPerDollar } }`;

/** n balanced top-up journals on the account's pending book. */
async function addLedgerLines(app: TestApp, accountId: string, n: number) {
  for (let i = 0; i < n; i++) {
    const amount = BigInt(1_000_000 + i);
    await app.rt.db.ledgerTransaction.create({
      data: {
        kind: "top_up",
        idempotencyKey: `test:${randomUUID()}`,
        entries: {
          create: [
            { accountId, book: "buyer_pending", kind: "top_up", amountMicroUsdc: amount },
            { accountId: null, book: "external", kind: "top_up", amountMicroUsdc: -amount },
          ],
        },
      },
    });
  }
}

type ViewerData = {
  viewer: {
    accountId: string;
    walletAddress: string;
    authProvider: string;
    maxPriceCentsPerDollar: number;
    confirmedUsdc: string;
    pendingUsdc: string;
    apiKeys: { id: string; name: string; keyPrefix: string }[];
    ledger: { edges: { node: { id: string } }[]; pageInfo: { hasNextPage: boolean } };
  } | null;
};

describe("success: viewer", () => {
  test.for([
    ["Bearer", asBearer],
    ["session cookie", asCookie],
  ] as const)("viewer with a %s", async ([_label, cred], { app }) => {
    const a = await actor(app);
    await addLedgerLines(app, a.user.accountId, 7);
    await app.rt.db.account.update({
      where: { id: a.user.accountId },
      data: { pendingMicroUsdc: 7_000_021n, confirmedMicroUsdc: 1_234_567n, maxPriceCentsPerDollar: 63 },
    });
    const r = await gql<ViewerData>(app, VIEWER, { headers: cred(a) });
    expect(r.status).toBe(200);
    expect(r.errors).toBeUndefined();
    const v = r.data?.viewer;
    expect(v).toMatchObject({
      accountId: a.user.accountId,
      walletAddress: a.user.walletAddress.toLowerCase(),
      authProvider: "IDP",
      maxPriceCentsPerDollar: 63,
      confirmedUsdc: "1234567",
      pendingUsdc: "7000021",
      apiKeys: [{ id: a.key.id, name: "gql", keyPrefix: a.key.apiKey.slice(0, 12) }],
    });
    expect(v?.ledger.edges).toHaveLength(5);
    expect(v?.ledger.pageInfo.hasNextPage).toBe(true);
    expect(new Set(v?.ledger.edges.map((e) => e.node.id)).size).toBe(5);
    expect(JSON.stringify(r.raw)).not.toContain(a.key.apiKey);
  });

  test("anonymous → viewer null (no error); an invalid Bearer → viewer null", async ({ app }) => {
    const anon = await gql<ViewerData>(app, VIEWER);
    expect(anon.status).toBe(200);
    expect(anon.errors).toBeUndefined();
    expect(anon.data?.viewer).toBeNull();
    const bad = await gql<ViewerData>(app, VIEWER, { headers: bearer(`svc_${randomBytes(32).toString("base64url")}`) });
    expect(bad.data?.viewer).toBeNull();
  });

  test("a session cookie AND a Bearer together are refused as ambiguous → viewer null", async ({ app }) => {
    const a = await actor(app);
    const r = await gql<ViewerData>(app, VIEWER, { headers: { ...asCookie(a), ...asBearer(a) } });
    expect(r.data?.viewer).toBeNull();
    const m = await gql(app, SET_MAX, { headers: { ...asCookie(a), ...asBearer(a) }, variables: { v: 31 } });
    expect(m.errors?.length).toBeGreaterThan(0);
    expect(await maxPriceOf(app, a.user.accountId)).toBe(80);
  });

  test("viewer.apiKeys lists only active keys of the viewer", async ({ app }) => {
    const a = await actor(app);
    const b = await actor(app);
    const revoked = await createKey(app, a.user, "gone");
    await call(app, { method: "DELETE", path: `/v1/account/api-keys/${revoked.id}`, headers: asCookie(a) });
    const r = await gql<ViewerData>(app, VIEWER, { headers: asBearer(a) });
    expect(r.data?.viewer?.apiKeys.map((k) => k.id)).toEqual([a.key.id]);
    expect(JSON.stringify(r.raw)).not.toContain(b.key.id);
  });
});

describe("success: mutations with either credential", () => {
  test.for([
    ["Bearer", asBearer, "AGENT"],
    ["session cookie", asCookie, "SESSION"],
  ] as const)("createApiKey / revokeApiKey / setMaxPrice with a %s", async ([_label, cred, source], { app }) => {
    const a = await actor(app);
    const created = await gql<{ createApiKey: { apiKey: string; key: Record<string, string> } }>(app, CREATE, {
      headers: cred(a),
      variables: { name: "from-gql" },
    });
    expect(created.errors).toBeUndefined();
    const payload = created.data?.createApiKey;
    expect(payload?.apiKey).toMatch(/^svc_[A-Za-z0-9_-]{43}$/);
    expect(payload?.key).toEqual({
      id: expect.any(String),
      name: "from-gql",
      keyPrefix: payload?.apiKey.slice(0, 12),
      source,
    });
    const row = await app.rt.db.apiKey.findUniqueOrThrow({ where: { id: payload?.key.id } });
    expect(row.keyHash).toBe(sha256Hex(payload?.apiKey ?? ""));
    expect(
      (await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer(payload?.apiKey ?? "") })).status,
    ).toBe(200);

    const revoked = await gql<{ revokeApiKey: { id: string; status: string } }>(app, REVOKE, {
      headers: cred(a),
      variables: { id: payload?.key.id },
    });
    expect(revoked.errors).toBeUndefined();
    expect(revoked.data?.revokeApiKey).toEqual({ id: payload?.key.id, status: "revoked" });
    expect(
      (await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer(payload?.apiKey ?? "") })).status,
    ).toBe(401);

    const set = await gql<{ setMaxPrice: { walletAddress: string; maxPriceCentsPerDollar: number } }>(app, SET_MAX, {
      headers: cred(a),
      variables: { v: 30 },
    });
    expect(set.errors).toBeUndefined();
    expect(set.data?.setMaxPrice).toEqual({
      walletAddress: a.user.walletAddress.toLowerCase(),
      maxPriceCentsPerDollar: 30,
    });
    expect(await maxPriceOf(app, a.user.accountId)).toBe(30);
  });

  test("revokeApiKey may revoke the calling key", async ({ app }) => {
    const a = await actor(app);
    const r = await gql(app, REVOKE, { headers: asBearer(a), variables: { id: a.key.id } });
    expect(r.errors).toBeUndefined();
    expect((await call(app, { method: "GET", path: "/v1/agent/me", headers: asBearer(a) })).status).toBe(401);
  });
});

describe("rejection", () => {
  test("anonymous mutations are refused and change nothing", async ({ app }) => {
    const a = await actor(app);
    const keysBefore = await app.rt.db.apiKey.count();
    for (const [query, variables] of [
      [CREATE, { name: "anon" }],
      [REVOKE, { id: a.key.id }],
      [SET_MAX, { v: 40 }],
    ] as const) {
      const r = await gql(app, query, { variables });
      expect(r.data ?? null).toBeNull();
      expect(r.errors?.length).toBeGreaterThan(0);
    }
    expect(await app.rt.db.apiKey.count()).toBe(keysBefore);
    expect((await app.rt.db.apiKey.findUniqueOrThrow({ where: { id: a.key.id } })).status).toBe("active");
    expect(await maxPriceOf(app, a.user.accountId)).toBe(80);
  });

  // regression: fixed bug in src/graphql/errors.ts
  test("anonymous mutations carry extensions.code authentication_failed", async ({ app }) => {
    for (const [query, variables] of [
      [CREATE, { name: "anon" }],
      [REVOKE, { id: randomUUID() }],
      [SET_MAX, { v: 40 }],
    ] as const) {
      const r = await gql(app, query, { variables });
      expect(r.errors?.[0]?.extensions?.code).toBe("authentication_failed");
    }
  });

  test.for([
    ["Bearer", asBearer],
    ["session cookie", asCookie],
  ] as const)("setMaxPrice out of range with a %s → invalid_request, unchanged", async ([_label, cred], { app }) => {
    const a = await actor(app);
    for (const v of [29, 81, 0, -1]) {
      const r = await gql(app, SET_MAX, { headers: cred(a), variables: { v } });
      expect(r.errors?.[0]?.extensions?.code, String(v)).toBe("invalid_request");
    }
    expect(await maxPriceOf(app, a.user.accountId)).toBe(80);
  });

  test("createApiKey with a bad name → invalid_request; revokeApiKey of a non-uuid → invalid_request", async ({
    app,
  }) => {
    const a = await actor(app);
    for (const name of ["", "n".repeat(65)]) {
      const r = await gql(app, CREATE, { headers: asBearer(a), variables: { name } });
      expect(r.errors?.[0]?.extensions?.code).toBe("invalid_request");
    }
    const r = await gql(app, REVOKE, { headers: asBearer(a), variables: { id: "nope" } });
    expect(r.errors?.[0]?.extensions?.code).toBe("invalid_request");
    expect(await activeKeyCount(app, a.user.accountId)).toBe(1);
  });

  test("revokeApiKey of another account's key → not_found, and the key keeps working", async ({ app }) => {
    const a = await actor(app);
    const victim = await actor(app);
    const r = await gql(app, REVOKE, { headers: asBearer(a), variables: { id: victim.key.id } });
    expect(r.errors?.[0]?.extensions?.code).toBe("not_found");
    expect((await call(app, { method: "GET", path: "/v1/agent/me", headers: asBearer(victim) })).status).toBe(200);
  });

  test("the 10-key cap applies through GraphQL (key_limit_reached), counting REST-minted keys", async ({ app }) => {
    const a = await actor(app);
    for (let i = 0; i < 8; i++) await createKey(app, a.user, `rest-${i}`);
    const ok = await gql(app, CREATE, { headers: asBearer(a), variables: { name: "tenth" } });
    expect(ok.errors).toBeUndefined();
    const over = await gql(app, CREATE, { headers: asCookie(a), variables: { name: "eleventh" } });
    expect(over.errors?.[0]?.extensions?.code).toBe("key_limit_reached");
    expect(over.errors?.[0]?.extensions?.status).toBe(409);
    expect(await activeKeyCount(app, a.user.accountId)).toBe(10);
  });

  test("concurrent GraphQL creates never exceed the cap", async ({ app }) => {
    const a = await actor(app);
    const results = await Promise.all(
      Array.from({ length: 14 }, (_, i) => gql(app, CREATE, { headers: asBearer(a), variables: { name: `c${i}` } })),
    );
    const ok = results.filter((r) => !r.errors);
    const capped = results.filter((r) => r.errors?.[0]?.extensions?.code === "key_limit_reached");
    expect(ok).toHaveLength(9);
    expect(capped).toHaveLength(5);
    expect(await activeKeyCount(app, a.user.accountId)).toBe(10);
  });
});

describe("authorisation: ledger entries are not globally addressable", () => {
  test("node(id) never resolves a ledger entry, for the owner, another account or an anonymous caller", async ({
    app,
  }) => {
    const owner = await actor(app);
    const stranger = await actor(app);
    await addLedgerLines(app, owner.user.accountId, 1);
    const mine = await gql<ViewerData>(app, VIEWER, { headers: asBearer(owner) });
    const id = mine.data?.viewer?.ledger.edges[0]?.node.id;
    expect(id).toEqual(expect.any(String));
    const q = `query($id: ID!) { node(id: $id) { id } }`;
    for (const headers of [asBearer(owner), asBearer(stranger), {}]) {
      const r = await gql<{ node: unknown }>(app, q, { headers, variables: { id } });
      expect(r.data?.node ?? null).toBeNull();
      expect(JSON.stringify(r.data ?? {})).not.toContain("buyer_pending");
    }
    // a fragment on LedgerEntry is not even valid: it is not a Node
    const typed = await gql(app, `query($id: ID!) { node(id: $id) { ... on LedgerEntry { amount } } }`, {
      headers: asBearer(owner),
      variables: { id },
    });
    expect(typed.errors?.length).toBeGreaterThan(0);
    expect(typed.data?.node ?? null).toBeNull();
  });
});

describe("CSRF: cookie-authenticated writes from a foreign origin", () => {
  test("POST /graphql with a cookie and Origin https://evil.example → 403 csrf_rejected, nothing changed", async ({
    app,
  }) => {
    const a = await actor(app);
    const keysBefore = await activeKeyCount(app, a.user.accountId);
    for (const [query, variables] of [
      [SET_MAX, { v: 31 }],
      [CREATE, { name: "csrf" }],
      [REVOKE, { id: a.key.id }],
    ] as const) {
      const r = await gql(app, query, { headers: { ...asCookie(a), origin: "https://evil.example" }, variables });
      expectError({ status: r.status, body: r.raw, headers: r.headers }, 403, "csrf_rejected");
    }
    expect(await maxPriceOf(app, a.user.accountId)).toBe(80);
    expect(await activeKeyCount(app, a.user.accountId)).toBe(keysBefore);
  });

  test("PATCH /v1/account/max-price with a cookie and a foreign or opaque Origin → 403, nothing changed", async ({
    app,
  }) => {
    const a = await actor(app);
    for (const origin of ["https://evil.example", "null", `${app.baseUrl}.evil.example`, "http://127.0.0.1:1"]) {
      const r = await call(app, {
        method: "PATCH",
        path: "/v1/account/max-price",
        body: { maxPriceCentsPerDollar: 31 },
        headers: { ...asCookie(a), origin },
      });
      expectError(r, 403, "csrf_rejected", origin);
    }
    expect(await maxPriceOf(app, a.user.accountId)).toBe(80);
    const key = await call(app, {
      method: "POST",
      path: "/v1/account/api-keys",
      body: { name: "csrf" },
      headers: { ...asCookie(a), origin: "https://evil.example" },
    });
    expectError(key, 403, "csrf_rejected");
    const logout = await call(app, {
      method: "POST",
      path: "/auth/logout",
      headers: { ...asCookie(a), origin: "https://evil.example" },
    });
    expectError(logout, 403, "csrf_rejected");
    expect((await call(app, { method: "GET", path: "/v1/me", headers: asCookie(a) })).status).toBe(200);
  });

  test("the same writes with Origin equal to the app's base URL succeed", async ({ app }) => {
    const a = await actor(app);
    const origin = new URL(app.baseUrl).origin;
    const g = await gql(app, SET_MAX, { headers: { ...asCookie(a), origin }, variables: { v: 33 } });
    expect(g.status).toBe(200);
    expect(g.errors).toBeUndefined();
    expect(await maxPriceOf(app, a.user.accountId)).toBe(33);
    const p = await call(app, {
      method: "PATCH",
      path: "/v1/account/max-price",
      body: { maxPriceCentsPerDollar: 34 },
      headers: { ...asCookie(a), origin },
    });
    expect(p.status).toBe(200);
    expect(await maxPriceOf(app, a.user.accountId)).toBe(34);
  });

  test("a mutation over GET is refused (405) even with a cookie, and changes nothing", async ({ app }) => {
    const a = await actor(app);
    const url = `${app.baseUrl}/graphql?query=${encodeURIComponent("mutation { setMaxPrice(input: { maxPriceCentsPerDollar: 31 }) { maxPriceCentsPerDollar } }")}`;
    const res = await fetch(url, { headers: { ...asCookie(a), origin: "https://evil.example" } });
    expect(res.status).toBe(405);
    expect(await maxPriceOf(app, a.user.accountId)).toBe(80);
  });
});

describe("balanceChanged subscription", () => {
  type Event = { balanceChanged: { kind: string; at: string } };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const setMaxRest = (app: TestApp, a: Actor, v: number) =>
    call(app, {
      method: "PATCH",
      path: "/v1/agent/max-price",
      body: { maxPriceCentsPerDollar: v },
      headers: asBearer(a),
    });

  test("delivers the viewer's own max_price changes and never another account's", async ({ app }) => {
    const a = await actor(app);
    const b = await actor(app);
    const client = createClient({ url: `${app.baseUrl}/graphql`, headers: asBearer(a), retryAttempts: 0 });
    const received: Event[] = [];
    const errors: unknown[] = [];
    const it = client.iterate<Event>({ query: "subscription { balanceChanged { kind at } }" });
    const reader = (async () => {
      try {
        for await (const r of it) {
          if (r.data) received.push(r.data);
          if (r.errors) errors.push(r.errors);
        }
      } catch (e) {
        errors.push(e);
      }
    })();
    try {
      // no acknowledgement: publish until the first event arrives (bounded)
      for (let i = 0; i < 100 && received.length === 0; i++) {
        expect((await setMaxRest(app, a, 30 + (i % 50))).status).toBe(200);
        await sleep(50);
      }
      expect(received.length).toBeGreaterThan(0);
      const first = received[0]?.balanceChanged;
      expect(first?.kind).toBe("max_price");
      expect(Math.abs(Date.parse(first?.at ?? "") - Date.now())).toBeLessThan(30_000);

      // let in-flight events land, then B changes: none may reach A
      await sleep(300);
      const settled = received.length;
      for (let i = 0; i < 5; i++) expect((await setMaxRest(app, b, 40 + i)).status).toBe(200);
      await sleep(400);
      expect(received.length).toBe(settled);

      // A's next change is still delivered (the stream is live)
      expect((await setMaxRest(app, a, 77)).status).toBe(200);
      for (let i = 0; i < 40 && received.length === settled; i++) await sleep(50);
      expect(received.length).toBe(settled + 1);
      expect(received.at(-1)?.balanceChanged.kind).toBe("max_price");
      expect(errors).toEqual([]);
    } finally {
      await it.return?.();
      client.dispose();
      await Promise.race([reader, sleep(1000)]);
    }
  });

  test("a key minted, changed or revoked through REST reaches the owner's stream (the dashboard re-reads)", async ({
    app,
  }) => {
    const a = await actor(app);
    const client = createClient({ url: `${app.baseUrl}/graphql`, headers: asBearer(a), retryAttempts: 0 });
    const kinds: string[] = [];
    const it = client.iterate<Event>({ query: "subscription { balanceChanged { kind at } }" });
    const reader = (async () => {
      try {
        for await (const r of it) if (r.data) kinds.push(r.data.balanceChanged.kind);
      } catch {
        // closed
      }
    })();
    const rest = (method: string, path: string, body?: unknown) =>
      call(app, { method, path, headers: asBearer(a), ...(body ? { body } : {}) });
    try {
      // no acknowledgement: mint until the first event arrives (bounded by the 10-key cap)
      let minted: { id: string } | undefined;
      for (let i = 0; i < 8 && kinds.length === 0; i++) {
        const r = await rest("POST", "/v1/agent/keys", { name: `k${i}` });
        expect(r.status).toBe(201);
        minted = r.body as { id: string };
        await sleep(150);
      }
      expect(kinds[0]).toBe("api_key_created");
      const id = minted?.id ?? "";
      expect((await rest("PATCH", `/v1/agent/keys/${id}`, { limitUsdc: "1.000000" })).status).toBe(200);
      expect((await rest("DELETE", `/v1/agent/keys/${id}`)).status).toBe(200);
      for (let i = 0; i < 40 && !kinds.includes("api_key_revoked"); i++) await sleep(50);
      expect(kinds).toEqual(expect.arrayContaining(["api_key_updated", "api_key_revoked"]));
    } finally {
      await it.return?.();
      client.dispose();
      await Promise.race([reader, sleep(1000)]);
    }
  });

  test("an anonymous subscription is refused with authentication_failed", async ({ app }) => {
    const client = createClient({ url: `${app.baseUrl}/graphql`, retryAttempts: 0 });
    const results: { errors?: readonly { extensions?: Record<string, unknown> }[] }[] = [];
    const it = client.iterate({ query: "subscription { balanceChanged { kind at } }" });
    const reader = (async () => {
      try {
        for await (const r of it) results.push(r as (typeof results)[number]);
      } catch (e) {
        results.push({ errors: [{ extensions: { thrown: String(e) } }] });
      }
    })();
    await Promise.race([reader, sleep(3000)]);
    await it.return?.();
    client.dispose();
    expect(results).toHaveLength(1);
    expect(results[0]?.errors?.[0]?.extensions?.code).toBe("authentication_failed");
  });
});
