import { Router } from "express";
import { capacityQuery } from "../../contract/catalog.js";
import type { Capacity, MarketLadder, MarketStats, PriceLevel } from "../../domain/market/market-types.js";
import { formatDecimal6 } from "../../lib/money.js";
import type { Runtime } from "../../runtime.js";
import { parse } from "../validate.js";

const dec = formatDecimal6;

function level(p: PriceLevel) {
  return {
    priceCentsPerDollar: p.priceCentsPerDollar,
    routableDiem: dec(p.routableMicroDiem),
    usdcToBuyAll: dec(p.usdcToBuyAllMicro),
  };
}

function ladder(l: MarketLadder) {
  return {
    routableDiem: dec(l.routableMicroDiem),
    usdcToBuyAll: dec(l.usdcToBuyAllMicro),
    cheapestPostedCents: l.cheapestPostedCents,
    prices: l.prices.map(level),
  };
}

export function presentCapacity(c: Capacity) {
  return { generatedAt: c.generatedAt.toISOString(), ...ladder(c), modalities: c.modalities };
}

export function presentMarketStats(s: MarketStats) {
  return {
    generatedAt: s.generatedAt.toISOString(),
    corridor: { minCents: s.corridor.minCents, maxCents: s.corridor.maxCents, ...ladder(s.corridor) },
    savings: {
      clears: s.savings.clears,
      faceValueUsdc: dec(s.savings.faceMicroUsdc),
      paidUsdc: dec(s.savings.paidMicroUsdc),
      savedUsdc: dec(s.savings.savedMicroUsdc),
      paidOfFaceBps: s.savings.paidOfFaceBps,
    },
    today: {
      day: s.today.day,
      clears: s.today.clears,
      burnDiem: dec(s.today.burnMicroDiem),
      grossUsdc: dec(s.today.grossMicroUsdc),
      averageClearingPriceCents: s.today.averageClearingPriceCents,
      byModality: Object.fromEntries(
        Object.entries(s.today.byModality).map(([m, d]) => [
          m,
          { clears: d.clears, burnDiem: dec(d.burnMicroDiem), grossUsdc: dec(d.grossMicroUsdc) },
        ]),
      ),
    },
  };
}

/** Public market data (SPEC "Public"): capacity, pool summary, market statistics. No identities. */
export function marketRoutes(rt: Runtime): Router {
  const r = Router();
  const { market } = rt.services;

  r.get("/v1/capacity", async (req, res) => {
    const { maxPriceCents } = parse(capacityQuery, req.query);
    res.json(presentCapacity(await market.capacity(maxPriceCents)));
  });

  r.get("/v1/supply/pool/summary", async (_req, res) => {
    const l = await market.getLadder();
    res.json({ generatedAt: l.generatedAt.toISOString(), prices: l.prices.map(level) });
  });

  r.get("/v1/market/stats", async (_req, res) => {
    res.json(presentMarketStats(await market.stats()));
  });
  return r;
}
