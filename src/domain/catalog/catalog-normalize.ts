import type { UpstreamModel } from "../../adapters/upstream/client.js";
import { MoneyError, upstreamDecimalToMicro } from "../../lib/money.js";
import type {
  CatalogModality,
  CatalogModelRow,
  CatalogStatus,
  ExtendedRatesMicro,
  JsonObject,
  ModelTier,
  VideoModelType,
} from "./catalog-types.js";
import { publishedFields, showsPricing } from "./catalog-visibility.js";

/**
 * Pure translation of one upstream `GET /models` row (VENICE_API §2) into a catalog row.
 * The rules (docs/decisions.md "Catalog and model statistics"):
 *   - text is live when input and output prices and both token caps are published;
 *   - image is live when a flat price, or a price for every offered resolution (× quality when the
 *     model accepts `quality`) is published;
 *   - video is live when its constraints carry `durations` and a `model_type` we can map to our four
 *     values (prices come from the upstream quote at queue time);
 *   - `offline` and access-restricted `beta` rows are listed as `coming_soon`, never live.
 * Prices are read from the `diem` figure (`usd` when `diem` is missing; 1 DIEM = 1 USD) and
 * converted once from their decimal text to integer micro-units.
 */

/** Below this output rate (micro-DIEM per 1M tokens, i.e. 1 DIEM) a text model is `small`. */
export const SMALL_TIER_OUTPUT_BELOW_MICRO_PER_M = 1_000_000n;
/** A text model whose slug declares at most this many billion parameters (`…-4b`, `…-3b`) is `small`. */
export const SMALL_TIER_MAX_BILLION_PARAMS = 10;
/** Explicit tier assignments; they win over the heuristic (empty: configurable later). */
export const TIER_OVERRIDES: Readonly<Record<string, ModelTier>> = {};

/** The public video pricing object: video is priced per job from the upstream quote. */
export const VIDEO_PUBLIC_PRICING = { type: "per_job_quote", quote_endpoint: "/v1/video/quote" } as const;

/** A catalog row as the sync computes it, before it is stored (no `created`/`syncedAt` yet). */
export type NormalizedModel = Omit<CatalogModelRow, "created" | "syncedAt"> & {
  /** why a row is not live (logs and tests; not published) */
  notLiveReasons: string[];
  upstreamRow: JsonObject;
};

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function objectOr(v: unknown): JsonObject | undefined {
  return isObject(v) ? v : undefined;
}

function positiveInt(v: unknown): number | null {
  return typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? v : null;
}

function stringList(v: unknown): string[] | null {
  return Array.isArray(v) && v.every((s) => typeof s === "string") ? (v as string[]) : null;
}

type Price = { kind: "absent" } | { kind: "invalid" } | { kind: "ok"; micro: bigint };

/** A published `{usd, diem}` unit as integer micro-DIEM (diem, else usd). Negative or non-numeric → invalid. */
export function priceOf(unit: unknown): Price {
  if (unit === undefined || unit === null) return { kind: "absent" };
  if (!isObject(unit)) return { kind: "invalid" };
  const raw = unit.diem ?? unit.usd;
  if (typeof raw !== "number" && typeof raw !== "string") return { kind: "invalid" };
  try {
    const micro = upstreamDecimalToMicro(raw);
    return micro < 0n ? { kind: "invalid" } : { kind: "ok", micro };
  } catch (e) {
    if (e instanceof MoneyError) return { kind: "invalid" };
    throw e;
  }
}

/** JSON number for a public micro-unit amount (integers far below 2^53). */
function publicInt(micro: bigint): number {
  const n = Number(micro);
  if (!Number.isSafeInteger(n)) throw new MoneyError(`price ${micro} does not fit a JSON integer`);
  return n;
}

/**
 * Documented tier heuristic: an explicit override wins; image and video rows are `frontier`;
 * a text row is `small` when its output rate is below 1 DIEM per 1M tokens or its slug declares
 * at most 10B parameters; everything else is `frontier` (the promoted tier, SPEC 11).
 */
export function tierOf(id: string, modality: CatalogModality, outputMicroPerM: bigint | null): ModelTier {
  const override = TIER_OVERRIDES[id];
  if (override) return override;
  if (modality !== "text") return "frontier";
  if (outputMicroPerM !== null && outputMicroPerM < SMALL_TIER_OUTPUT_BELOW_MICRO_PER_M) return "small";
  const params = /(?:^|[-_.])(\d+(?:\.\d+)?)b(?:$|[-_.])/i.exec(id);
  if (params?.[1] && Number(params[1]) <= SMALL_TIER_MAX_BILLION_PARAMS) return "small";
  return "frontier";
}

/**
 * Our four-value `model_type` from the upstream's three (VENICE_API §2): a slug containing
 * `reference-to-video` is `reference-to-video`; upstream `video` with `video_input: true` is
 * `video-to-video`; `text-to-video` and `image-to-video` map to themselves. Anything else → null.
 */
export function deriveVideoModelType(id: string, upstreamType: unknown, videoInput: unknown): VideoModelType | null {
  if (typeof upstreamType !== "string") return null;
  if (id.toLowerCase().includes("reference-to-video")) return "reference-to-video";
  switch (upstreamType) {
    case "text-to-video":
    case "image-to-video":
    case "reference-to-video":
    case "video-to-video":
      return upstreamType;
    case "video":
      return videoInput === true ? "video-to-video" : null;
    default:
      return null;
  }
}

interface Common {
  id: string;
  spec: JsonObject;
  offline: boolean;
  betaRestricted: boolean;
  reasons: string[];
}

function commonOf(row: UpstreamModel): Common {
  const spec = objectOr(row.model_spec) ?? {};
  const offline = spec.offline === true;
  const betaRestricted = spec.beta === true;
  const reasons: string[] = [];
  if (offline) reasons.push("offline upstream");
  if (betaRestricted) reasons.push("restricted to upstream beta users");
  return { id: row.id, spec, offline, betaRestricted, reasons };
}

/**
 * The row's `model_spec.regionRestrictions` (country codes the upstream serves it in), as published;
 * null when absent or not a list of strings. Read at sync and from the stored upstream row.
 */
export function regionRestrictionsOf(row: unknown): string[] | null {
  return stringList(objectOr(objectOr(row)?.model_spec)?.regionRestrictions);
}

/** One upstream row of the list `modality` → the catalog row it becomes. */
export function normalizeUpstreamModel(row: UpstreamModel, modality: CatalogModality): NormalizedModel {
  switch (modality) {
    case "text":
      return normalizeText(row);
    case "image":
      return normalizeImage(row);
    case "video":
      return normalizeVideo(row);
  }
}

function base(row: UpstreamModel, c: Common, modality: CatalogModality) {
  return {
    id: c.id,
    modality,
    name: typeof c.spec.name === "string" && c.spec.name.length > 0 ? c.spec.name : c.id,
    offline: c.offline,
    beta: c.betaRestricted || c.spec.betaModel === true,
    regionRestrictions: regionRestrictionsOf(row),
    notLiveReasons: c.reasons,
    upstreamRow: row as JsonObject,
  };
}

function statusOf(reasons: string[]): CatalogStatus {
  return reasons.length === 0 ? "live" : "coming_soon";
}

function normalizeText(row: UpstreamModel): NormalizedModel {
  const c = commonOf(row);
  const pricing = objectOr(c.spec.pricing);
  const input = priceOf(pricing?.input);
  const output = priceOf(pricing?.output);
  const cache = priceOf(pricing?.cache_input);
  const cacheWrite = priceOf(pricing?.cache_write);
  const reasons = c.reasons;
  if (!pricing) reasons.push("no published pricing");
  else {
    if (input.kind !== "ok" || input.micro === 0n) reasons.push("no usable input price");
    if (output.kind !== "ok" || output.micro === 0n) reasons.push("no usable output price");
    if (cache.kind === "invalid") reasons.push("unreadable cache price");
    if (cacheWrite.kind === "invalid") reasons.push("unreadable cache write price");
  }
  let extended: ExtendedRatesMicro | null = null;
  if (pricing?.extended !== undefined) {
    const ext = objectOr(pricing.extended);
    const threshold = positiveInt(ext?.context_token_threshold);
    const eIn = priceOf(ext?.input);
    const eOut = priceOf(ext?.output);
    const eCache = priceOf(ext?.cache_input);
    const eWrite = priceOf(ext?.cache_write);
    if (
      threshold &&
      eIn.kind === "ok" &&
      eOut.kind === "ok" &&
      eCache.kind !== "invalid" &&
      eWrite.kind !== "invalid"
    ) {
      extended = {
        thresholdTokens: threshold,
        inputMicroPerM: eIn.micro,
        outputMicroPerM: eOut.micro,
        cacheMicroPerM: eCache.kind === "ok" ? eCache.micro : null,
        cacheWriteMicroPerM: eWrite.kind === "ok" ? eWrite.micro : null,
      };
    } else reasons.push("unreadable extended pricing tier");
  }
  const maxCompletionTokens = positiveInt(c.spec.maxCompletionTokens);
  const contextTokens = positiveInt(c.spec.availableContextTokens) ?? positiveInt(row.context_length);
  if (maxCompletionTokens === null) reasons.push("no maxCompletionTokens");
  if (contextTokens === null) reasons.push("no availableContextTokens");

  const inputMicro = input.kind === "ok" ? input.micro : null;
  const outputMicro = output.kind === "ok" ? output.micro : null;
  const cacheMicro = cache.kind === "ok" ? cache.micro : null;
  const cacheWriteMicro = cacheWrite.kind === "ok" ? cacheWrite.micro : null;
  const status = statusOf(reasons);
  let publicPricing: JsonObject | null = null;
  if (showsPricing({ status }) && inputMicro !== null && outputMicro !== null) {
    // micro-USDC per 1M tokens at face value (1 DIEM = 1 USD); cache reads and cache writes bill at
    // the input rate when no cache price is published, so that is the rate shown.
    publicPricing = {
      input_per_million: publicInt(inputMicro),
      output_per_million: publicInt(outputMicro),
      cache_per_million: publicInt(cacheMicro ?? inputMicro),
      cache_write_per_million: publicInt(cacheWriteMicro ?? inputMicro),
      ...(extended
        ? {
            extended: {
              context_token_threshold: extended.thresholdTokens,
              input_per_million: publicInt(extended.inputMicroPerM),
              output_per_million: publicInt(extended.outputMicroPerM),
              cache_per_million: publicInt(extended.cacheMicroPerM ?? extended.inputMicroPerM),
              cache_write_per_million: publicInt(extended.cacheWriteMicroPerM ?? extended.inputMicroPerM),
            },
          }
        : {}),
    };
  }
  return {
    ...base(row, c, "text"),
    status,
    tier: tierOf(c.id, "text", outputMicro),
    capabilities: objectOr(c.spec.capabilities) ?? {},
    ...publishedFields({ status, modality: "text", pricing: publicPricing, constraints: null }),
    inputMicroPerM: inputMicro,
    outputMicroPerM: outputMicro,
    cacheMicroPerM: cacheMicro,
    cacheWriteMicroPerM: cacheWriteMicro,
    extendedPricing: extended,
    contextTokens,
    maxCompletionTokens,
  };
}

/** `{key: {usd, diem}}` → `{key: micro}`; null when absent; "invalid" when any entry is unreadable. */
function priceMap(v: unknown): Record<string, bigint> | null | "invalid" {
  if (v === undefined || v === null) return null;
  if (!isObject(v)) return "invalid";
  const out: Record<string, bigint> = {};
  for (const [k, unit] of Object.entries(v)) {
    const p = priceOf(unit);
    if (p.kind !== "ok") return "invalid";
    out[k] = p.micro;
  }
  return out;
}

function priceMatrix(v: unknown): Record<string, Record<string, bigint>> | null | "invalid" {
  if (v === undefined || v === null) return null;
  if (!isObject(v)) return "invalid";
  const out: Record<string, Record<string, bigint>> = {};
  for (const [k, inner] of Object.entries(v)) {
    const m = priceMap(inner);
    if (m === null || m === "invalid") return "invalid";
    out[k] = m;
  }
  return out;
}

const IMAGE_CAPABILITY_KEYS = ["supportsStyleReferences", "supportsOptimizePromptThinking"] as const;

function mapValues<T, R>(o: Record<string, T>, f: (v: T) => R): Record<string, R> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));
}

function normalizeImage(row: UpstreamModel): NormalizedModel {
  const c = commonOf(row);
  const pricing = objectOr(c.spec.pricing);
  const constraints = objectOr(c.spec.constraints);
  const reasons = c.reasons;
  const generation = priceOf(pricing?.generation);
  const byResolution = priceMap(pricing?.resolutions);
  const byQuality = priceMatrix(pricing?.quality);
  const offeredResolutions = stringList(constraints?.resolutions);
  const offeredQualities = stringList(constraints?.qualities);
  const defaultResolution = typeof constraints?.defaultResolution === "string" ? constraints.defaultResolution : null;
  const defaultQuality = typeof constraints?.defaultQuality === "string" ? constraints.defaultQuality : null;

  let publicPricing: JsonObject | null = null;
  if (!pricing) reasons.push("no published pricing");
  else if (generation.kind === "ok" && generation.micro > 0n) {
    publicPricing = { per_image: publicInt(generation.micro) };
  } else if (offeredQualities && offeredQualities.length > 0) {
    // quality models are priced from the resolution × quality matrix (VENICE_API §5)
    const matrix = byQuality === "invalid" ? null : byQuality;
    const resolutions = offeredResolutions ?? (matrix ? Object.keys(matrix) : []);
    const complete =
      matrix !== null &&
      resolutions.length > 0 &&
      resolutions.every((r) => offeredQualities.every((q) => (matrix[r]?.[q] ?? 0n) > 0n));
    if (!complete || matrix === null) reasons.push("incomplete quality pricing");
    else
      publicPricing = {
        per_image_by_quality: mapValues(matrix, (m) => mapValues(m, publicInt)),
        ...(defaultResolution ? { default_resolution: defaultResolution } : {}),
        ...(defaultQuality ? { default_quality: defaultQuality } : {}),
      };
  } else {
    const table = byResolution === "invalid" ? null : byResolution;
    const resolutions = offeredResolutions ?? (table ? Object.keys(table) : []);
    const complete = table !== null && resolutions.length > 0 && resolutions.every((r) => (table[r] ?? 0n) > 0n);
    if (!complete || table === null) reasons.push("incomplete image pricing");
    else
      publicPricing = {
        per_image_by_resolution: mapValues(table, publicInt),
        ...(defaultResolution ? { default_resolution: defaultResolution } : {}),
      };
  }
  const status = statusOf(reasons);
  // `supportsWebSearch` is deliberately not carried over: the service refuses image web search (SPEC 12)
  const capabilities: JsonObject = {};
  for (const k of IMAGE_CAPABILITY_KEYS) if (c.spec[k] !== undefined) capabilities[k] = c.spec[k];
  return {
    ...base(row, c, "image"),
    status,
    tier: tierOf(c.id, "image", null),
    capabilities,
    // constraints in camelCase keys exactly as published: a key the upstream omits must not be sent
    ...publishedFields({ status, modality: "image", pricing: publicPricing, constraints: constraints ?? null }),
    inputMicroPerM: null,
    outputMicroPerM: null,
    cacheMicroPerM: null,
    cacheWriteMicroPerM: null,
    extendedPricing: null,
    contextTokens: null,
    maxCompletionTokens: null,
  };
}

function normalizeVideo(row: UpstreamModel): NormalizedModel {
  const c = commonOf(row);
  const published = objectOr(c.spec.constraints);
  const reasons = c.reasons;
  const modelType = deriveVideoModelType(c.id, published?.model_type, published?.video_input);
  const durations = stringList(published?.durations);
  if (!published) reasons.push("no published constraints");
  else {
    if (!durations || durations.length === 0) reasons.push("no durations");
    if (!modelType) reasons.push("model_type cannot be mapped");
  }
  // snake_case keys exactly as published, with `model_type` replaced by our derived value
  // (dropped when it cannot be mapped: we never publish a value outside our four)
  const constraints = published
    ? Object.fromEntries(
        Object.entries(published).flatMap(([k, v]): [string, unknown][] =>
          k === "model_type" ? (modelType ? [[k, modelType]] : []) : [[k, v]],
        ),
      )
    : null;
  const status = statusOf(reasons);
  return {
    ...base(row, c, "video"),
    status,
    tier: tierOf(c.id, "video", null),
    capabilities: {},
    ...publishedFields({ status, modality: "video", pricing: { ...VIDEO_PUBLIC_PRICING }, constraints }),
    inputMicroPerM: null,
    outputMicroPerM: null,
    cacheMicroPerM: null,
    cacheWriteMicroPerM: null,
    extendedPricing: null,
    contextTokens: null,
    maxCompletionTokens: null,
  };
}
