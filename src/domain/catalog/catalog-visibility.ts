import type { CatalogModality, CatalogModelRow, CatalogStatus, JsonObject } from "./catalog-types.js";

/**
 * THE catalog visibility rule (SPEC "Catalog model row"), once for the sync that stores a row and
 * every transport that shows one (REST `GET /v1/models`, GraphQL `CatalogModel`, MCP `list_models`):
 * `pricing` only on live rows; `constraints` only on image and video rows, exactly as published.
 */

/** A row shows its pricing only when it is live (callable). */
export function showsPricing(row: { status: CatalogStatus }): boolean {
  return row.status === "live";
}

/** A row shows its constraints only when it is an image or video row (text has none to publish). */
export function showsConstraints(row: { modality: CatalogModality }): boolean {
  return row.modality !== "text";
}

/** The row's `pricing` and `constraints` as shown: null where the rule hides them or none is published. */
export function publishedFields(row: Pick<CatalogModelRow, "status" | "modality" | "pricing" | "constraints">): {
  pricing: JsonObject | null;
  constraints: JsonObject | null;
} {
  return {
    pricing: showsPricing(row) ? row.pricing : null,
    constraints: showsConstraints(row) ? row.constraints : null,
  };
}
