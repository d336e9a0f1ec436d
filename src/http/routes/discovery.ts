import { Router } from "express";
import { x402Discovery } from "../../domain/funding/discovery.js";
import type { Runtime } from "../../runtime.js";

/**
 * `GET /.well-known/x402` (issue 29): the paid funding routes as `POST <url>` under this deployment's
 * BASE_URL, with instructions for an agent (docs/decisions.md "x402 discovery"). Public and
 * credential-free like /openapi.json: any origin may read it; built once per app.
 */
export function discoveryRoutes(rt: Runtime): Router {
  const r = Router();
  const body = JSON.stringify(x402Discovery(rt.config.urls.base));
  r.get("/.well-known/x402", (_req, res) => {
    res.type("application/json").setHeader("Cache-Control", "public, max-age=300");
    res.setHeader("Access-Control-Allow-Origin", "*");
    res.send(body);
  });
  return r;
}
