// Clearing on the pipeline (SPEC "What the service does" 3–4, "Capacity" 5), over the project's SQL
// stores (testkit/market-pipeline.ts: a database cloned from the migrated template): which offer a request clears on — the cheapest eligible one
// at or below the ceiling, ties by age then id — which offers are passed over, and the 503s when
// none can take it. `chooseOffer` alone is clearing.test.ts; here it is the whole admission, on
// svc_eligible, svc_routable and the clearing order as Postgres runs them.
import { afterEach, describe, expect, test } from "vitest";
import { answered } from "../../../src/domain/inference/routing/lanes.js";
import { computeCharge } from "../../../src/lib/money.js";
import type { MarketDb } from "../../../testkit/market-db.js";
import { type MarketWorld, marketPipeline, openText, useMarketDb } from "../../../testkit/market-pipeline.js";

const marketDb = useMarketDb();
let world: MarketWorld;
afterEach(async () => {
  await world?.pipeline.close();
});

const USAGE = { promptTokens: 30, completionTokens: 10 };
const BURN = 30n + 10n * 4n;

async function setup(ceilingCents = 50) {
  world = await marketPipeline(marketDb());
  return world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents });
}

/** Opens and settles one request; the offer it cleared on. */
async function clearOne(buyer: { accountId: string; apiKeyId: string }) {
  const session = await openText(world, buyer);
  const offerId = session.attempt.offerId;
  const { settled } = await world.pipeline.run(session, async () => answered({ kind: "settled", usage: USAGE }, null));
  return { offerId, settled };
}

describe("the cheapest eligible offer at or below the ceiling", () => {
  test("clears there, charges burn × its price plus nothing else, and takes the burn off that offer", async () => {
    const buyer = await setup(50);
    await world.market.addOffer({ priceCents: 60, quantityMicroDiem: 50_000_000n });
    const cheapest = await world.market.addOffer({ priceCents: 35, quantityMicroDiem: 50_000_000n });
    await world.market.addOffer({ priceCents: 45, quantityMicroDiem: 50_000_000n });
    await world.market.addOffer({ priceCents: 20, quantityMicroDiem: 50_000_000n, status: "paused" });
    const { offerId, settled } = await clearOne(buyer);
    expect(offerId).toBe(cheapest.offerId);
    const split = computeCharge(BURN, 35, world.config.fees.platformFeeBps);
    expect(settled).toMatchObject({ clearingPriceCents: 35, burnMicroDiem: BURN, costMicroUsdc: split.grossMicroUsdc });
    expect((await world.market.offer(cheapest.offerId)).remainingMicroDiem).toBe(50_000_000n - BURN);
    expect((await world.market.account(cheapest.supplierAccountId)).supplierPayableMicroUsdc).toBe(
      split.supplierMicroUsdc,
    );
    expect(await world.market.clears()).toMatchObject([
      { offerId: cheapest.offerId, priceCents: 35, burnMicroDiem: BURN },
    ]);
  });

  test("an offer priced exactly at the ceiling clears; one a cent above never does", async () => {
    const buyer = await setup(50);
    const atCeiling = await world.market.addOffer({ priceCents: 50, quantityMicroDiem: 50_000_000n });
    await world.market.addOffer({ priceCents: 51, quantityMicroDiem: 50_000_000n });
    expect((await clearOne(buyer)).offerId).toBe(atCeiling.offerId);
  });
});

describe("ties", () => {
  test("at the same price the older offer clears first, whatever order they were posted in the book", async () => {
    const buyer = await setup();
    const now = world.clock.now().getTime();
    const newer = await world.market.addOffer({
      priceCents: 35,
      quantityMicroDiem: 50_000_000n,
      createdAt: new Date(now + 5),
    });
    const older = await world.market.addOffer({
      priceCents: 35,
      quantityMicroDiem: 50_000_000n,
      createdAt: new Date(now),
    });
    expect((await clearOne(buyer)).offerId).toBe(older.offerId);
    expect((await world.market.offer(newer.offerId)).remainingMicroDiem).toBe(50_000_000n);
  });

  test("same price and age: the smaller id (deterministic)", async () => {
    const buyer = await setup();
    const at = world.clock.now();
    const high = "ffffffff-0000-4000-8000-000000000000";
    const low = "00000000-0000-4000-8000-000000000000";
    await world.market.addOffer({ priceCents: 35, quantityMicroDiem: 50_000_000n, createdAt: at, offerId: high });
    await world.market.addOffer({ priceCents: 35, quantityMicroDiem: 50_000_000n, createdAt: at, offerId: low });
    expect((await clearOne(buyer)).offerId).toBe(low);
  });
});

describe("offers passed over, however cheap", () => {
  const cases: Array<
    [string, (m: MarketDb, o: { offerId: string; upstreamKeyId: string }, now: Date) => Promise<void>]
  > = [
    [
      "its key cooling down",
      (m, o, now) => m.updateUpstreamKey(o.upstreamKeyId, { cooldownUntil: new Date(now.getTime() + 1) }),
    ],
    ["its key marked auth_failed", (m, o) => m.updateUpstreamKey(o.upstreamKeyId, { status: "auth_failed" })],
    ["its key revoked", (m, o) => m.updateUpstreamKey(o.upstreamKeyId, { status: "revoked" })],
    ["the offer paused", (m, o) => m.updateOffer(o.offerId, { status: "paused" })],
    ["the offer expired", (m, o, now) => m.updateOffer(o.offerId, { expiresAt: now })],
    [
      "its key's balance unknown (routes nothing)",
      (m, o) => m.updateUpstreamKey(o.upstreamKeyId, { lastBalanceMicroDiem: null }),
    ],
    [
      "its key's balance below the maximum burn",
      (m, o) => m.updateUpstreamKey(o.upstreamKeyId, { lastBalanceMicroDiem: 10n }),
    ],
    ["its remaining DIEM below the maximum burn", (m, o) => m.updateOffer(o.offerId, { remainingMicroDiem: 10n })],
    [
      "held by other processes' slices",
      async (m, o) =>
        m.updateOffer(o.offerId, { reservedMicroDiem: (await m.offer(o.offerId)).remainingMicroDiem - 10n }),
    ],
    ["priced above the ceiling", (m, o) => m.updateOffer(o.offerId, { priceCentsPerDollar: 51 })],
  ];

  test.each(cases)("%s", async (_why, exclude) => {
    const buyer = await setup(50);
    const cheap = await world.market.addOffer({ priceCents: 30, quantityMicroDiem: 50_000_000n });
    const fallback = await world.market.addOffer({ priceCents: 50, quantityMicroDiem: 50_000_000n });
    // without the exclusion the cheap offer clears (the case changes only that)
    expect((await clearOne(buyer)).offerId).toBe(cheap.offerId);
    await exclude(world.market, cheap, world.clock.now());
    world.pipeline.invalidateBook();
    const before = (await world.market.offer(cheap.offerId)).remainingMicroDiem;
    expect((await clearOne(buyer)).offerId).toBe(fallback.offerId);
    expect((await world.market.offer(cheap.offerId)).remainingMicroDiem).toBe(before);
  });
});

describe("when nothing can take the request (503, with the diagnosis)", () => {
  test("nothing posted at any price: pool_empty", async () => {
    const buyer = await setup();
    expect(await openText(world, buyer).catch((e: unknown) => e)).toMatchObject({
      code: "pool_empty",
      details: { retryAfterSeconds: 30 },
    });
  });

  test("offers at or below the ceiling too shallow: insufficient_routable_at_price, with their depth", async () => {
    const buyer = await setup(50);
    await world.market.addOffer({ priceCents: 40, quantityMicroDiem: 50n });
    await world.market.addOffer({ priceCents: 45, quantityMicroDiem: 70n });
    expect(await openText(world, buyer, { maxTokens: 100 }).catch((e: unknown) => e)).toMatchObject({
      code: "insufficient_routable_at_price",
      details: { eligibleRoutableDiem: "0.000120", maxEligibleOfferDiem: "0.000070" },
    });
  });

  test("after fall-forward, an offer above the ceiling is never the next one: 502 upstream_error", async () => {
    const buyer = await setup(50);
    const cheap = await world.market.addOffer({ priceCents: 30, quantityMicroDiem: 50_000_000n });
    const above = await world.market.addOffer({ priceCents: 60, quantityMicroDiem: 50_000_000n });
    const tried: string[] = [];
    const err = await world.pipeline
      .run(await openText(world, buyer), async ({ attempt }) => {
        tried.push(attempt.offerId);
        return { kind: "failed", failure: { kind: "server", status: 500, message: "boom" } };
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "upstream_error" });
    expect(tried).toEqual([cheap.offerId]);
    expect((await world.market.offer(above.offerId)).reservedMicroDiem).toBe(0n);
  });
});
