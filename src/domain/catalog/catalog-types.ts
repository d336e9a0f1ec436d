import { DEFAULT_STATS_WINDOW as CONTRACT_DEFAULT_STATS_WINDOW, STATS_WINDOW_VALUES } from "../../contract/catalog.js";

/** Catalog rows and model statistics (SPEC "Catalog model row", "Model statistics"). */

export type CatalogModality = "text" | "image" | "video";
export type CatalogStatus = "live" | "coming_soon";
export type ModelTier = "frontier" | "small";

/** Our four-value video `model_type` (SPEC "Catalog model row"), derived from the upstream's three. */
export type VideoModelType = "text-to-video" | "image-to-video" | "reference-to-video" | "video-to-video";

export type JsonObject = Record<string, unknown>;

/** Token rates of one tier in micro-DIEM per 1M tokens (integers), as metering uses them. */
export interface TokenRatesMicro {
  inputMicroPerM: bigint;
  outputMicroPerM: bigint;
  /** cache-read rate; null when the upstream publishes none (cached tokens bill at the input rate) */
  cacheMicroPerM: bigint | null;
  /** cache-write rate (`cache_write`); null when the upstream publishes none (cache writes bill at the input rate) */
  cacheWriteMicroPerM: bigint | null;
}

/** The long-context tier: above `thresholdTokens` prompt tokens its rates apply to the whole request. */
export interface ExtendedRatesMicro extends TokenRatesMicro {
  thresholdTokens: number;
}

/** Image prices in micro-DIEM per image (integers): flat, or by resolution, or by resolution × quality. */
export interface ImagePricingMicro {
  /** flat price per image (`pricing.generation`); when set it applies whatever the resolution */
  perImageMicro: bigint | null;
  /** `pricing.resolutions` */
  byResolutionMicro: Record<string, bigint> | null;
  /** `pricing.quality[resolution][quality]` for models that accept `quality` */
  byQualityMicro: Record<string, Record<string, bigint>> | null;
  defaultResolution: string | null;
  defaultQuality: string | null;
}

/**
 * One catalog row as the service reads it. `pricing` and `constraints` are the public objects
 * (computed at sync); the integer rates are what metering uses (never the public numbers).
 */
export interface CatalogModelRow {
  /** bare upstream slug: the `model` value in inference */
  id: string;
  modality: CatalogModality;
  status: CatalogStatus;
  name: string;
  tier: ModelTier;
  /** upstream `betaModel` (callable, unstable) or `beta` (access-restricted) */
  beta: boolean;
  offline: boolean;
  capabilities: JsonObject;
  /** public pricing object; present only on live rows */
  pricing: JsonObject | null;
  /** public constraints (image and video rows only), exactly the published keys */
  constraints: JsonObject | null;
  inputMicroPerM: bigint | null;
  outputMicroPerM: bigint | null;
  cacheMicroPerM: bigint | null;
  cacheWriteMicroPerM: bigint | null;
  extendedPricing: ExtendedRatesMicro | null;
  contextTokens: number | null;
  maxCompletionTokens: number | null;
  /** upstream `created` (unix seconds), when published */
  created: number | null;
  /**
   * upstream `model_spec.regionRestrictions`: the country codes the upstream serves the model in
   * (elsewhere it refuses it, 403); null when the row publishes none
   */
  regionRestrictions: string[] | null;
  syncedAt: Date;
}

export interface CatalogSyncResult {
  /** rows written (created or refreshed) from the upstream's lists */
  upserted: number;
  /** rows that disappeared from the upstream in this sync and were hidden */
  unlisted: number;
  live: number;
  comingSoon: number;
}

/** SPEC "Limits": the stats windows (the contract's, src/contract/catalog.ts). */
export const STATS_WINDOWS = STATS_WINDOW_VALUES;
export type StatsWindow = (typeof STATS_WINDOWS)[number];
export const DEFAULT_STATS_WINDOW: StatsWindow = CONTRACT_DEFAULT_STATS_WINDOW;

export interface ModelDailyShare {
  /** UTC day, `YYYY-MM-DD` */
  day: string;
  /** this model's fraction of that day's total burn (4 decimals) */
  share: number;
}

export interface ModelUsage {
  /** bare model slug */
  id: string;
  modality: CatalogModality;
  /** 1 = most used by burn */
  rank: number;
  /** fraction of the window's total burn (4 decimals) */
  usageShare: number;
  daily: ModelDailyShare[];
}

/** Public model statistics. Never carries counts, tokens, wallets, keys or request ids. */
export interface ModelStats {
  window: StatsWindow;
  generatedAt: Date;
  hasSufficientVolume: boolean;
  models: ModelUsage[];
}
