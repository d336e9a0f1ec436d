import type { ResourceInfo } from "@x402/core/types";
import {
  type BodyDiscoveryExtension,
  bazaarResourceServerExtension,
  declareDiscoveryExtension,
  isValidIconUrl,
} from "@x402/extensions/bazaar";
import type { X402DiscoveryDocument } from "../../contract/discovery.js";
import { type JsonSchema, jsonSchemaOf } from "../../contract/json-schema.js";
import {
  PAID_ROUTES,
  type PaidRoute,
  type PaidRouteId,
  paidRoute,
  SERVICE_NAME,
  SERVICE_TAGS,
} from "../../contract/paid-routes.js";

/**
 * x402 discovery (docs/decisions.md "x402 discovery" and "x402 discovery for
 * indexers"): what a 402 tells an index beside the payment — the Bazaar extension (`extensions`),
 * the service metadata on `resource`, the v1 `outputSchema` — and the `/.well-known/x402` document.
 * All of it is written from the catalog of paid routes (contract/paid-routes.ts), so it says what
 * /openapi.json says.
 */

/** The `extensions` of a v2 PaymentRequired: `{ bazaar }`. */
export type BazaarExtensions = { bazaar: BodyDiscoveryExtension };

const built = new Map<PaidRouteId, BazaarExtensions>();

/**
 * The Bazaar discovery extension of a paid route's 402, as `@x402/extensions/bazaar` builds it:
 * `declareDiscoveryExtension` with the route's JSON body (input schema: the contract's body schema;
 * example) and its 200 (output schema: the contract's response schema; example), then the package's
 * own server step (`enrichDeclaration`) that records the method, `POST`, in `info` and `schema`, as
 * `@x402/core`'s resource server does for the routes it serves. Built once per route; do not mutate.
 */
export function bazaarExtension(id: PaidRouteId): BazaarExtensions {
  const cached = built.get(id);
  if (cached) return cached;
  const route = paidRoute(id);
  const declared = declareDiscoveryExtension({
    bodyType: "json",
    input: route.example.input,
    inputSchema: jsonSchemaOf(route.body, route.refs),
    output: { example: route.example.output, schema: jsonSchemaOf(route.ok) },
  }).bazaar;
  // the package's request-time step; the route has no path parameters, so only `method` is read
  const context = { method: route.method, path: route.path, adapter: { getPath: () => route.path } };
  const enrich = bazaarResourceServerExtension.enrichDeclaration;
  const bazaar = (enrich ? enrich(declared, context) : declared) as BodyDiscoveryExtension;
  const extensions = { bazaar };
  built.set(id, extensions);
  return extensions;
}

/** The Bazaar's service metadata, carried on the `resource` of every 402 (bazaar.md "Service Metadata"). */
export interface ServiceMetadata {
  serviceName: string;
  tags: string[];
  /** absent when the docs site is on an address the Bazaar refuses to fetch (an IP, localhost) */
  iconUrl?: string;
}

/**
 * The service metadata of this deployment: its name and tags, and its icon, the docs site's
 * favicon (`{docs_url}/assets/favicon.svg`), when that URL passes the Bazaar's own `isValidIconUrl`
 * (a deployment on 127.0.0.1 publishes none rather than one every facilitator drops).
 */
export function serviceMetadata(docsUrl: string): ServiceMetadata {
  const iconUrl = `${docsUrl.replace(/\/+$/, "")}/assets/favicon.svg`;
  return { serviceName: SERVICE_NAME, tags: [...SERVICE_TAGS], ...(isValidIconUrl(iconUrl) ? { iconUrl } : {}) };
}

/** The v2 `resource` of a paid route at `base` (BASE_URL): its URL, description and the service metadata. */
export function resourceOf(route: PaidRoute, base: string, service: ServiceMetadata): ResourceInfo {
  return { url: `${base}${route.path}`, description: route.description, mimeType: "application/json", ...service };
}

const outputSchemas = new Map<PaidRouteId, Record<string, unknown>>();

/**
 * The x402 v1 `outputSchema` of a paid route's requirement (`accepts[0]` of a v1 challenge): the
 * discovery data of x402 v1, which the v2 Bazaar extension replaced (`extractDiscoveryInfoV1` of
 * `@x402/extensions` and x402scan read it): `input` the HTTP request (`POST`, a JSON body whose
 * fields are the contract's, each marked `required` as the schema says), `output` the 200's JSON
 * Schema. Built once per route.
 */
export function v1OutputSchema(id: PaidRouteId): Record<string, unknown> {
  const cached = outputSchemas.get(id);
  if (cached) return cached;
  const route = paidRoute(id);
  const body = jsonSchemaOf(route.body, route.refs);
  const required = new Set(Array.isArray(body.required) ? (body.required as string[]) : []);
  const properties = (body.properties ?? {}) as Record<string, JsonSchema>;
  const bodyFields = Object.fromEntries(
    Object.entries(properties).map(([name, field]) => [name, { ...field, required: required.has(name) }]),
  );
  const schema = {
    input: { type: "http", method: route.method, bodyType: "json", bodyFields, discoverable: true },
    output: jsonSchemaOf(route.ok),
  };
  outputSchemas.set(id, schema);
  return schema;
}

/**
 * `GET /.well-known/x402` for a deployment whose API is at `base` (BASE_URL, no trailing slash):
 * every paid route of the catalog as `POST <absolute url>` and what an agent does with them.
 */
export function x402Discovery(base: string): X402DiscoveryDocument {
  const url = (id: PaidRouteId) => `${base}${paidRoute(id).path}`;
  return {
    version: 1,
    resources: PAID_ROUTES.map((r) => `${r.method} ${base}${r.path}`),
    instructions:
      "Two ways to pay, both x402 with USDC on Base. Prepaid: " +
      `POST ${url("signup")} with {"amountMicroUsdc": 1000000-1000000000} answers 402; pay it ` +
      "with an x402 client (scheme exact) and send the same request again. The 200 answer " +
      "carries apiKey (svc_…, shown once: keep it). Then call the OpenAI-compatible API at " +
      `${base}/v1 with Authorization: Bearer <apiKey>; requests are paid from the prepaid balance once ` +
      `the payment is confirmed. Add funds with POST ${url("refill")} and the same ` +
      "key (top-up is for a signed-in web session). Per request, no account: the same inference " +
      `routes under ${base}/x402/v1 (chat/completions, responses, messages, image/generate, ` +
      "images/generations) answer 402 with scheme upto (x402 v2) for the request's maximum charge; " +
      "sign it, send the same request again, and the exact cost is settled. " +
      `Guide: ${base}/SKILL.md.`,
  };
}
