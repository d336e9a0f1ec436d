// A request as explicit phases (docs/decisions.md "Phases that do not reach into each other"):
// admission answers a frozen request, attempts are frozen and only appended to the trail, the end is
// a pure function of the request (item and escrow plan) that the settlement alone applies, and how a
// request ended is a value the end phase keeps.
import { afterEach, describe, expect, test } from "vitest";
import { Attempted } from "../../../src/domain/inference/pipeline/attempt-loop.js";
import { attemptRecord } from "../../../src/domain/inference/pipeline/attempts.js";
import { answered } from "../../../src/domain/inference/routing/lanes.js";
import { endItem } from "../../../src/domain/inference/settlement/end-item.js";
import { type MarketWorld, marketPipeline, openText, useMarketDb } from "../../../testkit/market-pipeline.js";

const marketDb = useMarketDb();
let world: MarketWorld;
afterEach(async () => {
  await world?.pipeline.close();
});

async function market() {
  world = await marketPipeline(marketDb());
  const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 60 });
  await world.market.addOffer({ priceCents: 35, quantityMicroDiem: 50_000_000n });
  await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50_000_000n });
  return buyer;
}

describe("admit → Admitted", () => {
  test("the admitted request and its attempt are frozen: no later phase can re-plan or re-point them", async () => {
    const buyer = await market();
    const session = await openText(world, buyer);
    expect(Object.isFrozen(session)).toBe(true);
    expect(Object.isFrozen(session.attempt)).toBe(true);
    expect(() => {
      (session as { plan: unknown }).plan = null;
    }).toThrow(TypeError);
    expect(session.buyerHold?.held).toBe(true);
    expect(session.trail.inFlight()).toBe(session.attempt);
    await world.pipeline.abort(session, "test_done");
  });
});

describe("attempt → the trail", () => {
  test("a fall-forward appends: the first attempt keeps its values, the one in flight is derived", async () => {
    const buyer = await market();
    const session = await openText(world, buyer);
    const first = session.attempt;
    let calls = 0;
    const { settled } = await world.pipeline.run(session, async ({ attempt }) => {
      if (calls++ === 0) return Attempted.fallForward({ kind: "retryable", status: 500, detail: "test" });
      expect(attempt).not.toBe(first);
      expect(session.trail.inFlight()).toBe(attempt);
      return answered({ kind: "settled", usage: { promptTokens: 30, completionTokens: 10 } }, null);
    });
    expect(settled.clearingPriceCents).toBe(40);
    // the first attempt is what it was: its price, its (released) hold
    expect(first.priceCentsPerDollar).toBe(35);
    expect(first.offerHold.held).toBe(false);
    expect(session.trail.records.map((r) => [r.price, r.outcome])).toEqual([
      [35, "retryable_failure"],
      [40, "succeeded"],
    ]);
    expect(session.trail.inFlight()).toBeNull();
  });
});

describe("end → { item, escrow }", () => {
  test("the end is pure: computing it moves no slice; the settlement applies it once", async () => {
    const buyer = await market();
    const session = await openText(world, buyer);
    const buyerSlice = session.buyerHold?.slice;
    const offerSlice = session.attempt.offerHold.slice;
    const before = [buyerSlice?.total, buyerSlice?.used, offerSlice.total, offerSlice.used];
    const record = attemptRecord(session.attempt, "aborted", null, new Date());
    const { item, escrow } = endItem(session, new Date(), {
      status: "failed",
      errorCode: "test",
      attempt: { attempt: session.attempt, record },
    });
    expect([buyerSlice?.total, buyerSlice?.used, offerSlice.total, offerSlice.used]).toEqual(before);
    expect(item.returns).toEqual([]);
    expect(escrow.release).toEqual([session.buyerHold, session.attempt.offerHold]);
    expect(escrow.spend).toEqual([]);
    expect(session.buyerHold?.held).toBe(true);
    // ended is a value kept by the end phase; a second ending is refused or ignored, never doubled
    expect(world.pipeline.ended(session)).toBeUndefined();
    await world.pipeline.abort(session, "test_done");
    expect(world.pipeline.ended(session)).toEqual({ kind: "aborted", errorCode: "test_done" });
    expect(session.buyerHold?.held).toBe(false);
    await world.pipeline.abort(session, "again");
    expect(world.pipeline.ended(session)).toEqual({ kind: "aborted", errorCode: "test_done" });
    await expect(
      world.pipeline.settle(session, { kind: "settled", usage: { promptTokens: 1, completionTokens: 1 } }),
    ).rejects.toMatchObject({ code: "internal_error" });
    const records = await world.market.requests();
    expect(records.map((r) => [r.status, r.errorCode])).toEqual([["failed", "test_done"]]);
  });
});
