import { Repeater } from "graphql-yoga";
import type { CapacityChangedEvent, ClearRecordedEvent } from "../../adapters/pubsub.js";
import type { Capacity, MarketLadder, MarketStats, ModalityDay, PriceLevel } from "../../domain/market/market-types.js";
import { MAX_CEILING_CENTS, MAX_OFFER_PRICE_CENTS, MIN_CEILING_CENTS, MIN_OFFER_PRICE_CENTS } from "../../lib/money.js";
import { builder } from "../builder.js";

const PriceLevelRef = builder.objectRef<PriceLevel>("PriceLevel").implement({
  description: "One price level of the routable ladder. Never identifies suppliers.",
  fields: (t) => ({
    priceCentsPerDollar: t.exposeInt("priceCentsPerDollar"),
    routableDiem: t.field({ type: "MicroDiem", resolve: (p) => p.routableMicroDiem }),
    usdcToBuyAll: t.field({ type: "MicroUsdc", resolve: (p) => p.usdcToBuyAllMicro }),
  }),
});

const MarketRef = builder.objectRef<MarketLadder>("Market").implement({
  description: "Routable supply at or below a price, cheapest first (the router's eligibility rule).",
  fields: (t) => ({
    generatedAt: t.field({ type: "DateTime", resolve: (m) => m.generatedAt }),
    cheapestPostedCents: t.int({ nullable: true, resolve: (m) => m.cheapestPostedCents }),
    routableDiem: t.field({ type: "MicroDiem", resolve: (m) => m.routableMicroDiem }),
    usdcToBuyAll: t.field({ type: "MicroUsdc", resolve: (m) => m.usdcToBuyAllMicro }),
    prices: t.field({ type: [PriceLevelRef], resolve: (m) => m.prices }),
  }),
});

const CapacityChangedRef = builder.objectRef<CapacityChangedEvent>("CapacityChanged").implement({
  description: "Public: the routable supply changed. No supplier identity.",
  fields: (t) => ({
    generatedAt: t.field({ type: "DateTime", resolve: (e) => new Date(e.generatedAt) }),
    cheapestPostedCents: t.int({ nullable: true, resolve: (e) => e.cheapestPostedCents }),
    routableDiem: t.field({ type: "MicroDiem", resolve: (e) => e.routableMicroDiem }),
    reason: t.exposeString("reason"),
  }),
});

builder.queryField("market", (t) =>
  t.field({
    type: MarketRef,
    description: `Public market depth. \`maxPriceCents\` narrows the ladder (${MIN_OFFER_PRICE_CENTS}-${MAX_OFFER_PRICE_CENTS}).`,
    args: { maxPriceCents: t.arg.int({ required: false }) },
    resolve: (_root, args, ctx) => ctx.services.market.getLadder(args.maxPriceCents ?? undefined),
  }),
);

builder.subscriptionField("capacityChanged", (t) =>
  t.field({
    type: CapacityChangedRef,
    description: "Public: fires when routable supply changes, from any process.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("capacityChanged"),
    resolve: (event) => event,
  }),
);

const ModalityRef = builder.objectRef<{ available: boolean; liveModels: number }>("ModalityAvailability").implement({
  fields: (t) => ({ available: t.exposeBoolean("available"), liveModels: t.exposeInt("liveModels") }),
});

const CapacityRef = builder.objectRef<Capacity>("Capacity").implement({
  description: "SPEC Capacity: a pre-flight view of routable supply (cached 30 s), not a reservation.",
  fields: (t) => ({
    generatedAt: t.field({ type: "DateTime", resolve: (c) => c.generatedAt }),
    cheapestPostedCents: t.int({ nullable: true, resolve: (c) => c.cheapestPostedCents }),
    routableDiem: t.field({ type: "MicroDiem", resolve: (c) => c.routableMicroDiem }),
    usdcToBuyAll: t.field({ type: "MicroUsdc", resolve: (c) => c.usdcToBuyAllMicro }),
    prices: t.field({ type: [PriceLevelRef], resolve: (c) => c.prices }),
    text: t.field({ type: ModalityRef, resolve: (c) => c.modalities.text }),
    image: t.field({ type: ModalityRef, resolve: (c) => c.modalities.image }),
    video: t.field({ type: ModalityRef, resolve: (c) => c.modalities.video }),
  }),
});

builder.queryField("capacity", (t) =>
  t.field({
    type: CapacityRef,
    description: `Public capacity; \`maxPriceCents\` (${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}) narrows the ladder and the totals.`,
    args: { maxPriceCents: t.arg.int({ required: false }) },
    resolve: (_root, args, ctx) => ctx.services.market.capacity(args.maxPriceCents ?? undefined),
  }),
);

const ModalityDayRef = builder.objectRef<ModalityDay & { modality: string }>("ModalityDay").implement({
  description: "One modality's clears today (UTC). Aggregates only.",
  fields: (t) => ({
    modality: t.exposeString("modality"),
    clears: t.exposeInt("clears"),
    burn: t.field({ type: "MicroDiem", resolve: (d) => d.burnMicroDiem }),
    gross: t.field({ type: "MicroUsdc", resolve: (d) => d.grossMicroUsdc }),
  }),
});

const MarketStatsRef = builder.objectRef<MarketStats>("MarketStats").implement({
  description: "Corridor depth, buyer savings and today's clears. Aggregates only.",
  fields: (t) => ({
    generatedAt: t.field({ type: "DateTime", resolve: (s) => s.generatedAt }),
    corridor: t.field({ type: MarketRef, resolve: (s) => s.corridor }),
    clears: t.int({ resolve: (s) => s.savings.clears }),
    faceValue: t.field({ type: "MicroUsdc", resolve: (s) => s.savings.faceMicroUsdc }),
    paid: t.field({ type: "MicroUsdc", resolve: (s) => s.savings.paidMicroUsdc }),
    saved: t.field({ type: "MicroUsdc", resolve: (s) => s.savings.savedMicroUsdc }),
    paidOfFaceBps: t.int({ nullable: true, resolve: (s) => s.savings.paidOfFaceBps }),
    todayClears: t.int({ resolve: (s) => s.today.clears }),
    todayBurn: t.field({ type: "MicroDiem", resolve: (s) => s.today.burnMicroDiem }),
    todayGross: t.field({ type: "MicroUsdc", resolve: (s) => s.today.grossMicroUsdc }),
    todayAverageClearingPriceCents: t.int({ nullable: true, resolve: (s) => s.today.averageClearingPriceCents }),
    todayByModality: t.field({
      type: [ModalityDayRef],
      description: "Today's clears by modality (text, image, video).",
      resolve: (s) =>
        (["text", "image", "video"] as const).map((modality) => ({ modality, ...s.today.byModality[modality] })),
    }),
  }),
});

builder.queryField("marketStats", (t) =>
  t.field({
    type: MarketStatsRef,
    description: "Public market statistics.",
    resolve: (_r, _a, ctx) => ctx.services.market.stats(),
  }),
);

export const ClearRef = builder.objectRef<ClearRecordedEvent>("Clear").implement({
  description: "Public and anonymised: one clear (no buyer, supplier, key or request identity).",
  fields: (t) => ({
    at: t.field({ type: "DateTime", resolve: (c) => new Date(c.at) }),
    model: t.exposeString("model"),
    modality: t.exposeString("modality"),
    priceCentsPerDollar: t.exposeInt("priceCentsPerDollar"),
    burnDiem: t.field({ type: "MicroDiem", resolve: (c) => c.burnMicroDiem }),
    grossUsdc: t.field({ type: "MicroUsdc", resolve: (c) => c.grossMicroUsdc }),
  }),
});

builder.subscriptionField("clears", (t) =>
  t.field({
    type: ClearRef,
    description: "Public: every clear as it settles, from any process (for dashboards).",
    // clears travel in per-tick batches (one Redis message each); each is its own event here
    subscribe: (_root, _args, ctx) =>
      new Repeater<ClearRecordedEvent>(async (push, stop) => {
        const batches = ctx.bus.subscribe("clearsRecorded");
        stop.then(() => batches.return(undefined));
        for await (const batch of batches) for (const c of batch) await push(c);
        stop();
      }),
    resolve: (c) => c,
  }),
);
