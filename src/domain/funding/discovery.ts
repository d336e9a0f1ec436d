import {
  type BodyDiscoveryExtension,
  bazaarResourceServerExtension,
  declareDiscoveryExtension,
} from "@x402/extensions/bazaar";
import { FUNDING_ROUTES, type X402DiscoveryDocument } from "../../contract/discovery.js";
import type { FundingKind } from "../../contract/funding.js";
import { jsonSchemaOf } from "../../contract/json-schema.js";

/**
 * x402 discovery (issue 29, docs/decisions.md "x402 discovery"): the Bazaar extension a v2
 * `PaymentRequired` carries in `extensions`, and the `/.well-known/x402` document. Both describe the
 * three funding routes from the API contract, so they say what /openapi.json says.
 */

const WALLET = "0x1111111111111111111111111111111111111111";
const TRANSACTION = `0x${"ab".repeat(32)}`;

/** A request body and its 200 per route: the examples the extension carries (they satisfy the contract). */
const EXAMPLES: Record<FundingKind, { input: Record<string, unknown>; output: Record<string, unknown> }> = {
  signup: {
    input: { amountMicroUsdc: 5_000_000, keyName: "my-agent", maxPriceCentsPerDollar: 80 },
    output: {
      walletAddress: WALLET,
      accountId: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11",
      pendingUsdc: "5.000000",
      transaction: TRANSACTION,
      confirmationBlocks: 20,
      apiKey: `svc_${"A".repeat(43)}`,
      keyPrefix: "svc_AAAAAAAA",
      keyName: "my-agent",
    },
  },
  top_up: { input: { amountMicroUsdc: 5_000_000 }, output: funded() },
  refill: { input: { amountMicroUsdc: 5_000_000 }, output: funded() },
};

function funded(): Record<string, unknown> {
  return {
    confirmedUsdc: "1.000000",
    pendingUsdc: "5.000000",
    topUpAmountUsdc: "5.000000",
    walletAddress: WALLET,
    transaction: TRANSACTION,
    confirmationBlocks: 20,
  };
}

/** The `extensions` of a v2 PaymentRequired: `{ bazaar }`. */
export type BazaarExtensions = { bazaar: BodyDiscoveryExtension };

const built = new Map<FundingKind, BazaarExtensions>();

/**
 * The Bazaar discovery extension of a funding route's 402, as `@x402/extensions/bazaar` builds it:
 * `declareDiscoveryExtension` with the route's JSON body (input schema: the contract's body schema;
 * example) and its 200 (output schema: the contract's response schema; example), then the package's
 * own server step (`enrichDeclaration`) that records the method, `POST`, in `info` and `schema`, as
 * `@x402/core`'s resource server does for the routes it serves. Built once per route; do not mutate.
 */
export function bazaarExtension(kind: FundingKind): BazaarExtensions {
  const cached = built.get(kind);
  if (cached) return cached;
  const route = FUNDING_ROUTES[kind];
  const example = EXAMPLES[kind];
  const declared = declareDiscoveryExtension({
    bodyType: "json",
    input: example.input,
    inputSchema: jsonSchemaOf(route.body),
    output: { example: example.output, schema: jsonSchemaOf(route.ok) },
  }).bazaar;
  // the package's request-time step; the route has no path parameters, so only `method` is read
  const context = { method: "POST", path: route.path, adapter: { getPath: () => route.path } };
  const enrich = bazaarResourceServerExtension.enrichDeclaration;
  const bazaar = (enrich ? enrich(declared, context) : declared) as BodyDiscoveryExtension;
  const extensions = { bazaar };
  built.set(kind, extensions);
  return extensions;
}

/** The funding routes in the order /.well-known/x402 lists them. */
const KINDS: readonly FundingKind[] = ["signup", "top_up", "refill"];

/**
 * `GET /.well-known/x402` for a deployment whose API is at `base` (BASE_URL, no trailing slash):
 * the three paid routes as `POST <absolute url>` and what an agent does with them.
 */
export function x402Discovery(base: string): X402DiscoveryDocument {
  const url = (kind: FundingKind) => `${base}${FUNDING_ROUTES[kind].path}`;
  return {
    version: 1,
    resources: KINDS.map((k) => `POST ${url(k)}`),
    instructions:
      `Fund once: POST ${url("signup")} with {"amountMicroUsdc": 1000000-1000000000} answers 402; pay it ` +
      "with an x402 client (scheme exact, USDC on Base) and send the same request again. The 200 answer " +
      "carries apiKey (svc_…, shown once: keep it). Then call the OpenAI-compatible API at " +
      `${base}/v1 with Authorization: Bearer <apiKey>; requests are paid from the prepaid balance once ` +
      `the payment is confirmed, never per request. Add funds with POST ${url("refill")} and the same ` +
      `key (top-up is for a signed-in web session). Guide: ${base}/SKILL.md.`,
  };
}
