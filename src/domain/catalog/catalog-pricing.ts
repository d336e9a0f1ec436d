import { DomainError } from "../../lib/errors.js";
import type { TextPricing } from "../../lib/money.js";
import type { CatalogModelRow, ImagePricingMicro, JsonObject } from "./catalog-types.js";

/**
 * Metering views of a catalog row, for the router. Rates are integer micro-DIEM (per 1M tokens
 * for text, per image for images); never derived from floats.
 */

/**
 * The text rates of a live text row in the shape `burnMicroDiem` (src/lib/money.ts) takes.
 * @throws model_not_live when the row is not a live text row with published rates
 */
export function textPricingOf(row: CatalogModelRow): TextPricing {
  if (row.modality !== "text" || row.status !== "live" || row.inputMicroPerM === null || row.outputMicroPerM === null) {
    throw new DomainError("model_not_live", `Model ${row.id} has no published text pricing.`);
  }
  const ext = row.extendedPricing;
  return {
    inputMicroPerM: row.inputMicroPerM,
    outputMicroPerM: row.outputMicroPerM,
    cacheMicroPerM: row.cacheMicroPerM,
    cacheWriteMicroPerM: row.cacheWriteMicroPerM,
    extended: ext
      ? {
          thresholdTokens: ext.thresholdTokens,
          inputMicroPerM: ext.inputMicroPerM,
          outputMicroPerM: ext.outputMicroPerM,
          cacheMicroPerM: ext.cacheMicroPerM,
          cacheWriteMicroPerM: ext.cacheWriteMicroPerM,
        }
      : null,
  };
}

function intMap(v: unknown): Record<string, bigint> | null {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return null;
  const out: Record<string, bigint> = {};
  for (const [k, n] of Object.entries(v)) {
    if (typeof n !== "number" || !Number.isSafeInteger(n)) return null;
    out[k] = BigInt(n);
  }
  return out;
}

/**
 * The per-image prices of a live image row. The public numbers are micro-USDC at face value,
 * which is the micro-DIEM price exactly (both come from the same published `diem` figure).
 * @throws model_not_live when the row is not a live image row with published pricing
 */
export function imagePricingOf(row: CatalogModelRow): ImagePricingMicro {
  const p: JsonObject | null = row.pricing;
  if (row.modality !== "image" || row.status !== "live" || !p) {
    throw new DomainError("model_not_live", `Model ${row.id} has no published image pricing.`);
  }
  const byQuality =
    typeof p.per_image_by_quality === "object" && p.per_image_by_quality !== null
      ? Object.fromEntries(
          Object.entries(p.per_image_by_quality).flatMap(([res, m]): [string, Record<string, bigint>][] => {
            const inner = intMap(m);
            return inner ? [[res, inner]] : [];
          }),
        )
      : null;
  return {
    perImageMicro: typeof p.per_image === "number" && Number.isSafeInteger(p.per_image) ? BigInt(p.per_image) : null,
    byResolutionMicro: intMap(p.per_image_by_resolution),
    byQualityMicro: byQuality,
    defaultResolution: typeof p.default_resolution === "string" ? p.default_resolution : null,
    defaultQuality: typeof p.default_quality === "string" ? p.default_quality : null,
  };
}

/**
 * micro-DIEM of one image at a resolution and quality (upstream defaults when omitted), following
 * VENICE_API §5: flat `generation`, else the quality matrix for quality models, else by resolution.
 * null when that combination has no published price (the caller answers 400).
 */
export function imageUnitPriceMicro(
  pricing: ImagePricingMicro,
  choice: { resolution?: string; quality?: string } = {},
): bigint | null {
  if (pricing.perImageMicro !== null) return pricing.perImageMicro;
  const resolution = choice.resolution ?? pricing.defaultResolution;
  if (resolution === null) return null;
  if (pricing.byQualityMicro) {
    const quality = choice.quality ?? pricing.defaultQuality;
    if (quality === null) return null;
    return pricing.byQualityMicro[resolution]?.[quality] ?? null;
  }
  return pricing.byResolutionMicro?.[resolution] ?? null;
}
