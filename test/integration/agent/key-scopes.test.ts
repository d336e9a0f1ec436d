import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
// Keys that cannot widen themselves (issue 38, Deliver 1): scopes on every key, and the key tree.
// A budgeted sub-agent key holds `inference` alone: through REST, GraphQL and MCP it cannot change
// its own policy, mint a key, raise the account's ceiling, touch webhooks or refill (403
// insufficient_scope naming the scope, nothing changed). A key granted `keys` mints only within
// itself (scopes, ceiling, models, expiry, what its budget leaves: 403 forbidden naming the field),
// changes only keys below it, never its own policy; its children's spend counts against its budget
// (a grandchild cannot spend past the parent's limit); revoking it revokes them. The spec's rotation
// (mint with the old key, verify, revoke the old with the new) keeps working.

import { describe, expect } from "vitest";
import { mcpPathOf } from "../../../src/contract/openapi.js";
import { formatDecimal6, parseDecimal6 } from "../../../src/lib/money.js";
import { gql, gqlParts, mcpTool, rest, toolResult } from "../../../testkit/access/transports.js";
import { bearer, call } from "../../../testkit/actors.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
const MODEL = "llama-3.3-70b";

const chat = (apiKey: string, body: Record<string, unknown> = {}) =>
  call(world.app, {
    method: "POST",
    path: "/v1/chat/completions",
    headers: bearer(apiKey),
    body: { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 200, ...body },
  });

interface KeyBody {
  id: string;
  apiKey: string;
  scopes: string[];
  parentId: string | null;
  limitUsdc: string | null;
  maxPriceCentsPerDollar: number | null;
  models: string[] | null;
  spentUsdc: string;
  remainingUsdc: string | null;
}

async function mint(apiKey: string, body: Record<string, unknown>, status = 201) {
  const r = await call(world.app, { method: "POST", path: "/v1/agent/keys", headers: bearer(apiKey), body });
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  return r.body as KeyBody & { error: { code: string; field?: string; scope?: string } };
}

const errorOf = (r: { body: unknown }) => (r.body as { error: { code: string; scope?: string; field?: string } }).error;

/** Every row of the account's keys, straight from the database (what a refused call must leave unchanged). */
async function keyRows(accountId: string) {
  return world.app.rt.db.apiKey.findMany({
    where: { accountId },
    orderBy: { id: "asc" },
    select: {
      id: true,
      status: true,
      limitMicroUsdc: true,
      maxPriceCentsPerDollar: true,
      models: true,
      expiresAt: true,
      scopes: true,
    },
  });
}

describe("scopes: a budgeted key holds inference alone", () => {
  test("listings and GET /v1/agent/key show scopes; the defaults follow the policy", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    const me = await call(world.app, { method: "GET", path: "/v1/agent/key", headers: bearer(buyer.apiKey) });
    expect(me.body).toMatchObject({ scopes: ["inference", "keys", "account"], parentId: null });
    const plain = await mint(buyer.apiKey, { name: "rotation" });
    expect(plain).toMatchObject({ scopes: ["inference", "keys", "account"], parentId: null });
    const budgeted = await mint(buyer.apiKey, { name: "sub", limitUsdc: "1.000000" });
    expect(budgeted).toMatchObject({ scopes: ["inference"], parentId: me.body && (me.body as KeyBody).id });
    const named = await mint(buyer.apiKey, { name: "mgr", limitUsdc: "1.000000", scopes: ["keys", "inference"] });
    expect(named.scopes).toEqual(["inference", "keys"]);
    const list = await call(world.app, { method: "GET", path: "/v1/agent/keys", headers: bearer(buyer.apiKey) });
    const byId = new Map((list.body as { keys: KeyBody[] }).keys.map((k) => [k.id, k]));
    expect(byId.get(budgeted.id)?.scopes).toEqual(["inference"]);
    expect(byId.get(named.id)?.scopes).toEqual(["inference", "keys"]);
    // the session's listing shows them too, and the session mints with named scopes
    const session = await call(world.app, {
      method: "GET",
      path: "/v1/account/api-keys",
      headers: { cookie: buyer.user.cookie },
    });
    expect((session.body as { keys: KeyBody[] }).keys.find((k) => k.id === budgeted.id)?.scopes).toEqual(["inference"]);
    const bad = await mint(buyer.apiKey, { name: "x", scopes: ["admin"] }, 400);
    expect(bad.error).toMatchObject({ code: "invalid_request", field: "scopes" });
  });

  test("a sub-key with limitUsdc cannot widen itself or touch the account on REST, GraphQL or MCP", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 20_000_000n, 60);
    const sub = await mint(buyer.apiKey, { name: "sub-agent", limitUsdc: "0.500000", limitReset: "daily" });
    const sibling = await mint(buyer.apiKey, { name: "sibling", limitUsdc: "0.500000" });
    const before = await keyRows(buyer.accountId);
    const ceilingBefore = (await world.app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } }))
      .maxPriceCentsPerDollar;
    const h = bearer(sub.apiKey);
    const rows: [string, string, unknown, string][] = [
      ["PATCH", `/v1/agent/keys/${sub.id}`, { limitUsdc: null }, "keys"],
      ["PATCH", `/v1/agent/keys/${sub.id}`, { maxPriceCentsPerDollar: null }, "keys"],
      ["POST", "/v1/agent/keys", { name: "escape" }, "keys"],
      ["GET", "/v1/agent/keys", undefined, "keys"],
      ["DELETE", `/v1/agent/keys/${sibling.id}`, undefined, "keys"],
      ["PATCH", "/v1/agent/max-price", { maxPriceCentsPerDollar: 80 }, "account"],
      ["GET", "/v1/agent/me", undefined, "account"],
      ["GET", "/v1/webhooks", undefined, "account"],
      ["POST", "/v1/webhooks", { url: "https://example.com/hook", events: ["credit.confirmed"] }, "account"],
      ["POST", "/v1/x402/refill", { amountUsdc: "5.000000" }, "account"],
    ];
    for (const [method, path, body, scope] of rows) {
      const r = await rest(world.app, method, path, h, body);
      expect(r.status, `${method} ${path}: ${r.text}`).toBe(403);
      expect(errorOf(r), `${method} ${path}`).toMatchObject({ code: "insufficient_scope", scope });
    }
    // GraphQL: the same refusals, by the same rule
    for (const [query, scope] of [
      [`mutation { updateApiKey(input: { id: "${sub.id}", limitUsdc: null }) { key { id } } }`, "keys"],
      [`mutation { createApiKey(input: { name: "escape" }) { apiKey } }`, "keys"],
      [`mutation { revokeApiKey(input: { id: "${sibling.id}" }) { id } }`, "keys"],
      [`mutation { setMaxPrice(input: { maxPriceCentsPerDollar: 80 }) { maxPriceCentsPerDollar } }`, "account"],
      [`{ myWebhooks { id } }`, "account"],
      [`{ viewer { confirmedUsdc } }`, "account"],
    ] as const) {
      const r = await gql(world.app, query, {}, h);
      const { errors } = gqlParts(r);
      expect(errors?.[0]?.extensions?.code, `${query}: ${r.text}`).toBe("insufficient_scope");
      expect(errors?.[0]?.message, query).toContain(`'${scope}'`);
    }
    // MCP
    const mcp = mcpPathOf(world.app.rt.config.urls);
    for (const [tool, args] of [
      ["create_key", { name: "escape" }],
      ["set_max_price", { maxPriceCentsPerDollar: 80 }],
      ["agent_me", {}],
      ["list_keys", {}],
    ] as const) {
      const r = toolResult(await mcpTool(world.app, mcp, tool, args, h));
      expect(r.isError, tool).toBe(true);
      expect((r.json as { error: { code: string } }).error.code, tool).toBe("insufficient_scope");
    }
    // nothing changed
    expect(await keyRows(buyer.accountId)).toEqual(before);
    expect(
      (await world.app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } })).maxPriceCentsPerDollar,
    ).toBe(ceilingBefore);
    // what it may do: call models, read its own key and its own history
    const ok = await chat(sub.apiKey);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const own = await rest(world.app, "GET", "/v1/agent/key", h);
    expect(own.status).toBe(200);
    const history = await rest(world.app, "GET", "/v1/agent/requests", h);
    expect(history.status).toBe(200);
    const items = (history.body as { data: { keyId: string }[] }).data;
    expect(items.length).toBeGreaterThan(0);
    expect(items.every((i) => i.keyId === sub.id)).toBe(true);
    const other = await rest(world.app, "GET", `/v1/agent/requests?keyId=${sibling.id}`, h);
    expect(errorOf(other)).toMatchObject({ code: "insufficient_scope", scope: "account" });
    // the owner's key still sees the whole account's history
    const all = await rest(world.app, "GET", "/v1/agent/requests", bearer(buyer.apiKey));
    expect((all.body as { data: unknown[] }).data.length).toBeGreaterThanOrEqual(items.length);
    // a key without `inference` calls no model
    const mgr = await mint(buyer.apiKey, { name: "keys only", scopes: ["keys"] });
    const refused = await chat(mgr.apiKey);
    expect(refused.status).toBe(403);
    expect(errorOf(refused)).toMatchObject({ code: "insufficient_scope", scope: "inference" });
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("the key tree: a key mints within itself and changes only keys below it", () => {
  test("a child is never wider than its minter, and the minter never changes its own policy", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    const parent = await mint(buyer.apiKey, {
      name: "parent",
      limitUsdc: "2.000000",
      limitReset: "daily",
      maxPriceCentsPerDollar: 50,
      models: [MODEL],
      scopes: ["inference", "keys"],
    });
    const p = parent.apiKey;
    // its own policy: never
    const self = await rest(world.app, "PATCH", `/v1/agent/keys/${parent.id}`, bearer(p), { limitUsdc: "9.000000" });
    expect(self.status).toBe(403);
    expect(errorOf(self)).toMatchObject({ code: "forbidden" });
    // wider children: refused, naming the field
    for (const [body, field] of [
      [{ name: "c", scopes: ["inference", "account"] }, "scopes"],
      [{ name: "c", limitUsdc: "2.500000" }, "limitUsdc"],
      [{ name: "c", maxPriceCentsPerDollar: 60 }, "maxPriceCentsPerDollar"],
      [{ name: "c", models: ["qwen3-4b"] }, "models"],
    ] as const) {
      const r = await mint(p, body, 403);
      expect(r.error, JSON.stringify(body)).toMatchObject({ code: "forbidden", field });
    }
    // a child without settings inherits the minter's ceiling and models, and lives below it
    const child = await mint(p, { name: "child" });
    expect(child).toMatchObject({
      parentId: parent.id,
      scopes: ["inference", "keys"],
      maxPriceCentsPerDollar: 50,
      models: [MODEL],
      limitUsdc: null,
    });
    // the minter changes its child, within itself
    const narrowed = await rest(world.app, "PATCH", `/v1/agent/keys/${child.id}`, bearer(p), {
      maxPriceCentsPerDollar: 40,
    });
    expect(narrowed.status, narrowed.text).toBe(200);
    const widened = await rest(world.app, "PATCH", `/v1/agent/keys/${child.id}`, bearer(p), {
      maxPriceCentsPerDollar: 70,
    });
    expect(errorOf(widened)).toMatchObject({ code: "forbidden", field: "maxPriceCentsPerDollar" });
    // the child cannot touch its parent or a key outside its tree
    const up = await rest(world.app, "DELETE", `/v1/agent/keys/${parent.id}`, bearer(child.apiKey));
    expect(errorOf(up)).toMatchObject({ code: "forbidden" });
    const owner = (await rest(world.app, "GET", "/v1/agent/key", bearer(buyer.apiKey))).body as KeyBody;
    const out = await rest(world.app, "PATCH", `/v1/agent/keys/${owner.id}`, bearer(p), { name: "mine" });
    expect(errorOf(out)).toMatchObject({ code: "forbidden" });
    // the parent lists itself and the keys below it, not the account's others
    const list = await rest(world.app, "GET", "/v1/agent/keys", bearer(p));
    expect((list.body as { keys: KeyBody[] }).keys.map((k) => k.id).sort()).toEqual([parent.id, child.id].sort());
    // revoking the parent revokes the child, at once
    const grand = await mint(child.apiKey, { name: "grandchild" });
    expect(grand.parentId).toBe(child.id);
    const gone = await rest(world.app, "DELETE", `/v1/agent/keys/${parent.id}`, bearer(buyer.apiKey));
    expect(gone.status).toBe(200);
    for (const k of [parent, child, grand]) {
      const r = await rest(world.app, "GET", "/v1/agent/key", bearer(k.apiKey));
      expect(r.status).toBe(401);
    }
    const owners = await rest(world.app, "GET", "/v1/agent/key", bearer(buyer.apiKey));
    expect(owners.status).toBe(200);
  });

  test("a grandchild cannot spend past its parent's budget; the parent's usage counts its children", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 200_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 50_000_000n, 50);
    const probe = await chat(buyer.apiKey);
    expect(probe.status, JSON.stringify(probe.body)).toBe(200);
    const one = parseDecimal6(probe.headers.get("x-svc-cost-usdc") ?? "") ?? 0n;
    const limit = 6n * one;
    const parent = await mint(buyer.apiKey, {
      name: "parent",
      limitUsdc: formatDecimal6(limit),
      limitReset: "daily",
      scopes: ["inference", "keys"],
    });
    // children without limits of their own, and a grandchild: all held by the parent's budget
    const a = await mint(parent.apiKey, { name: "a" });
    const b = await mint(parent.apiKey, { name: "b" });
    const g = await mint(a.apiKey, { name: "g" });
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) => chat([a, b, g, parent][i % 4]?.apiKey ?? "")),
    );
    const ok = results.filter((r) => r.status === 200);
    expect(ok.length).toBeGreaterThan(0);
    expect(results.some((r) => r.status === 402)).toBe(true);
    const charged = ok.reduce((s, r) => s + (parseDecimal6(r.headers.get("x-svc-cost-usdc") ?? "") ?? 0n), 0n);
    expect(charged).toBeLessThanOrEqual(limit);
    // the books: what the tree's keys were charged
    const rows = await world.app.rt.db.$queryRaw<{ sum: bigint | null }[]>`
      SELECT sum(c.gross_micro_usdc)::bigint AS sum FROM clears c JOIN inference_requests r ON r.id = c.request_id
       WHERE r.api_key_id = ANY(${[parent.id, a.id, b.id, g.id]}::uuid[])`;
    expect(rows[0]?.sum ?? 0n).toBe(charged);
    expect(charged).toBeLessThanOrEqual(limit);
    // the parent's usage is its subtree's spend
    const me = (await rest(world.app, "GET", "/v1/agent/key", bearer(parent.apiKey))).body as KeyBody;
    expect(parseDecimal6(me.spentUsdc)).toBe(charged);
    // a child's limit is at most what the parent's budget leaves
    const left = limit - charged;
    const tooMuch = await mint(parent.apiKey, { name: "late", limitUsdc: formatDecimal6(left + 1n) }, 403);
    expect(tooMuch.error).toMatchObject({ code: "forbidden", field: "limitUsdc" });
    await assertBooksBalance(world.app.rt.db);
  });

  test("the spec's rotation: mint with the old key, verify the new one, revoke the old with it", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    const fresh = await mint(buyer.apiKey, { name: "rotated" });
    expect(fresh).toMatchObject({ parentId: null, scopes: ["inference", "keys", "account"] });
    const verify = await rest(world.app, "GET", "/v1/agent/me", bearer(fresh.apiKey));
    expect(verify.status).toBe(200);
    const old = (await rest(world.app, "GET", "/v1/agent/key", bearer(buyer.apiKey))).body as KeyBody;
    const revoked = await rest(world.app, "DELETE", `/v1/agent/keys/${old.id}`, bearer(fresh.apiKey));
    expect(revoked.status, revoked.text).toBe(200);
    expect((await rest(world.app, "GET", "/v1/agent/me", bearer(buyer.apiKey))).status).toBe(401);
    expect((await rest(world.app, "GET", "/v1/agent/me", bearer(fresh.apiKey))).status).toBe(200);
  });
});
