import { describe, expect, it } from "vitest";
import type { CatalogModelRow } from "../../../src/domain/catalog/catalog-types.js";
import { publishedFields } from "../../../src/domain/catalog/catalog-visibility.js";
import { presentModel } from "../../../src/http/present.js";

// The catalog visibility rule, once: pricing only on live rows, constraints only on image and video
// rows. The REST row (and GraphQL's resolvers, MCP's list) show exactly what the rule lets through.

const PRICING = { input_per_million: 1 };
const CONSTRAINTS = { resolutions: ["1024x1024"] };

function row(status: CatalogModelRow["status"], modality: CatalogModelRow["modality"]): CatalogModelRow {
  return {
    id: "m",
    modality,
    status,
    name: "M",
    tier: "frontier",
    beta: false,
    offline: false,
    capabilities: {},
    pricing: PRICING,
    constraints: CONSTRAINTS,
    inputMicroPerM: null,
    outputMicroPerM: null,
    cacheMicroPerM: null,
    cacheWriteMicroPerM: null,
    extendedPricing: null,
    contextTokens: null,
    maxCompletionTokens: null,
    created: null,
    regionRestrictions: null,
    syncedAt: new Date(0),
  } as CatalogModelRow;
}

describe("the catalog visibility rule", () => {
  it.each([
    {
      label: "live text: pricing, no constraints",
      status: "live",
      modality: "text",
      pricing: true,
      constraints: false,
    },
    { label: "live image: both", status: "live", modality: "image", pricing: true, constraints: true },
    { label: "live video: both", status: "live", modality: "video", pricing: true, constraints: true },
    { label: "coming_soon text: neither", status: "coming_soon", modality: "text", pricing: false, constraints: false },
    {
      label: "coming_soon image: constraints only",
      status: "coming_soon",
      modality: "image",
      pricing: false,
      constraints: true,
    },
    {
      label: "coming_soon video: constraints only",
      status: "coming_soon",
      modality: "video",
      pricing: false,
      constraints: true,
    },
  ] as const)("$label", ({ status, modality, pricing, constraints }) => {
    const r = row(status, modality);
    expect(publishedFields(r)).toEqual({
      pricing: pricing ? PRICING : null,
      constraints: constraints ? CONSTRAINTS : null,
    });
    const shown = presentModel(r);
    expect("pricing" in shown).toBe(pricing);
    expect("constraints" in shown).toBe(constraints);
  });
});
