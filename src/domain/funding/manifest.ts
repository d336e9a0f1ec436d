import type { PaymentRequirements } from "@x402/core/types";
import type { X402Manifest } from "../../contract/discovery.js";
import { jsonSchemaOf } from "../../contract/json-schema.js";
import { caip2, PAID_ROUTES, type PaidRoute } from "../../contract/paid-routes.js";
import { resourceOf, serviceMetadata } from "./discovery.js";
import { MAX_TIMEOUT_SECONDS } from "./x402.js";

/**
 * `GET /.well-known/x402.json`, so an indexer finds every paid route at one address: the per-origin manifest of the x402 repository's draft
 * `well-known-discovery` extension — every paid route of the catalog (contract/paid-routes.ts) with
 * its `resource` (URL, description, the Bazaar's service metadata), `type` `http`, advisory
 * `accepts` (the live 402 is authoritative), the invocation contract lifted to `input` (method, JSON
 * body schema) and `output` (example and schema of the 200). No extension payloads: those are the
 * live 402's.
 */

export interface ManifestDeployment {
  /** BASE_URL and DOCS_URL */
  urls: { base: string; docs: string };
  chain: {
    id: number;
    usdcAddress: string;
    usdcName: string;
    usdcVersion: string;
    /** PAY_TO; unset: no route can be paid, so no item has `accepts` */
    payTo: string | undefined;
  };
}

/**
 * The advisory requirement of a route: `exact` for the least amount a funding payment may be (the
 * buyer names the amount in the body), `upto` for the most a pay-per-request 402 asks (the request's
 * maximum charge decides it; the cost is what is settled). The upto `extra` is what `@x402/evm`'s
 * upto server scheme writes, less the facilitator's address (the live 402 names it).
 */
function advisoryRequirement(route: PaidRoute, d: ManifestDeployment): PaymentRequirements | undefined {
  const payTo = d.chain.payTo;
  if (!payTo) return undefined;
  const upto = route.scheme === "upto";
  return {
    scheme: route.scheme,
    network: caip2({ chainId: d.chain.id, asset: d.chain.usdcAddress }) as PaymentRequirements["network"],
    amount: String(upto ? route.price.maxMicroUsdc : route.price.minMicroUsdc),
    asset: d.chain.usdcAddress,
    payTo,
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    extra: {
      name: d.chain.usdcName,
      version: d.chain.usdcVersion,
      ...(upto ? { assetTransferMethod: "permit2" } : {}),
    },
  };
}

/** The manifest of a deployment, generated at `now` (its `lastUpdated`); build it once and serve it. */
export function x402Manifest(d: ManifestDeployment, now: Date): X402Manifest {
  const service = serviceMetadata(d.urls.docs);
  return {
    x402Version: 2,
    lastUpdated: Math.floor(now.getTime() / 1000),
    items: PAID_ROUTES.map((route) => {
      const accepted = advisoryRequirement(route, d);
      return {
        resource: resourceOf(route, d.urls.base, service) as X402Manifest["items"][number]["resource"],
        type: "http" as const,
        accepts: accepted ? [accepted as unknown as Record<string, unknown>] : [],
        input: { method: route.method, bodyType: "json" as const, body: jsonSchemaOf(route.body, route.refs) },
        output: { mimeType: "application/json", example: route.example.output, schema: jsonSchemaOf(route.ok) },
      };
    }),
  };
}
