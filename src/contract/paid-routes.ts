import { formatDecimal6 } from "../lib/money.js";
import type { z } from "./common.js";
import {
  type FundingKind,
  fundedResponse,
  fundingBody,
  MAX_PAYMENT_MICRO_USDC,
  MIN_PAYMENT_MICRO_USDC,
  signupBody,
  signupResponse,
} from "./funding.js";
import {
  chatCompletionBody,
  chatCompletionResponse,
  imageGenerateBody,
  imageGenerateResponse,
  openAiImageBody,
  openAiImageResponse,
  responsesBody,
  responsesResponse,
} from "./inference.js";
import { anthropicMessageResponse, anthropicTool, messagesBody } from "./messages.js";
import { EXAMPLES } from "./paid-route-examples.js";

/**
 * THE catalog of paid routes (docs/decisions.md "x402 discovery for indexers"): every
 * route a payment answers, with what an index or an agent needs before paying — method and path,
 * the x402 scheme and versions, the price range, who may call it, and the route's body and 200
 * schemas from the contract. /openapi.json (`x-payment-info`), `/.well-known/x402`,
 * `/.well-known/x402.json` and the Bazaar extension of every 402 are all written from it.
 */

/** The funding routes (prepaid, x402 `exact`) and the pay-per-request inference routes (x402 `upto`). */
export type PayPerRequestId = "chat_completions" | "responses" | "messages" | "image_generate" | "images_generations";
export type PaidRouteId = FundingKind | PayPerRequestId;

export interface PaidRoute {
  id: PaidRouteId;
  method: "POST";
  /** the route's path on this API */
  path: string;
  /** the x402 resource `description` */
  description: string;
  /**
   * What the caller shows besides the payment: nothing (the payment is the only credential), the
   * signed-in session (top-up: the payer must be its wallet), or an API key (refill: the key's wallet).
   */
  caller: "anyone" | "session" | "bearer";
  /** x402 `exact` (the amount is the body's `amountMicroUsdc`) or `upto` (a maximum; the cost is settled) */
  scheme: "exact" | "upto";
  /** the x402 versions it takes: funding both (v1 `X-PAYMENT`, v2 `PAYMENT-SIGNATURE`), `upto` v2 only */
  x402Versions: readonly (1 | 2)[];
  /** the least and the most one payment may be, in micro-USDC (the charge, for `upto`) */
  price: { minMicroUsdc: bigint; maxMicroUsdc: bigint };
  /** the JSON body it takes and its 200 body (as /openapi.json documents them) */
  body: z.ZodTypeAny;
  ok: z.ZodTypeAny;
  /** the named schemas `body` refers to by a written `$ref` (for `jsonSchemaOf`) */
  refs?: Record<string, z.ZodTypeAny>;
  /** a request body and its 200, as the Bazaar extension carries them (they satisfy `body` and `ok`) */
  example: { input: Record<string, unknown>; output: Record<string, unknown> };
  /** pay per request: the keyed route whose body and answers it shares */
  twin?: string;
}

/**
 * The most a pay-per-request 402 asks for: the SPEC's per-payment limit (1000 USDC). It is the upper
 * bound of those routes' price range; a request whose maximum charge is larger is not offered.
 */
export const PAY_PER_REQUEST_MAX_MICRO_USDC = BigInt(MAX_PAYMENT_MICRO_USDC);

const FUNDING_PRICE = { minMicroUsdc: BigInt(MIN_PAYMENT_MICRO_USDC), maxMicroUsdc: BigInt(MAX_PAYMENT_MICRO_USDC) };
const PAY_PER_REQUEST_PRICE = { minMicroUsdc: 0n, maxMicroUsdc: PAY_PER_REQUEST_MAX_MICRO_USDC };

const funding = (
  id: FundingKind,
  path: string,
  description: string,
  caller: PaidRoute["caller"],
  body: z.ZodTypeAny,
  ok: z.ZodTypeAny,
): PaidRoute => ({
  id,
  method: "POST",
  path,
  description,
  caller,
  scheme: "exact",
  x402Versions: [1, 2],
  price: FUNDING_PRICE,
  body,
  ok,
  example: EXAMPLES[id],
});

const payPerRequest = (
  id: PayPerRequestId,
  twin: string,
  description: string,
  body: z.ZodTypeAny,
  ok: z.ZodTypeAny,
  refs?: Record<string, z.ZodTypeAny>,
): PaidRoute => ({
  id,
  method: "POST",
  path: `/x402${twin}`,
  ...(refs ? { refs } : {}),
  description,
  caller: "anyone",
  scheme: "upto",
  x402Versions: [2],
  price: PAY_PER_REQUEST_PRICE,
  body,
  ok,
  example: EXAMPLES[id],
  twin,
});

/** Every paid route, in the order the discovery documents list them. */
export const PAID_ROUTES: readonly PaidRoute[] = [
  funding(
    "signup",
    "/v1/x402/signup",
    "Create an account and API key, prepaid with USDC",
    "anyone",
    signupBody,
    signupResponse,
  ),
  funding(
    "top_up",
    "/v1/x402/top-up",
    "Add prepaid USDC to the signed-in account",
    "session",
    fundingBody,
    fundedResponse,
  ),
  funding(
    "refill",
    "/v1/x402/refill",
    "Add prepaid USDC to the account of this API key",
    "bearer",
    fundingBody,
    fundedResponse,
  ),
  payPerRequest(
    "chat_completions",
    "/v1/chat/completions",
    "OpenAI-compatible chat completion, paid per request: the exact cost, at most the signed maximum",
    chatCompletionBody,
    chatCompletionResponse,
  ),
  payPerRequest(
    "responses",
    "/v1/responses",
    "OpenAI Responses (stateless), paid per request: the exact cost, at most the signed maximum",
    responsesBody,
    responsesResponse,
  ),
  payPerRequest(
    "messages",
    "/v1/messages",
    "Anthropic Messages API, paid per request: the exact cost, at most the signed maximum",
    messagesBody,
    anthropicMessageResponse,
    { AnthropicTool: anthropicTool },
  ),
  payPerRequest(
    "image_generate",
    "/v1/image/generate",
    "Image generation, paid per request: the exact cost, at most the signed maximum",
    imageGenerateBody,
    imageGenerateResponse,
  ),
  payPerRequest(
    "images_generations",
    "/v1/images/generations",
    "OpenAI-compatible image generation, paid per request: the exact cost, at most the signed maximum",
    openAiImageBody,
    openAiImageResponse,
  ),
];

const BY_ID = new Map(PAID_ROUTES.map((r) => [r.id, r]));

export function paidRoute(id: PaidRouteId): PaidRoute {
  const r = BY_ID.get(id);
  if (!r) throw new Error(`no paid route ${id}`);
  return r;
}

/** The pay-per-request routes (`/x402/v1/…`). */
export const PAY_PER_REQUEST_ROUTES: readonly PaidRoute[] = PAID_ROUTES.filter((r) => r.scheme === "upto");

/** Where a deployment settles: CHAIN_ID and USDC_ADDRESS. */
export interface PaymentNetwork {
  chainId: number;
  /** the USDC token (x402 `asset`) */
  asset: string;
}

/** Base mainnet USDC: what a deployment settles in unless configured otherwise (CONTRACT.md). */
export const BASE_USDC: PaymentNetwork = { chainId: 8453, asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" };

/** The CAIP-2 network of x402 v2 (`eip155:8453` on Base). */
export const caip2 = (n: PaymentNetwork): string => `eip155:${n.chainId}`;

/** The service as x402's Bazaar names it on every `resource` (serviceName ≤ 32, tags ≤ 5 of ≤ 32, ASCII). */
export const SERVICE_NAME = "svc inference marketplace";
export const SERVICE_TAGS: readonly string[] = ["inference", "llm", "openai-compatible", "image-generation", "usdc"];

/** USD as the discovery documents write it: six decimals (`"1.000000"`). */
export const usd = (micro: bigint): string => formatDecimal6(micro);

/**
 * A paid operation's `x-payment-info` in /openapi.json, in the structured shape x402scan's
 * DISCOVERY.md and `@agentcash/discovery` read: the price range in USD (`dynamic`, `min`/`max`:
 * the buyer names a funding amount; a pay-per-request charge is the request's cost) and the x402
 * protocol with its scheme, versions, network and asset.
 */
export function paymentInfo(route: PaidRoute, network: PaymentNetwork) {
  return {
    price: {
      mode: "dynamic" as const,
      currency: "USD",
      min: usd(route.price.minMicroUsdc),
      max: usd(route.price.maxMicroUsdc),
    },
    protocols: [
      {
        x402: {
          scheme: route.scheme,
          x402Versions: [...route.x402Versions],
          network: caip2(network),
          asset: network.asset,
        },
      },
    ],
  };
}
