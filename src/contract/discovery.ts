import { z } from "./common.js";

/**
 * x402 discovery (docs/decisions.md "x402 discovery" and "x402 discovery for indexers"): the
 * documents indexes and agents read. The paid routes they list are the catalog's (paid-routes.ts).
 */

/**
 * `GET /.well-known/x402`: the origin's paid resources, in the shape x402scan reads (its "fan-out"
 * document: `version` 1, `resources` as `"METHOD <url>"` strings, `instructions` for an agent). No
 * ratified standard exists; this is kept that small.
 */
export const x402DiscoveryDocument = z
  .object({
    version: z.literal(1),
    resources: z.array(z.string()).openapi({
      description:
        "The paid routes as `POST <absolute url>`: signup, top-up, refill, then the pay-per-request routes under /x402/v1.",
      example: ["POST https://svc.example/v1/x402/signup"],
    }),
    instructions: z.string().openapi({ description: "For an agent: how to fund once or pay per request." }),
  })
  .openapi("X402Discovery");
export type X402DiscoveryDocument = z.infer<typeof x402DiscoveryDocument>;

const resourceInfo = z
  .object({
    url: z.string().openapi({ description: "absolute URL of the paid route" }),
    description: z.string(),
    mimeType: z.string(),
    serviceName: z.string().optional(),
    tags: z.array(z.string()).optional(),
    iconUrl: z.string().optional().openapi({ description: "absent where the docs site is on a local address" }),
  })
  .openapi("X402ResourceInfo");

const manifestItem = z
  .object({
    resource: resourceInfo,
    type: z.literal("http"),
    accepts: z.array(z.record(z.unknown())).openapi({
      description:
        "x402 v2 payment requirements, advisory (the live 402 is authoritative): `exact` at the least amount for funding, `upto` at the most for pay per request; empty when PAY_TO is unset",
    }),
    input: z.object({
      method: z.literal("POST"),
      bodyType: z.literal("json"),
      body: z.record(z.unknown()).openapi({ description: "JSON Schema of the request body" }),
    }),
    output: z.object({
      mimeType: z.string(),
      example: z.record(z.unknown()),
      schema: z.record(z.unknown()).openapi({ description: "JSON Schema of the 200 body" }),
    }),
  })
  .openapi("X402ManifestItem");

/**
 * `GET /.well-known/x402.json`: the per-origin manifest of the x402 repository's draft
 * `well-known-discovery` extension (specs/extensions/well-known-discovery.md): `x402Version` 2,
 * `lastUpdated` (unix seconds of the build), one item per paid route.
 */
export const x402Manifest = z
  .object({
    x402Version: z.literal(2),
    lastUpdated: z.number().int(),
    items: z.array(manifestItem),
  })
  .openapi("X402Manifest");
export type X402Manifest = z.infer<typeof x402Manifest>;
export type X402ManifestItem = z.infer<typeof manifestItem>;
