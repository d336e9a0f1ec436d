import { Router } from "express";
import { buildOpenApiDocument } from "../../contract/openapi.js";
import type { Runtime } from "../../runtime.js";

/**
 * `GET /openapi.json` (SPEC "Public", "Versioning" 2): OpenAPI 3.0, version 1.0.0, generated from
 * the API contract's zod schemas (src/contract) with this deployment's URLs and the network and
 * asset its paid routes settle in (`x-payment-info`); built once per app.
 */
export function openApiRoutes(rt: Runtime): Router {
  const r = Router();
  const { base, mcp, docs } = rt.config.urls;
  const { id: chainId, usdcAddress: asset } = rt.config.chain;
  const body = JSON.stringify(buildOpenApiDocument({ base, mcp, docs }, { chainId, asset }));
  // a public document without credentials: any origin may read it (a docs site on another host than
  // the API, DOCS_URL, loads it from the browser)
  r.get("/openapi.json", (_req, res) => {
    res.type("application/json").setHeader("Cache-Control", "public, max-age=300");
    res.setHeader("Access-Control-Allow-Origin", "*");
    res.send(body);
  });
  return r;
}
