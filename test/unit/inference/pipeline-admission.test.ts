// Admission on the pipeline (SPEC "What the service does" 3, "Errors" 402/503), over the project's SQL
// stores (testkit/market-pipeline.ts: a database cloned from the migrated template): the ceiling as the buyer's maximum price, a balance too short
// for the full completion cap sizing the request down, a balance too short for anything refused 402,
// a changed ceiling re-planned, a revoked key refused. The arithmetic itself is admission.test.ts;
// here it is what the pipeline admits, holds and charges.
import { afterEach, describe, expect, test } from "vitest";
import { flatJobPricer, maxChargeFor, planAdmission } from "../../../src/domain/inference/pipeline/admission.js";
import type { AttemptingSession } from "../../../src/domain/inference/pipeline/session.js";
import { answered } from "../../../src/domain/inference/routing/lanes.js";
import { DomainError } from "../../../src/lib/errors.js";
import { computeCharge } from "../../../src/lib/money.js";
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

const settle = (session: AttemptingSession) =>
  world.pipeline.run(session, async () =>
    answered({ kind: "settled", usage: { promptTokens: 30, completionTokens: 10 } }, null),
  );

/** The one ended request's record. */
async function onlyRecord() {
  const requests = await world.market.requests();
  expect(requests).toHaveLength(1);
  return requests[0];
}

describe("the buyer's ceiling is their maximum price", () => {
  test("the maximum charge is the maximum burn at the ceiling; the charge is the burn at the clearing price", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 60 });
    await world.market.addOffer({ priceCents: 35, quantityMicroDiem: 50_000_000n });
    const session = await openText(world, buyer, { promptEstimate: 100, maxTokens: 500 });
    // burn(100 prompt, 500 completion) = 100 × 1 + 500 × 4 micro-DIEM, held at the ceiling
    expect(session.plan).toMatchObject({ admittedMaxTokens: 500, maxBurnMicroDiem: 2_100n });
    expect(session.plan.maxChargeMicroUsdc).toBe(maxChargeFor(2_100n, 60));
    expect(await world.market.escrowOfBuyer(buyer.accountId)).toBeGreaterThanOrEqual(session.plan.maxChargeMicroUsdc);
    const { settled } = await settle(session);
    const burn = 30n + 10n * 4n;
    const fee = world.config.fees.platformFeeBps;
    expect(settled).toMatchObject({ clearingPriceCents: 35, burnMicroDiem: burn });
    expect(settled.costMicroUsdc).toBe(computeCharge(burn, 35, fee).grossMicroUsdc);
    expect((await world.market.account(buyer.accountId)).confirmedMicroUsdc).toBe(10_000_000n - settled.costMicroUsdc);
  });

  test("nothing clears above it: offers priced higher are a 503 no_eligible_supply naming the cheapest", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 40 });
    const above = await world.market.addOffer({ priceCents: 45, quantityMicroDiem: 50_000_000n });
    await world.market.addOffer({ priceCents: 60, quantityMicroDiem: 50_000_000n });
    const err = await openText(world, buyer).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "no_eligible_supply",
      details: { buyerMaxCents: 40, cheapestPostedCents: 45 },
    });
    expect(await onlyRecord()).toMatchObject({ status: "failed", errorCode: "no_eligible_supply", ceilingCents: 40 });
    expect((await world.market.offer(above.offerId)).reservedMicroDiem).toBe(0n);
    expect((await world.market.account(buyer.accountId)).reservedMicroUsdc).toBe(0n);
    expect(world.gates.held()).toEqual([]);
  });

  test("a ceiling changed since this process cached it is re-planned from the account (the top-up sees it)", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 80 });
    await world.market.addOffer({ priceCents: 45, quantityMicroDiem: 50_000_000n });
    await settle(await openText(world, buyer));
    // lowered elsewhere: this process still has 80 cached
    await world.market.setCeiling(buyer.accountId, 40);
    const err = await openText(world, buyer).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "no_eligible_supply", details: { buyerMaxCents: 40 } });
    expect(await world.market.clears()).toHaveLength(1);
  });
});

describe("the balance", () => {
  test("short of the full completion cap: the request is sized down to a share of the balance, not refused", async () => {
    world = await marketPipeline(marketDb());
    const confirmed = 5_000n;
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: confirmed, ceilingCents: 80 });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    const session = await openText(world, buyer, { promptEstimate: 100 });
    const sized = planAdmission({
      pricing: TEXT_MODEL.pricing,
      promptEstimate: 100,
      requestedMaxTokens: undefined,
      modelMaxCompletionTokens: TEXT_MODEL.maxCompletionTokens,
      ceilingCents: 80,
      availableMicroUsdc: confirmed,
    });
    expect(session.plan).toEqual(sized);
    expect(session.plan.admittedMaxTokens).toBeLessThan(TEXT_MODEL.maxCompletionTokens ?? 0);
    expect(session.plan.maxChargeMicroUsdc).toBeLessThanOrEqual(confirmed);
    // the upstream is sent the sized cap, so no charge can exceed what was held
    const { settled } = await settle(session);
    expect(settled.costMicroUsdc).toBeLessThanOrEqual(session.plan.maxChargeMicroUsdc);
  });

  test("short of even the smallest request: 402 insufficient_balance, recorded, nothing held", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 100n, ceilingCents: 80 });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    const err = await openText(world, buyer, { promptEstimate: 100 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "insufficient_balance" });
    expect(await onlyRecord()).toMatchObject({ status: "failed", errorCode: "insufficient_balance", clearId: null });
    expect(await world.market.account(buyer.accountId)).toMatchObject({
      confirmedMicroUsdc: 100n,
      reservedMicroUsdc: 0n,
    });
    expect(world.gates.held()).toEqual([]);
  });

  test("a flat job the balance covers only below the ceiling clears at or below that price, else 402", async () => {
    world = await marketPipeline(marketDb());
    const job = 1_000_000n;
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: maxChargeFor(job, 40), ceilingCents: 80 });
    await world.market.addOffer({ priceCents: 45, quantityMicroDiem: 50_000_000n });
    const open = () =>
      world.pipeline.open({
        ...buyer,
        route: "chat",
        modality: "text",
        model: TEXT_MODEL.id,
        stream: false,
        price: () => flatJobPricer(job),
      });
    // an offer that could hold the job sits between what the balance covers (40) and the ceiling: 402
    expect(await open().catch((e: unknown) => e)).toMatchObject({ code: "insufficient_balance" });
    await world.market.addOffer({ priceCents: 38, quantityMicroDiem: 50_000_000n });
    world.pipeline.invalidateBook();
    const session = await open();
    expect(session.plan.priceCapCents).toBe(40);
    expect(session.attempt.priceCentsPerDollar).toBe(38);
  });

  test("a revoked API key is refused 401 by the top-up, before anything is held or recorded", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    await world.market.revokeApiKey(buyer.apiKeyId);
    const err = await openText(world, buyer).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "authentication_failed" });
    expect(await world.market.requests()).toEqual([]);
    expect((await world.market.account(buyer.accountId)).reservedMicroUsdc).toBe(0n);
    expect(world.gates.held()).toEqual([]);
  });
});

describe("admission holds the maximum, and the ending gives back what it does not charge", () => {
  test("two requests in flight hold two maxima; each ending returns its own", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 50 });
    const offer = await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    const a = await openText(world, buyer, { maxTokens: 100 });
    const b = await openText(world, buyer, { maxTokens: 100 });
    expect(a.attempt.offerHold.slice.used).toBe(2n * a.plan.maxBurnMicroDiem);
    expect(a.buyerHold?.slice.used).toBe(a.plan.maxChargeMicroUsdc + b.plan.maxChargeMicroUsdc);
    await settle(a);
    expect(b.buyerHold?.slice.used).toBe(b.plan.maxChargeMicroUsdc);
    await world.pipeline.abort(b, "test_done");
    expect((await world.market.account(buyer.accountId)).reservedMicroUsdc).toBe(0n);
    expect((await world.market.offer(offer.offerId)).reservedMicroDiem).toBe(0n);
    // The test clock is frozen, so both endings carry the same completed_at: match by id, not order.
    const statusOf = new Map((await world.market.requests()).map((r) => [r.id, r.status]));
    expect([statusOf.get(a.requestId), statusOf.get(b.requestId)]).toEqual(["succeeded", "failed"]);
  });

  test("a second request the first one's top-up covers is admitted in memory: no store round trip", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 50 });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    const a = await openText(world, buyer, { maxTokens: 100 });
    expect(world.market.calls.get("escrow.take")).toBe(1);
    const b = await openText(world, buyer, { maxTokens: 100 });
    expect(world.market.calls.get("escrow.take")).toBe(1);
    expect(world.pipeline.batchStats().escrow).toMatchObject({ takes: 1, admitted: 2, inMemory: 1 });
    await settle(a);
    await settle(b);
  });

  test("a settlement that does not commit charges nothing: 500 settle_failed, recorded, everything back", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n });
    const offer = await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    const session = await openText(world, buyer);
    world.market.faults.failNextCommit = new Error("connection reset");
    const err = await settle(session).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "settle_failed", details: { supportReference: session.supportReference } });
    expect(await onlyRecord()).toMatchObject({ status: "failed", errorCode: "settle_failed", clearId: null });
    expect((await onlyRecord())?.attempts.map((a) => a.outcome)).toEqual(["aborted"]);
    expect(await world.market.account(buyer.accountId)).toMatchObject({
      confirmedMicroUsdc: 10_000_000n,
      reservedMicroUsdc: 0n,
    });
    expect(await world.market.offer(offer.offerId)).toMatchObject({
      remainingMicroDiem: 50_000_000n,
      reservedMicroDiem: 0n,
    });
    expect(world.gates.held()).toEqual([]);
  });

  test("a settlement that commits but whose answer is lost is answered as charged, once (sim seed's finding)", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n });
    const offer = await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    const session = await openText(world, buyer);
    world.market.faults.loseNextAck = new Error("connection lost after COMMIT");
    const r = await settle(session);
    if (typeof r === "string") throw new Error("the buyer did not leave");
    const clears = await world.market.clears();
    expect(clears).toHaveLength(1);
    expect(r.settled.costMicroUsdc).toBe(clears[0]?.grossMicroUsdc);
    expect(r.settled.costMicroUsdc).toBeGreaterThan(0n);
    expect(await onlyRecord()).toMatchObject({ status: "succeeded", errorCode: null });
    const account = await world.market.account(buyer.accountId);
    expect(r.settled.balanceRemainingMicroUsdc).toBe(account.confirmedMicroUsdc);
    expect(account.confirmedMicroUsdc).toBe(10_000_000n - r.settled.costMicroUsdc);
    expect((await world.market.account(buyer.accountId)).reservedMicroUsdc).toBe(0n);
    expect((await world.market.offer(offer.offerId)).reservedMicroDiem).toBe(0n);
    expect(world.gates.held()).toEqual([]);
  });

  test("the price rules' refusal (400) holds nothing", async () => {
    world = await marketPipeline(marketDb());
    const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n });
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
    const err = await world.pipeline
      .open({
        ...buyer,
        route: "chat",
        modality: "text",
        model: TEXT_MODEL.id,
        stream: false,
        price: () => {
          throw new DomainError("invalid_request", "resolution: not offered by this model");
        },
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "invalid_request" });
    expect(world.gates.held()).toEqual([]);
    expect(await world.market.requests()).toEqual([]);
  });
});
