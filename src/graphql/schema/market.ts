import type { CapacityChangedEvent } from "../../adapters/pubsub.js";
import type { MarketLadder, PriceLevel } from "../../domain/market/market-types.js";
import { DomainError } from "../../lib/errors.js";
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
    description: "Public market depth. `maxPriceCents` narrows the ladder (1-80).",
    args: { maxPriceCents: t.arg.int({ required: false }) },
    resolve: (_root, args, ctx) => {
      const max = args.maxPriceCents ?? undefined;
      if (max !== undefined && (max < 1 || max > 80)) {
        throw new DomainError("invalid_request", "maxPriceCents must be an integer 1-80.", { field: "maxPriceCents" });
      }
      return ctx.services.market.getLadder(max);
    },
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
