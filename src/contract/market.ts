import { boundedInt, decimal6, timestamp, z } from "./common.js";

/** SPEC "Capacity" and the public market views: the price ladder, pool summary, market statistics. */

export const priceLevel = z
  .object({
    priceCentsPerDollar: z.number().int(),
    routableDiem: decimal6,
    usdcToBuyAll: decimal6.openapi({ description: "cost of clearing that whole row at its price" }),
  })
  .openapi("PriceLevel");

const ladder = {
  routableDiem: decimal6,
  usdcToBuyAll: decimal6,
  cheapestPostedCents: z.number().int().nullable().openapi({ description: "null when nothing is eligible" }),
  prices: z.array(priceLevel).openapi({ description: "cheapest first" }),
};

const modalityAvailability = z.object({ available: z.boolean(), liveModels: z.number().int() });

export const capacityResponse = z
  .object({
    generatedAt: timestamp,
    ...ladder,
    modalities: z.object({ text: modalityAvailability, image: modalityAvailability, video: modalityAvailability }),
  })
  .openapi("Capacity");
export type CapacityResponse = z.infer<typeof capacityResponse>;

export const poolSummaryResponse = z
  .object({ generatedAt: timestamp, prices: z.array(priceLevel) })
  .openapi("PoolSummary");

const modalityDay = z.object({ clears: z.number().int(), burnDiem: decimal6, grossUsdc: decimal6 });

export const marketStatsResponse = z
  .object({
    generatedAt: timestamp,
    corridor: z.object({ minCents: z.number().int(), maxCents: z.number().int(), ...ladder }),
    savings: z.object({
      clears: z.number().int(),
      faceValueUsdc: decimal6,
      paidUsdc: decimal6,
      savedUsdc: decimal6,
      paidOfFaceBps: z.number().int().nullable(),
    }),
    today: z.object({
      day: z.string(),
      clears: z.number().int(),
      burnDiem: decimal6,
      grossUsdc: decimal6,
      averageClearingPriceCents: z.number().nullable(),
      byModality: z.record(modalityDay),
    }),
  })
  .openapi("MarketStats");

/** GraphQL `recentClears(limit:)`: the public feed's seed, 1-100 clears (20 by default). */
export const MAX_RECENT_CLEARS = 100;
export const DEFAULT_RECENT_CLEARS = 20;
export const recentClearsArgs = z.object({
  limit: boundedInt("limit", 1, MAX_RECENT_CLEARS, DEFAULT_RECENT_CLEARS),
});
