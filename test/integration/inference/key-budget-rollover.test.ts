// A key spent to its limit serves again when its period rolls over (issue 28 acceptance), over HTTP
// on the real pipeline, Postgres and Redis, with the service's injected clock moved across UTC
// midnight: the period is computed from that clock (key-period.ts `budgetPeriod`) and handed to the
// SQL as UTC days (svc_key_reserve, spentThisPeriod), a charge counts on its request's start day
// from the same clock (svc_end_items), so no job rolls anything over and Postgres's own now() plays
// no part. The simulator runs on the same clock (its DIEM epoch ends at the same midnight). Offers
// expire at UTC midnight too (DIEM's): after each midnight a supplier posts the new day's supply.
import { describe, expect } from "vitest";
import { formatDecimal6, parseDecimal6 } from "../../../src/lib/money.js";
import { bearer, call, mintAgentKey, type Res } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectError } from "../../../testkit/errors.js";
import { movableClock } from "../../../testkit/harness.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";

const clock = movableClock();
// a Thursday, three minutes before midnight UTC: set when the file loads, before the world's
// beforeAll starts the apps and the simulator on it (the clock runs on with real time from there)
clock.set(new Date("2026-11-26T23:57:00Z"));
test.override("appOptions", { syncCatalog: true, clock, sim: { now: () => clock.now() } });
const world = fileWorld(test);

/**
 * One chat: a long prompt (its cost is mostly prompt tokens, so whole micro-USDC amounts are large)
 * and a completion of exactly its cap. At MIN_ADMITTED_TOKENS the cap cannot be sized down to fit
 * what a budget leaves, so a request's maximum charge is fixed: the service's generous prompt
 * estimate at the key's ceiling (50) is about 1.7 times what one such chat is charged at 40.
 */
const BODY = {
  model: "llama-3.3-70b",
  messages: [{ role: "user", content: `${"lorem ipsum ".repeat(500)}[[sim:tokens=16]]` }],
  max_tokens: 16,
};

const chat = (apiKey: string) =>
  call(world.app, { method: "POST", path: "/v1/chat/completions", headers: bearer(apiKey), body: BODY });

const costOf = (r: { headers: Headers }) => parseDecimal6(r.headers.get("x-svc-cost-usdc") ?? "") ?? 0n;

interface KeyView {
  limitUsdc: string | null;
  limitReset: string;
  spentUsdc: string;
  remainingUsdc: string | null;
  resetsAt: string | null;
}

async function describeKey(apiKey: string): Promise<KeyView> {
  const r = await call(world.app, { method: "GET", path: "/v1/agent/key", headers: bearer(apiKey) });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as KeyView;
}

/** The day's supply: offers expire at the app clock's next UTC midnight, as DIEM does. */
async function supplyForToday(): Promise<void> {
  await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 100_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
}

/**
 * A buyer (ceiling 50) and a key of theirs whose `reset` limit is three chats' charge: two fit (each
 * holds ~1.7 charges), a third finds one charge left, less than its maximum. `one`: a chat's charge,
 * measured on the buyer's own (unlimited) key.
 */
async function buyerWithLimitedKey(reset: "daily" | "weekly") {
  const buyer = await fundedBuyerKey(world.app, 20_000_000n, 50);
  const probe = await chat(buyer.apiKey);
  expect(probe.status, JSON.stringify(probe.body)).toBe(200);
  const one = costOf(probe);
  expect(one).toBeGreaterThan(100n);
  const limit = 3n * one;
  const key = await mintAgentKey(world.app, buyer.apiKey, {
    name: reset,
    limitUsdc: formatDecimal6(limit),
    limitReset: reset,
  });
  return { buyer, key, one, limit };
}

/** Chats on `apiKey` until one is refused: what the served ones cost, and the refusal. */
async function spendUntilRefused(apiKey: string, max = 6) {
  const costs: bigint[] = [];
  for (let i = 0; i < max; i++) {
    const r = await chat(apiKey);
    if (r.status !== 200) return { costs, refused: r };
    costs.push(costOf(r));
  }
  throw new Error(`still served after ${max} chats`);
}

/** A 402 key_budget_exceeded with what is left and when the period starts again (no `accepts`). */
function expectBudgetExceeded(r: Res, remaining: bigint, resetsAt: string): void {
  expectError(r, 402, "key_budget_exceeded");
  const body = r.body as { error: { remainingUsdc: string; resetsAt: string }; accepts?: unknown };
  expect(body.error).toMatchObject({ remainingUsdc: formatDecimal6(remaining), resetsAt });
  expect(body.accepts).toBeUndefined();
}

/** The key's spend per UTC day as stored (`api_key_spend`): the days come from the app's clock. */
async function spendByDay(apiKeyId: string): Promise<Record<string, bigint>> {
  const rows = await world.app.rt.db.$queryRaw<{ day: string; spent: bigint }[]>`
    SELECT to_char(day, 'YYYY-MM-DD') AS day, spent_micro_usdc AS spent FROM api_key_spend
     WHERE api_key_id = ${apiKeyId}::uuid ORDER BY day`;
  return Object.fromEntries(rows.map((r) => [r.day, r.spent]));
}

/** Moves the service's (and the simulator's) clock to `iso`; only ever forward in this file. */
function moveClockTo(iso: string): void {
  const at = new Date(iso);
  expect(clock.now().getTime(), `the clock is already past ${iso}: the test ran too slowly`).toBeLessThan(at.getTime());
  clock.set(at);
}

describe("a key's budget period rolls over on the injected clock", () => {
  test("a daily key spent to its limit on Thursday serves again after 00:00 UTC", async () => {
    await supplyForToday();
    const { key, one, limit } = await buyerWithLimitedKey("daily");

    // Thursday 23:57: two chats fit, the third is refused until midnight
    const { costs, refused } = await spendUntilRefused(key.apiKey);
    expect(costs).toEqual([one, one]);
    expectBudgetExceeded(refused, limit - 2n * one, "2026-11-27T00:00:00.000Z");
    expect(await describeKey(key.apiKey)).toMatchObject({
      limitUsdc: formatDecimal6(limit),
      limitReset: "daily",
      spentUsdc: formatDecimal6(2n * one),
      remainingUsdc: formatDecimal6(one),
      resetsAt: "2026-11-27T00:00:00.000Z",
    });

    // Friday 00:00:30. Thursday's offers expired at midnight with their DIEM: nothing is posted
    // until a supplier posts Friday's
    moveClockTo("2026-11-27T00:00:30Z");
    world.app.rt.services.inference.invalidateBook();
    expectError(await chat(key.apiKey), 503, "pool_empty");
    await supplyForToday();

    // the same request serves again; the key's spend is only Friday's
    const again = await chat(key.apiKey);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(costOf(again)).toBe(one);
    expect(await describeKey(key.apiKey)).toMatchObject({
      spentUsdc: formatDecimal6(one),
      remainingUsdc: formatDecimal6(2n * one),
      resetsAt: "2026-11-28T00:00:00.000Z",
    });
    // stored per UTC day of the app's clock (not the database's now())
    expect(await spendByDay(key.id)).toEqual({ "2026-11-26": 2n * one, "2026-11-27": one });
    const holds = await world.app.rt.db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM key_budget_holds`;
    expect(holds[0]?.n).toBe(0);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a weekly key keeps Saturday's spend on Sunday and starts again on Monday 00:00 UTC", async () => {
    moveClockTo("2026-11-28T23:57:00Z"); // a Saturday
    await supplyForToday();
    const { buyer, key, one, limit } = await buyerWithLimitedKey("weekly");

    const { costs, refused } = await spendUntilRefused(key.apiKey);
    expect(costs).toEqual([one, one]);
    expectBudgetExceeded(refused, limit - 2n * one, "2026-11-30T00:00:00.000Z");

    // Sunday: a new UTC day, the same ISO week: still refused (a daily key would serve again),
    // though there is supply (the buyer's own key is served)
    moveClockTo("2026-11-29T00:00:30Z");
    await supplyForToday();
    expect((await chat(buyer.apiKey)).status).toBe(200);
    expectBudgetExceeded(await chat(key.apiKey), one, "2026-11-30T00:00:00.000Z");
    expect(await describeKey(key.apiKey)).toMatchObject({
      limitReset: "weekly",
      spentUsdc: formatDecimal6(2n * one),
      remainingUsdc: formatDecimal6(one),
      resetsAt: "2026-11-30T00:00:00.000Z",
    });

    // Monday 00:00:30: a new week
    moveClockTo("2026-11-30T00:00:30Z");
    await supplyForToday();
    const again = await chat(key.apiKey);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(costOf(again)).toBe(one);
    expect(await describeKey(key.apiKey)).toMatchObject({
      spentUsdc: formatDecimal6(one),
      remainingUsdc: formatDecimal6(2n * one),
      resetsAt: "2026-12-07T00:00:00.000Z",
    });
    expect(await spendByDay(key.id)).toEqual({ "2026-11-28": 2n * one, "2026-11-30": one });
    await assertBooksBalance(world.app.rt.db);
  });
});
