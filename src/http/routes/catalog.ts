import { Router } from "express";
import { modelIdParam, modelStatsQuery } from "../../contract/catalog.js";
import type { Runtime } from "../../runtime.js";
import { presentModel, presentModelStats } from "../present.js";
import { parse } from "../validate.js";

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
