import { type Response, Router } from "express";
import { x402Discovery } from "../../domain/funding/discovery.js";
import { x402Manifest } from "../../domain/funding/manifest.js";
import type { Runtime } from "../../runtime.js";

/**
 * x402 discovery documents, public and credential-free like /openapi.json (any origin may read
 * them), built once per app from the catalog of paid routes (docs/decisions.md "x402 discovery" and
 * "x402 discovery for indexers"):
 * - `GET /.well-known/x402`: every paid route as `POST <url>` under BASE_URL, with instructions for
 *   an agent (x402scan's fan-out document);
 * - `GET /.well-known/x402.json`: the x402 repository's draft per-site manifest.
 */
export function discoveryRoutes(rt: Runtime): Router {
  const r = Router();
  const { urls, chain } = rt.config;
  const fanOut = JSON.stringify(x402Discovery(urls.base));
  const manifest = JSON.stringify(x402Manifest({ urls, chain }, rt.clock.now()));
  const send = (res: Response, body: string) => {
    res.type("application/json").setHeader("Cache-Control", "public, max-age=300");
    res.setHeader("Access-Control-Allow-Origin", "*");
    res.send(body);
  };
  r.get("/.well-known/x402", (_req, res) => send(res, fanOut));
  r.get("/.well-known/x402.json", (_req, res) => send(res, manifest));
  return r;
}
