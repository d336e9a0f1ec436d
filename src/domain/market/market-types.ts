import type { MicroDiem, MicroUsdc } from "../../lib/money.js";

/** One price level of the routable ladder (no supplier identity, ever). */
export interface PriceLevel {
  priceCentsPerDollar: number;
  routableMicroDiem: MicroDiem;
  /** cost of clearing this whole level at its price */
  usdcToBuyAllMicro: MicroUsdc;
  offers: number;
}

export interface MarketLadder {
  generatedAt: Date;
  /** levels at or below the ceiling, cheapest first */
  prices: PriceLevel[];
  routableMicroDiem: MicroDiem;
  usdcToBuyAllMicro: MicroUsdc;
  cheapestPostedCents: number | null;
}
