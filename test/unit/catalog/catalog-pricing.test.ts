import { describe, expect, test } from "vitest";
import { imagePricingOf, imageUnitPriceMicro, textPricingOf } from "../../../src/domain/catalog/catalog-pricing.js";
import type { CatalogModelRow } from "../../../src/domain/catalog/catalog-types.js";
import { burnMicroDiem } from "../../../src/lib/money.js";

function row(overrides: Partial<CatalogModelRow>): CatalogModelRow {
  return {
    id: "m",
    modality: "text",
    status: "live",
    name: "M",
    tier: "frontier",
    beta: false,
    offline: false,
    capabilities: {},
    pricing: null,
    constraints: null,
    inputMicroPerM: 1_540_000n,
    outputMicroPerM: 4_840_000n,
    cacheMicroPerM: 286_000n,
    cacheWriteMicroPerM: null,
    extendedPricing: null,
    contextTokens: 200_000,
    maxCompletionTokens: 24_000,
    created: null,
    regionRestrictions: null,
    syncedAt: new Date(0),
    ...overrides,
  };
}

describe("textPricingOf", () => {
  test("feeds burnMicroDiem with the integer rates", () => {
    const pricing = textPricingOf(row({}));
    expect(pricing).toEqual({
      inputMicroPerM: 1_540_000n,
      outputMicroPerM: 4_840_000n,
      cacheMicroPerM: 286_000n,
      cacheWriteMicroPerM: null,
      extended: null,
    });
    // (900 × 1.54 + 100 × 0.286 + 50 × 4.84) DIEM/M = 1656.6 micro-DIEM → 1657 (rounded up)
    expect(burnMicroDiem(pricing, { promptTokens: 1000, completionTokens: 50, cachedTokens: 100 })).toBe(1657n);
    // no cache-write rate published: cache writes bill at the input rate
    expect(
      burnMicroDiem(pricing, { promptTokens: 1000, completionTokens: 50, cachedTokens: 100, cacheWriteTokens: 300 }),
    ).toBe(1657n);
  });

  test("prices cache writes at the row's cache-write rate", () => {
    const pricing = textPricingOf(row({ cacheWriteMicroPerM: 1_925_000n }));
    expect(pricing.cacheWriteMicroPerM).toBe(1_925_000n);
    // (600 × 1.54 + 100 × 0.286 + 300 × 1.925 + 50 × 4.84) DIEM/M = 1772.1 micro-DIEM → 1773
    expect(
      burnMicroDiem(pricing, { promptTokens: 1000, completionTokens: 50, cachedTokens: 100, cacheWriteTokens: 300 }),
    ).toBe(1773n);
  });

  test("carries the extended tier", () => {
    const ext = {
      thresholdTokens: 10,
      inputMicroPerM: 2n,
      outputMicroPerM: 3n,
      cacheMicroPerM: null,
      cacheWriteMicroPerM: 4n,
    };
    expect(textPricingOf(row({ extendedPricing: ext })).extended).toEqual(ext);
  });

  test.each([
    ["coming_soon", { status: "coming_soon" as const }],
    ["image row", { modality: "image" as const }],
    ["no input rate", { inputMicroPerM: null }],
  ])("%s → model_not_live", (_label, o) => {
    expect(() => textPricingOf(row(o))).toThrow(expect.objectContaining({ code: "model_not_live" }));
  });
});

describe("image pricing", () => {
  const image = (pricing: Record<string, unknown>) => imagePricingOf(row({ modality: "image", pricing }));
  test.each([
    ["flat, any resolution", { per_image: 10_000 }, { resolution: "4K" }, 10_000n],
    [
      "by resolution, default",
      { per_image_by_resolution: { "1K": 180_000, "2K": 230_000 }, default_resolution: "1K" },
      {},
      180_000n,
    ],
    [
      "by resolution, chosen",
      { per_image_by_resolution: { "1K": 180_000, "2K": 230_000 }, default_resolution: "1K" },
      { resolution: "2K" },
      230_000n,
    ],
    ["by resolution, unknown", { per_image_by_resolution: { "1K": 180_000 } }, { resolution: "8K" }, null],
    [
      "quality, defaults",
      {
        per_image_by_quality: { "1K": { low: 20_000, high: 260_000 } },
        default_resolution: "1K",
        default_quality: "high",
      },
      {},
      260_000n,
    ],
    [
      "quality, chosen",
      {
        per_image_by_quality: { "1K": { low: 20_000, high: 260_000 } },
        default_resolution: "1K",
        default_quality: "high",
      },
      { quality: "low" },
      20_000n,
    ],
    ["quality, no default", { per_image_by_quality: { "1K": { low: 20_000 } } }, { resolution: "1K" }, null],
  ])("%s", (_label, pricing, choice, expected) => {
    expect(imageUnitPriceMicro(image(pricing), choice)).toBe(expected);
  });

  test("a text row has no image pricing", () => {
    expect(() => imagePricingOf(row({}))).toThrow(expect.objectContaining({ code: "model_not_live" }));
  });
});
