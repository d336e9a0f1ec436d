// Per-key budgets that cannot be overrun (issue 28 acceptance), on the real pipeline, Postgres and two
// API processes: 40 concurrent chats on a key whose limit is worth about ten of them never charge more
// than the limit (summed from X-Svc-Cost-Usdc and from the books), the rest are 402
// key_budget_exceeded with remainingUsdc and resetsAt and no `accepts`, and the account's other key
// is unaffected. A model outside the key's list is 403; the key's ceiling below every price is 503.
import { describe, expect } from "vitest";
import { formatDecimal6, parseDecimal6 } from "../../../src/lib/money.js";
import { bearer, call, mintAgentKey } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true, peer: true });
const world = fileWorld(test);

const chat = (app: typeof world.app, apiKey: string, body: Record<string, unknown> = {}) =>
  call(app, {
    method: "POST",
    path: "/v1/chat/completions",
    headers: bearer(apiKey),
    body: { model: "llama-3.3-70b", messages: [{ role: "user", content: "hi" }], max_tokens: 200, ...body },
  });

describe("a key's budget across API processes", () => {
  test("40 concurrent chats on two processes never charge more than the key's limit", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 500_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    world.peer.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 50_000_000n, 50);
    // one chat's charge, measured
    const probe = await chat(world.app, buyer.apiKey);
    expect(probe.status, JSON.stringify(probe.body)).toBe(200);
    const one = parseDecimal6(probe.headers.get("x-svc-cost-usdc") ?? "") ?? 0n;
    expect(one).toBeGreaterThan(0n);
    // a limit worth about ten of them
    const limit = 10n * one;
    const sub = await mintAgentKey(world.app, buyer.apiKey, {
      name: "sub-agent",
      limitUsdc: formatDecimal6(limit),
      limitReset: "daily",
    });
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => chat(i % 2 === 0 ? world.app : world.peer, sub.apiKey)),
    );
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 402);
    const busy = results.filter((r) => r.status === 429);
    expect(
      ok.length + refused.length + busy.length,
      JSON.stringify(results.map((r) => [r.status, r.body]).slice(0, 3)),
    ).toBe(40);
    expect(ok.length, JSON.stringify(results.map((r) => [r.status, r.body]).slice(0, 3))).toBeGreaterThan(0);
    expect(ok.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      const body = r.body as { error: { code: string; remainingUsdc: string; resetsAt: string }; accepts?: unknown };
      expect(body.error.code).toBe("key_budget_exceeded");
      expect(body.error.remainingUsdc).toMatch(/^\d+\.\d{6}$/);
      expect(Date.parse(body.error.resetsAt)).toBeGreaterThan(Date.now());
      expect(body.accepts).toBeUndefined();
    }
    const charged = ok.reduce((a, r) => a + (parseDecimal6(r.headers.get("x-svc-cost-usdc") ?? "") ?? 0n), 0n);
    expect(charged).toBeLessThanOrEqual(limit);
    // the books agree: the key's clears
    const rows = await world.app.rt.db.$queryRaw<{ sum: bigint | null }[]>`
      SELECT sum(c.gross_micro_usdc)::bigint AS sum FROM clears c JOIN inference_requests r ON r.id = c.request_id
       WHERE r.api_key_id = ${sub.id}::uuid`;
    expect(rows[0]?.sum ?? 0n).toBe(charged);
    // the listing's figure is the same spend
    const me = await call(world.app, { method: "GET", path: "/v1/agent/key", headers: bearer(sub.apiKey) });
    expect(me.status).toBe(200);
    expect(parseDecimal6((me.body as { spentUsdc: string }).spentUsdc)).toBe(charged);
    // no hold left behind
    const holds = await world.app.rt.db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM key_budget_holds`;
    expect(holds[0]?.n).toBe(0);
    // the account's other key is unaffected
    const other = await chat(world.peer, buyer.apiKey);
    expect(other.status, JSON.stringify(other.body)).toBe(200);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a model outside the key's list is 403; its ceiling below every price is 503 naming it", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 45, quantityMicroDiem: 100_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 10_000_000n, 80);
    const narrow = await mintAgentKey(world.app, buyer.apiKey, { name: "narrow", models: ["qwen3-4b"] });
    const refused = await chat(world.app, narrow.apiKey);
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect((refused.body as { error: { code: string } }).error.code).toBe("model_not_allowed");
    const cheap = await mintAgentKey(world.app, buyer.apiKey, { name: "cheap", maxPriceCentsPerDollar: 30 });
    const none = await chat(world.app, cheap.apiKey);
    expect(none.status, JSON.stringify(none.body)).toBe(503);
    expect(none.body).toMatchObject({ error: { code: "no_eligible_supply", buyerMaxCents: 30 } });
    // the request's own ceiling lowers the account's too
    const own = await chat(world.app, buyer.apiKey, { svc: { maxPriceCentsPerDollar: 30 } });
    expect(own.status, JSON.stringify(own.body)).toBe(503);
    expect(own.body).toMatchObject({ error: { code: "no_eligible_supply", buyerMaxCents: 30 } });
    const bad = await chat(world.app, buyer.apiKey, { svc: { maxPriceCentsPerDollar: 90 } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: "invalid_request", field: "svc.maxPriceCentsPerDollar" } });
  });
});
