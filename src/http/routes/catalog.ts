import { Router } from "express";
import { modelIdParam, modelStatsQuery } from "../../contract/catalog.js";
import type { CatalogModelRow, ModelStats } from "../../domain/catalog/catalog-types.js";
import type { Runtime } from "../../runtime.js";
import { parse } from "../validate.js";

/**
 * The public catalog row (SPEC "Catalog model row"): `pricing` only on live rows, `constraints`
 * only on image and video rows and exactly as published; `id` is always the bare slug.
 */
export function presentModel(row: CatalogModelRow) {
  return {
    id: row.id,
    object: "model" as const,
    status: row.status,
    modality: row.modality,
    capabilities: row.capabilities,
    ...(row.status === "live" && row.pricing ? { pricing: row.pricing } : {}),
    ...(row.modality !== "text" && row.constraints ? { constraints: row.constraints } : {}),
    name: row.name,
    tier: row.tier,
    ...(row.created !== null ? { created: row.created } : {}),
    ...(row.regionRestrictions !== null ? { regionRestrictions: row.regionRestrictions } : {}),
  };
}

export function presentModelStats(s: ModelStats) {
  return {
    window: s.window,
    generatedAt: s.generatedAt.toISOString(),
    hasSufficientVolume: s.hasSufficientVolume,
    models: s.models.map((m) => ({
      id: m.id,
      modality: m.modality,
      rank: m.rank,
      usageShare: m.usageShare,
      daily: m.daily.map((d) => ({ day: d.day, share: d.share })),
    })),
  };
}

/** SPEC "Public": the catalog and model statistics. No credential needed. */
export function catalogRoutes(rt: Runtime): Router {
  const r = Router();
  const { catalog } = rt.services;

  r.get("/v1/models", async (_req, res) => {
    const rows = await catalog.listModels();
    res.json({ object: "list", data: rows.map(presentModel) });
  });

  // registered before `/v1/models/:id` so `stats` is never read as a model id
  r.get("/v1/models/stats", async (req, res) => {
    const { window } = parse(modelStatsQuery, req.query);
    res.json(presentModelStats(await catalog.modelStats(window)));
  });

  // `svc/<slug>` arrives as two path segments unless the slash is percent-encoded
  r.get("/v1/models/svc/:id", async (req, res) => {
    res.json(presentModel(await catalog.getModel(parse(modelIdParam, req.params).id)));
  });

  r.get("/v1/models/:id", async (req, res) => {
    res.json(presentModel(await catalog.getModel(parse(modelIdParam, req.params).id)));
  });
  return r;
}
