// Per-key rules at admission (issue 28 deliverables 3 and 4), on the pipeline over the project's SQL
// stores (testkit/market-pipeline.ts; svc_key_reserve and svc_end_items in Postgres): a key's budget held before the upstream is called and never overrun
// by concurrent requests, an unbounded request sized down to what the period leaves, the period
// rolling over at the UTC boundary with no job, the models a key may call, and the key's and the
// request's own ceilings, which only lower the account's. Over HTTP:
// test/integration/inference/key-budgets.test.ts and, for the rollover with a moved clock,
// test/integration/inference/key-budget-rollover.test.ts.
import { afterEach, describe, expect, test } from "vitest";
import { maxChargeFor, textPricer } from "../../../src/domain/inference/pipeline/admission.js";
import type { AttemptingSession, KeyRules } from "../../../src/domain/inference/pipeline/session.js";
import { answered } from "../../../src/domain/inference/routing/lanes.js";
import {
  type MarketWorld,
  marketPipeline,
  openText,
  TEXT_MODEL,
  useMarketDb,
} from "../../../testkit/market-pipeline.js";

const marketDb = useMarketDb();
let world: MarketWorld;
afterEach(async () => {
  await world?.pipeline.close();
});

const DAILY: KeyRules = { budgeted: true, maxPriceCents: null, models: [] };

const settle = (session: AttemptingSession, completionTokens = 10) =>
  world.pipeline.run(session, async () =>
    answered({ kind: "settled", usage: { promptTokens: 100, completionTokens } }, null),
  );

const limitKey = (apiKeyId: string, limit: bigint | null, reset: "daily" | "weekly" | "monthly" | "never" = "daily") =>
  world.market.setKeyLimit(apiKeyId, limit, reset);

/** What the key was charged, all days. */
const spent = (apiKeyId: string) => world.market.keySpend(apiKeyId);
const holds = () => world.market.keyHolds();

describe("a key's budget", () => {
  test("a request holds its maximum charge; the ending charges the actual cost and releases the hold", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 50 });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    await limitKey(buyer.apiKeyId, 1_000_000n);
    const session = await openText(world, buyer, { maxTokens: 500, key: DAILY });
    expect(session.budgetHold).toBe(session.plan.maxChargeMicroUsdc);
    expect(await holds()).toEqual([
      expect.objectContaining({ apiKeyId: buyer.apiKeyId, amountMicroUsdc: session.plan.maxChargeMicroUsdc }),
    ]);
    const { settled } = await settle(session);
    expect(await holds()).toHaveLength(0);
    expect(await spent(buyer.apiKeyId)).toBe(settled.costMicroUsdc);
  });

  test("concurrent requests never hold or charge more than the limit; the rest are 402 key_budget_exceeded", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 100_000_000n, ceilingCents: 50 });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 500_000_000n });
    // each request's maximum: burn(100 prompt, 500 completion) = 2,100 micro-DIEM at 50 cents
    const each = maxChargeFor(2_100n, 50);
    const limit = each * 4n + each / 2n;
    await limitKey(buyer.apiKeyId, limit);
    const opened = await Promise.allSettled(
      // eight: the key's in-flight limit
      Array.from({ length: 8 }, () => openText(world, buyer, { maxTokens: 500, key: DAILY })),
    );
    const ok = opened.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    const refused = opened.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
    // four fit whole, a fifth sized down to what is left, the rest refused
    const held = ok.reduce((a, s) => a + (s.budgetHold ?? 0n), 0n);
    expect(held).toBeLessThanOrEqual(limit);
    expect(ok.length).toBeGreaterThanOrEqual(4);
    for (const e of refused) {
      expect(e).toMatchObject({ code: "key_budget_exceeded", status: 402 });
      expect(e.details.remainingUsdc).toMatch(/^\d+\.\d{6}$/);
      expect(e.details.resetsAt).toBe("2030-01-16T00:00:00.000Z");
      expect(e.details.accepts).toBeUndefined();
    }
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(ok.length + refused.length).toBe(8);
    // every admitted request burns its whole maximum: the key's spend still stays within the limit
    for (const s of ok) await settle(s, 500);
    expect(await spent(buyer.apiKeyId)).toBeLessThanOrEqual(limit);
    expect(await holds()).toHaveLength(0);
    // refusals were recorded with their support reference, holding nothing
    expect((await world.market.requests()).filter((r) => r.errorCode === "key_budget_exceeded")).toHaveLength(
      refused.length,
    );
    expect((await world.market.account(buyer.accountId)).reservedMicroUsdc).toBeGreaterThanOrEqual(0n);
  });

  test("an unbounded request is sized down to what the period leaves instead of refused", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 100_000_000n, ceilingCents: 50 });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 500_000_000n });
    const limit = maxChargeFor(100n + 300n * 4n, 50);
    await limitKey(buyer.apiKeyId, limit);
    const session = await openText(world, buyer, { key: DAILY });
    expect(session.plan.admittedMaxTokens).toBeLessThan(4096);
    expect(session.plan.admittedMaxTokens).toBeGreaterThanOrEqual(16);
    expect(session.budgetHold).toBeLessThanOrEqual(limit);
    await settle(session, session.plan.admittedMaxTokens);
    expect(await spent(buyer.apiKeyId)).toBeLessThanOrEqual(limit);
  });

  test("a daily key spent to its limit serves again after the UTC day rolls over", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 100_000_000n, ceilingCents: 50 });
    await world.market.addOffer({
      priceCents: 40,
      quantityMicroDiem: 500_000_000n,
      expiresAt: new Date("2030-02-01Z"),
    });
    const each = maxChargeFor(2_100n, 50);
    await limitKey(buyer.apiKeyId, 10n * each);
    await settle(await openText(world, buyer, { maxTokens: 500, key: DAILY }), 500);
    // spent to the limit exactly
    await limitKey(buyer.apiKeyId, await spent(buyer.apiKeyId));
    const err = await openText(world, buyer, { maxTokens: 500, key: DAILY }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "key_budget_exceeded" });
    // 12:00 → 00:00:01 the next day
    world.clock.advance(12 * 3600_000 + 1000);
    const next = await openText(world, buyer, { maxTokens: 500, key: DAILY });
    expect(next.budgetHold).toBeGreaterThan(0n);
    expect(next.budgetHold).toBeLessThanOrEqual(await spent(buyer.apiKeyId));
    await settle(next);
    // a `never` key does not roll over
    await limitKey(buyer.apiKeyId, await spent(buyer.apiKeyId), "never");
    const never: KeyRules = { ...DAILY };
    expect(await openText(world, buyer, { maxTokens: 500, key: never }).catch((e: unknown) => e)).toMatchObject({
      code: "key_budget_exceeded",
      details: { resetsAt: null, remainingUsdc: "0.000000" },
    });
  });

  test("a period changed since the process cached the policy is held in the stored one", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 100_000_000n, ceilingCents: 50 });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 500_000_000n });
    await limitKey(buyer.apiKeyId, 5_000_000n, "weekly");
    const session = await openText(world, buyer, { maxTokens: 500, key: DAILY });
    expect(session.budgetHold).toBe(session.plan.maxChargeMicroUsdc);
    await settle(session);
    // the key's limit was removed: nothing is held
    await limitKey(buyer.apiKeyId, null);
    const free = await openText(world, buyer, { maxTokens: 500, key: DAILY });
    expect(free.budgetHold).toBeNull();
    expect(await holds()).toHaveLength(0);
    await settle(free);
  });

  test("holds of a router process that died go with its escrow", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 100_000_000n, ceilingCents: 50 });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 500_000_000n });
    await limitKey(buyer.apiKeyId, 5_000_000n);
    await openText(world, buyer, { maxTokens: 500, key: DAILY });
    expect(await holds()).toHaveLength(1);
    world.clock.advance(10 * 60_000);
    await world.market.stores().escrow.releaseExpired(world.clock.now(), 10);
    expect(await holds()).toHaveLength(0);
  });
});

describe("a key's models and ceilings", () => {
  test("a model outside the key's list is 403 model_not_allowed, before anything is held", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    const err = await openText(world, buyer, { key: { ...DAILY, budgeted: false, models: ["other-model"] } }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: "model_not_allowed", status: 403 });
    expect(await world.market.requests()).toHaveLength(0);
    expect(world.gates.held()).toEqual([]);
    const listed = await openText(world, buyer, { key: { ...DAILY, budgeted: false, models: ["mem-text"] } });
    await settle(listed);
  });

  test("the key's ceiling lowers the account's: below every posted price is 503 with buyerMaxCents = the key's", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 70 });
    await world.market.addOffer({ priceCents: 45, quantityMicroDiem: 50_000_000n });
    const key = { ...DAILY, budgeted: false, maxPriceCents: 40 };
    const err = await openText(world, buyer, { key }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "no_eligible_supply", details: { buyerMaxCents: 40, cheapestPostedCents: 45 } });
    expect((await world.market.requests()).at(-1)).toMatchObject({ ceilingCents: 40 });
    // the request's own ceiling lowers it further, never raises it
    const raised = await openText(world, buyer, { key, maxPriceCents: 80 }).catch((e: unknown) => e);
    expect(raised).toMatchObject({ code: "no_eligible_supply", details: { buyerMaxCents: 40 } });
    const s = await openText(world, buyer, { maxPriceCents: 50 });
    expect(s.plan.maxChargeMicroUsdc).toBe(maxChargeFor(s.plan.maxBurnMicroDiem, 50));
    await settle(s);
    expect(await openText(world, buyer, { maxPriceCents: 44 }).catch((e: unknown) => e)).toMatchObject({
      code: "no_eligible_supply",
      details: { buyerMaxCents: 44 },
    });
  });
});

describe("a hold and its charge fall in the same period (issue 38, Deliver 4)", () => {
  test("a request started before UTC midnight whose admission ends after it is held in the day it started", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 100_000_000n, ceilingCents: 50 });
    await world.market.addOffer({
      priceCents: 40,
      quantityMicroDiem: 500_000_000n,
      expiresAt: new Date("2030-02-01Z"),
    });
    const each = maxChargeFor(2_100n, 50);
    await limitKey(buyer.apiKeyId, 10n * each);
    // 23:59:59 UTC: spend the day's budget down to less than one request's maximum
    world.clock.advance(12 * 3600_000 - 1000);
    await settle(await openText(world, buyer, { maxTokens: 500, key: DAILY }), 500);
    await limitKey(buyer.apiKeyId, (await spent(buyer.apiKeyId)) + each / 2n);
    // a request that starts now and is priced by an upstream quote that takes two seconds (a video
    // quote): its admission ends after midnight; its charge counts on its start day
    const slow = world.pipeline.open({
      accountId: buyer.accountId,
      apiKeyId: buyer.apiKeyId,
      route: "chat",
      modality: "text",
      model: TEXT_MODEL.id,
      stream: false,
      key: DAILY,
      askPrice: async () => {
        world.clock.advance(2000);
        return textPricer(TEXT_MODEL, 100, 500);
      },
    });
    const outcome = await slow.then(
      async (s) => {
        await settle(s, 500);
        return s;
      },
      (e: unknown) => e,
    );
    // either refused, or sized down to what the start day leaves: never more than that day's limit
    const day = "2030-01-15";
    const charged = await world.market.keySpend(buyer.apiKeyId, day);
    const limit =
      (
        await world.market.sql.query<{ l: bigint }>("SELECT limit_micro_usdc AS l FROM api_keys WHERE id = $1", [
          buyer.apiKeyId,
        ])
      ).rows[0]?.l ?? 0n;
    expect(charged, String(outcome)).toBeLessThanOrEqual(limit);
  });
});
