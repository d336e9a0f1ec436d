import type { Clock } from "../../../lib/clock.js";
import { DomainError } from "../../../lib/errors.js";
import { imagePricingOf, textPricingOf } from "../../catalog/catalog-pricing.js";
import type { CatalogService } from "../../catalog/catalog-service.js";
import { type Modality, ROUTE_LABEL, type RoutableModel, type RouteKind } from "./session.js";

/** Catalog rows change on sync (minutes); the hot path reads them from memory for this long. */
const CACHE_MS = 5_000;

/**
 * The router's view of a catalog row (the catalog is the one source of truth): integer text rates
 * or per-image prices for metering, and the row's constraints. Unknown, disabled or unlisted → 404 `model_not_found` (from the catalog).
 */
export function createModelResolver(
  catalog: Pick<CatalogService, "getModel">,
  clock: Clock,
): (id: string) => Promise<RoutableModel> {
  const cache = new Map<string, { at: number; row: RoutableModel }>();
  return async (id: string) => {
    const hit = cache.get(id);
    if (hit && clock.now().getTime() - hit.at < CACHE_MS) return hit.row;
    const m = await catalog.getModel(id);
    const row: RoutableModel = {
      id: m.id,
      modality: m.modality,
      status: m.status,
      tier: m.tier,
      pricing:
        m.modality === "text" && m.status === "live"
          ? textPricingOf(m)
          : { inputMicroPerM: 0n, outputMicroPerM: 0n, cacheMicroPerM: null, extended: null },
      imagePricing: m.modality === "image" && m.status === "live" ? imagePricingOf(m) : null,
      constraints: m.constraints,
      maxCompletionTokens: m.maxCompletionTokens,
    };
    cache.set(id, { at: clock.now().getTime(), row });
    return row;
  };
}

/**
 * The catalog row as a route may call it: another modality's model → 400 `unsupported_modality`;
 * listed but not live → 400 `model_not_live` (unknown is the resolver's 404).
 */
export function callableBy(model: RoutableModel, modality: Modality, route: RouteKind): RoutableModel {
  if (model.modality !== modality) {
    throw new DomainError(
      "unsupported_modality",
      `${model.id} is a ${model.modality} model; it cannot be called through ${ROUTE_LABEL[route]}.`,
    );
  }
  if (model.status !== "live") {
    throw new DomainError(
      "model_not_live",
      `${model.id} is listed but not live yet (coming_soon); pick a live model from /v1/models.`,
    );
  }
  return model;
}
