import { randomBytes, randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { bearer, call, createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectAuthFailed, expectError } from "../../../testkit/errors.js";
import type { TestApp } from "../../../testkit/harness.js";
import { activeKeyCount, cookieValueOf, sha256Hex } from "../../../testkit/identity.js";

/** SPEC "API key", "Limits" (10 active keys, names 1-64), "Authentication" rule 3 (plaintext once). */

const KEY_RE = /^svc_[A-Za-z0-9_-]{43}$/;
// metadata, policy (issue 28) and this period's usage
const METADATA_FIELDS = [
  "createdAt",
  "expiresAt",
  "id",
  "keyPrefix",
  "lastUsedAt",
  "limitReset",
  "limitUsdc",
  "maxPriceCentsPerDollar",
  "models",
  "name",
  "parentId",
  "remainingUsdc",
  "resetsAt",
  "scopes",
  "source",
  "spentUsdc",
];

const postKey = (app: TestApp, user: SignedInUser, body: unknown) =>
  call(app, { method: "POST", path: "/v1/account/api-keys", body, headers: { cookie: user.cookie } });
const listSession = (app: TestApp, user: SignedInUser) =>
  call(app, { method: "GET", path: "/v1/account/api-keys", headers: { cookie: user.cookie } });
const agentMe = (app: TestApp, apiKey: string) =>
  call(app, { method: "GET", path: "/v1/agent/me", headers: bearer(apiKey) });

/** Inserts active keys directly (e.g. as a signup would), to reach the cap quickly. */
async function fillKeys(
  app: TestApp,
  accountId: string,
  n: number,
  source: "session" | "agent" | "signup" = "session",
) {
  for (let i = 0; i < n; i++) {
    const plaintext = `svc_${randomBytes(32).toString("base64url")}`;
    await app.rt.db.apiKey.create({
      data: {
        accountId,
        name: `filler-${i}`,
        keyPrefix: plaintext.slice(0, 12),
        keyHash: sha256Hex(plaintext),
        source,
      },
    });
  }
}

describe("success: creation and listing", () => {
  test("POST → 201 with the plaintext once (svc_ + 43 base64url) and metadata", async ({ app }) => {
    const user = await signIn(app);
    const r = await postKey(app, user, { name: "laptop" });
    expect(r.status).toBe(201);
    const body = r.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual([...METADATA_FIELDS, "apiKey"].sort());
    expect(body.apiKey).toMatch(KEY_RE);
    expect(body).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: "laptop",
      keyPrefix: (body.apiKey as string).slice(0, 12),
      source: "session",
      lastUsedAt: null,
    });
    expect((await agentMe(app, body.apiKey as string)).status).toBe(200);
  });

  test("the plaintext never appears in any listing (session list, agent list)", async ({ app }) => {
    const user = await signIn(app);
    const a = await createKey(app, user, "a");
    const b = await createKey(app, user, "b");
    const sessionList = await listSession(app, user);
    const agentList = await call(app, { method: "GET", path: "/v1/agent/keys", headers: bearer(a.apiKey) });
    for (const list of [sessionList, agentList]) {
      expect(list.status).toBe(200);
      const text = JSON.stringify(list.body);
      expect(text).not.toContain(a.apiKey);
      expect(text).not.toContain(b.apiKey);
      expect(text).not.toContain(a.apiKey.slice(12));
      const body = list.body as { keys: Record<string, unknown>[]; cap: number; active: number };
      expect(body.cap).toBe(10);
      expect(body.active).toBe(2);
      for (const k of body.keys) expect(Object.keys(k).sort()).toEqual(METADATA_FIELDS);
      // newest first
      expect(body.keys.map((k) => k.id)).toEqual([b.id, a.id]);
    }
  });

  test("lastUsedAt is set once the key is used", async ({ app }) => {
    const user = await signIn(app);
    const k = await createKey(app, user);
    expect((await agentMe(app, k.apiKey)).status).toBe(200);
    // the write is fire-and-forget: poll briefly
    let lastUsedAt: unknown = null;
    for (let i = 0; i < 40 && !lastUsedAt; i++) {
      const list = (await listSession(app, user)).body as { keys: { id: string; lastUsedAt: string | null }[] };
      lastUsedAt = list.keys.find((x) => x.id === k.id)?.lastUsedAt ?? null;
      if (!lastUsedAt) await new Promise((r) => setTimeout(r, 25));
    }
    expect(lastUsedAt).toEqual(expect.any(String));
  });

  test("names: 1 and 64 characters are accepted; 0 and 65 → 400; non-string or missing → 400", async ({ app }) => {
    const user = await signIn(app);
    expect((await postKey(app, user, { name: "x" })).status).toBe(201);
    const r64 = await postKey(app, user, { name: "n".repeat(64) });
    expect(r64.status).toBe(201);
    expect((r64.body as { name: string }).name).toBe("n".repeat(64));
    const before = await activeKeyCount(app, user.accountId);
    for (const body of [{ name: "" }, { name: "n".repeat(65) }, { name: 7 }, { name: null }, {}]) {
      const r = await postKey(app, user, body);
      expectError(r, 400, "invalid_request", JSON.stringify(body));
      expect((r.body as { error: { field?: string } }).error.field).toBe("name");
    }
    expect(await activeKeyCount(app, user.accountId)).toBe(before);
  });

  test("agent route POST /v1/agent/keys → 201 with apiKey, name, keyPrefix, source agent; 65 chars → 400", async ({
    app,
  }) => {
    const user = await signIn(app);
    const k = await createKey(app, user);
    const r = await call(app, {
      method: "POST",
      path: "/v1/agent/keys",
      body: { name: "child" },
      headers: bearer(k.apiKey),
    });
    expect(r.status).toBe(201);
    const body = r.body as { apiKey: string; name: string; keyPrefix: string; source: string };
    expect(body.apiKey).toMatch(KEY_RE);
    expect(body).toMatchObject({ name: "child", keyPrefix: body.apiKey.slice(0, 12), source: "agent" });
    expect((await agentMe(app, body.apiKey)).status).toBe(200);
    const bad = await call(app, {
      method: "POST",
      path: "/v1/agent/keys",
      body: { name: "n".repeat(65) },
      headers: bearer(k.apiKey),
    });
    expectError(bad, 400, "invalid_request");
    expect(await activeKeyCount(app, user.accountId)).toBe(2);
  });
});

describe("revocation", () => {
  test("DELETE → 200 status-ok; the key then 401s, disappears from lists; a second DELETE → 404", async ({ app }) => {
    const user = await signIn(app);
    const k = await createKey(app, user);
    const keep = await createKey(app, user);
    const r = await call(app, {
      method: "DELETE",
      path: `/v1/account/api-keys/${k.id}`,
      headers: { cookie: user.cookie },
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: "ok" });
    expectAuthFailed(await agentMe(app, k.apiKey));
    expect((await agentMe(app, keep.apiKey)).status).toBe(200);
    const list = (await listSession(app, user)).body as { keys: { id: string }[]; active: number };
    expect(list.keys.map((x) => x.id)).toEqual([keep.id]);
    expect(list.active).toBe(1);
    const row = await app.rt.db.apiKey.findUniqueOrThrow({ where: { id: k.id } });
    expect(row.status).toBe("revoked");
    expect(row.revokedAt).not.toBeNull();
    expectError(
      await call(app, { method: "DELETE", path: `/v1/account/api-keys/${k.id}`, headers: { cookie: user.cookie } }),
      404,
      "not_found",
    );
  });

  test("revoking another account's key → 404 and the key still works (session and agent routes)", async ({ app }) => {
    const alice = await signIn(app);
    const mallory = await signIn(app);
    const aliceKey = await createKey(app, alice);
    const malloryKey = await createKey(app, mallory);
    expectError(
      await call(app, {
        method: "DELETE",
        path: `/v1/account/api-keys/${aliceKey.id}`,
        headers: { cookie: mallory.cookie },
      }),
      404,
      "not_found",
    );
    expectError(
      await call(app, { method: "DELETE", path: `/v1/agent/keys/${aliceKey.id}`, headers: bearer(malloryKey.apiKey) }),
      404,
      "not_found",
    );
    expect((await agentMe(app, aliceKey.apiKey)).status).toBe(200);
    expect((await app.rt.db.apiKey.findUniqueOrThrow({ where: { id: aliceKey.id } })).status).toBe("active");
  });

  test("unknown uuid → 404; non-uuid id → 400 (both routes)", async ({ app }) => {
    const user = await signIn(app);
    const k = await createKey(app, user);
    expectError(
      await call(app, {
        method: "DELETE",
        path: `/v1/account/api-keys/${randomUUID()}`,
        headers: { cookie: user.cookie },
      }),
      404,
      "not_found",
    );
    for (const bad of ["not-a-uuid", "123", `${k.id}x`]) {
      expectError(
        await call(app, { method: "DELETE", path: `/v1/account/api-keys/${bad}`, headers: { cookie: user.cookie } }),
        400,
        "invalid_request",
        bad,
      );
      expectError(
        await call(app, { method: "DELETE", path: `/v1/agent/keys/${bad}`, headers: bearer(k.apiKey) }),
        400,
        "invalid_request",
        bad,
      );
    }
    expect((await agentMe(app, k.apiKey)).status).toBe(200);
  });

  test("an upper-case uuid names the same key", async ({ app }) => {
    const user = await signIn(app);
    const k = await createKey(app, user);
    const r = await call(app, {
      method: "DELETE",
      path: `/v1/account/api-keys/${k.id.toUpperCase()}`,
      headers: { cookie: user.cookie },
    });
    expect(r.status).toBe(200);
    expectAuthFailed(await agentMe(app, k.apiKey));
  });

  test("a key may revoke itself via DELETE /v1/agent/keys/{own id}; it then 401s", async ({ app }) => {
    const user = await signIn(app);
    const k = await createKey(app, user);
    const r = await call(app, { method: "DELETE", path: `/v1/agent/keys/${k.id}`, headers: bearer(k.apiKey) });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: "ok" });
    expectAuthFailed(await agentMe(app, k.apiKey));
    expectAuthFailed(await call(app, { method: "DELETE", path: `/v1/agent/keys/${k.id}`, headers: bearer(k.apiKey) }));
  });

  test("rotation: mint with the old key, verify the new one, revoke the old one", async ({ app }) => {
    const user = await signIn(app);
    const old = await createKey(app, user);
    const minted = await call(app, {
      method: "POST",
      path: "/v1/agent/keys",
      body: { name: "rotated" },
      headers: bearer(old.apiKey),
    });
    expect(minted.status).toBe(201);
    const fresh = minted.body as { id: string; apiKey: string };
    expect((await agentMe(app, fresh.apiKey)).status).toBe(200);
    const del = await call(app, { method: "DELETE", path: `/v1/agent/keys/${old.id}`, headers: bearer(fresh.apiKey) });
    expect(del.status).toBe(200);
    expectAuthFailed(await agentMe(app, old.apiKey));
    expect((await agentMe(app, fresh.apiKey)).status).toBe(200);
  });
});

describe("the 10-key cap", () => {
  test("20 concurrent creates → exactly 10 × 201 and 10 × 409 key_limit_reached; 10 active in the DB", async ({
    app,
  }) => {
    const user = await signIn(app);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => postKey(app, user, { name: `race-${i}` })));
    const created = results.filter((r) => r.status === 201);
    const refused = results.filter((r) => r.status === 409);
    expect(results.map((r) => r.status).filter((s) => s !== 201 && s !== 409)).toEqual([]);
    expect(created).toHaveLength(10);
    expect(refused).toHaveLength(10);
    for (const r of refused) expectError(r, 409, "key_limit_reached");
    expect(new Set(created.map((r) => (r.body as { apiKey: string }).apiKey)).size).toBe(10);
    expect(await activeKeyCount(app, user.accountId)).toBe(10);
    expect((await listSession(app, user)).body).toMatchObject({ cap: 10, active: 10 });
  });

  test("mixed: with 10 active, revoke 3 while creating 6 concurrently → never above 10, end = 7 + successes", async ({
    app,
  }) => {
    const user = await signIn(app);
    const keys = [];
    for (let i = 0; i < 10; i++) keys.push(await createKey(app, user, `k${i}`));
    let sampling = true;
    let maxSeen = 0;
    const sampler = (async () => {
      while (sampling) {
        maxSeen = Math.max(maxSeen, await activeKeyCount(app, user.accountId));
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const revokes = keys
      .slice(0, 3)
      .map((k) =>
        call(app, { method: "DELETE", path: `/v1/account/api-keys/${k.id}`, headers: { cookie: user.cookie } }),
      );
    const creates = Array.from({ length: 6 }, (_, i) => postKey(app, user, { name: `new-${i}` }));
    const [revoked, createdRes] = await Promise.all([Promise.all(revokes), Promise.all(creates)]);
    sampling = false;
    await sampler;
    expect(revoked.map((r) => r.status)).toEqual([200, 200, 200]);
    const successes = createdRes.filter((r) => r.status === 201).length;
    const refusals = createdRes.filter((r) => r.status === 409).length;
    expect(successes + refusals).toBe(6);
    expect(successes).toBeLessThanOrEqual(3);
    const active = await activeKeyCount(app, user.accountId);
    expect(active).toBe(7 + successes);
    expect(active).toBeLessThanOrEqual(10);
    expect(maxSeen).toBeLessThanOrEqual(10);
    // and once the dust settles, free slots can be filled up to exactly 10
    for (let i = active; i < 10; i++) expect((await postKey(app, user, { name: `fill-${i}` })).status).toBe(201);
    expectError(await postKey(app, user, { name: "one-too-many" }), 409, "key_limit_reached");
  });

  test("POST /v1/agent/keys at the cap → 409 key_limit_reached, nothing minted", async ({ app }) => {
    const user = await signIn(app);
    const k = await createKey(app, user);
    await fillKeys(app, user.accountId, 9);
    const r = await call(app, {
      method: "POST",
      path: "/v1/agent/keys",
      body: { name: "over" },
      headers: bearer(k.apiKey),
    });
    expectError(r, 409, "key_limit_reached");
    expect(await activeKeyCount(app, user.accountId)).toBe(10);
  });

  test("the cap counts keys from every route (signup and agent keys count against the session route)", async ({
    app,
  }) => {
    const user = await signIn(app);
    await fillKeys(app, user.accountId, 4, "signup");
    await fillKeys(app, user.accountId, 6, "agent");
    expectError(await postKey(app, user, { name: "over" }), 409, "key_limit_reached");
    // revoked keys do not count
    const one = await app.rt.db.apiKey.findFirstOrThrow({ where: { accountId: user.accountId } });
    await app.rt.db.apiKey.update({ where: { id: one.id }, data: { status: "revoked", revokedAt: new Date() } });
    expect((await postKey(app, user, { name: "fits" })).status).toBe(201);
    expect(await activeKeyCount(app, user.accountId)).toBe(10);
  });

  test("the cap is per account: another account at 0 can still mint", async ({ app }) => {
    const full = await signIn(app);
    await fillKeys(app, full.accountId, 10);
    const other = await signIn(app);
    expect((await postKey(app, other, { name: "mine" })).status).toBe(201);
  });
});

describe("nothing is stored in plaintext", () => {
  test("no column of api_keys or sessions contains a key plaintext or a cookie value; hashes are sha256 hex", async ({
    app,
  }) => {
    const user = await signIn(app);
    const second = await signIn(app);
    const a = await createKey(app, user, "one");
    const agentMinted = await call(app, {
      method: "POST",
      path: "/v1/agent/keys",
      body: { name: "two" },
      headers: bearer(a.apiKey),
    });
    const b = agentMinted.body as { id: string; apiKey: string };
    const cookies = [cookieValueOf(user.cookie), cookieValueOf(second.cookie)];
    const secrets = [a.apiKey, b.apiKey, ...cookies, ...cookies.map((c) => c.split(".")[0] as string)];

    const replacer = (_k: string, v: unknown) => (typeof v === "bigint" ? v.toString() : v);
    const keyRows = await app.rt.db.$queryRaw<Record<string, unknown>[]>`SELECT * FROM api_keys`;
    const sessionRows = await app.rt.db.$queryRaw<Record<string, unknown>[]>`SELECT * FROM sessions`;
    const dump = JSON.stringify([keyRows, sessionRows], replacer);
    for (const s of secrets) {
      expect(dump.includes(s)).toBe(false);
      // nor the bulk of it (the display prefix is 12 characters)
      expect(dump.includes(s.slice(12))).toBe(false);
    }

    const hashes = await app.rt.db.$queryRaw<{ id: string; key_hash: string; key_prefix: string }[]>`
      SELECT id::text AS id, key_hash, key_prefix FROM api_keys WHERE id IN (${a.id}::uuid, ${b.id}::uuid)`;
    const byId = new Map(hashes.map((h) => [h.id, h]));
    expect(byId.get(a.id)?.key_hash).toBe(sha256Hex(a.apiKey));
    expect(byId.get(b.id)?.key_hash).toBe(sha256Hex(b.apiKey));
    expect(byId.get(a.id)?.key_prefix).toBe(a.apiKey.slice(0, 12));

    const tokenHashes = await app.rt.db.$queryRaw<{ token_hash: string }[]>`
      SELECT token_hash FROM sessions WHERE account_id = ${user.accountId}::uuid`;
    expect(tokenHashes.map((t) => t.token_hash)).toEqual([sha256Hex(cookies[0] as string)]);
    for (const t of tokenHashes) expect(t.token_hash).toMatch(/^[0-9a-f]{64}$/);
  });
});
