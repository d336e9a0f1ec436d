import type { MicroDiem, MicroUsdc } from "../../lib/money.js";

/** One price level of the routable ladder (no supplier identity, ever). */
export interface PriceLevel {
  priceCentsPerDollar: number;
  routableMicroDiem: MicroDiem;
  /** cost of clearing this whole level at its price */
  usdcToBuyAllMicro: MicroUsdc;
}

export interface MarketLadder {
  generatedAt: Date;
  /** levels at or below the ceiling, cheapest first */
  prices: PriceLevel[];
  routableMicroDiem: MicroDiem;
  usdcToBuyAllMicro: MicroUsdc;
  cheapestPostedCents: number | null;
}

export interface ModalityAvailability {
  available: boolean;
  liveModels: number;
}

/** SPEC "Capacity". */
export interface Capacity extends MarketLadder {
  modalities: { text: ModalityAvailability; image: ModalityAvailability; video: ModalityAvailability };
}

export interface MarketStats {
  generatedAt: Date;
  corridor: MarketLadder & { minCents: number; maxCents: number };
  savings: {
    clears: number;
    faceMicroUsdc: MicroUsdc;
    paidMicroUsdc: MicroUsdc;
    savedMicroUsdc: MicroUsdc;
    /** paid ÷ face in basis points (e.g. 4500 = paid 45% of face); null without clears */
    paidOfFaceBps: number | null;
  };
  today: {
    day: string;
    clears: number;
    burnMicroDiem: MicroDiem;
    grossMicroUsdc: MicroUsdc;
    /** burn-weighted average clearing price, cents, rounded down; null without clears */
    averageClearingPriceCents: number | null;
    /** the same day's clears by modality (text, image, video) */
    byModality: Record<"text" | "image" | "video", ModalityDay>;
  };
}

export interface ModalityDay {
  clears: number;
  burnMicroDiem: MicroDiem;
  grossMicroUsdc: MicroUsdc;
}
