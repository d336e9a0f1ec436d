import type { RouteConfig } from "@asteasolutions/zod-to-openapi";
import type { z } from "../common.js";
import { fundedResponse, fundingBody, paymentChallenge, signupBody, signupResponse } from "../funding.js";
import {
  BEARER,
  BODY_ERRORS,
  errorResponse,
  errorResponses,
  FUNDING_PAYMENT_HEADERS,
  headers,
  jsonBody,
  jsonResponse,
  PUBLIC,
  registry,
  SESSION,
} from "./registry.js";

function fundingResponses(ok: z.ZodTypeAny, extra: number[]): RouteConfig["responses"] {
  return {
    200: jsonResponse(
      ok,
      "Payment settled; credit recorded as pending until confirmed. The receipt is X-PAYMENT-RESPONSE for an X-PAYMENT payment, PAYMENT-RESPONSE for a PAYMENT-SIGNATURE one. A PAYMENT-SIGNATURE sent again with the same `payment-identifier` id and the same payment and body answers this recorded 200 (its receipt; `idempotent: true`, never the key).",
      "paymentResponse",
      "paymentResponseV2",
    ),
    402: {
      description:
        "Payment challenge: `accepts` present; no money moved (`payment_required`, or `invalid_payment` when the payment sent was refused before it settled). The body is the x402 v1 challenge: sign one requirement and retry with X-PAYMENT (`accepts[0].outputSchema` describes the request and its 200 for v1 indexes). The PAYMENT-REQUIRED header carries the same requirement as x402 v2, with the service metadata on `resource` and the `bazaar` and `payment-identifier` extensions: sign it and retry with PAYMENT-SIGNATURE.",
      headers: headers("errorCode", "paymentRequired"),
      content: { "application/json": { schema: paymentChallenge } },
    },
    ...errorResponses([...BODY_ERRORS, 409, 503, ...extra], {
      409: "Money moved, or may have, and the request did not finish (`payment_unfinished`, never with `accepts`): `transaction` and `reconciling` (true: credited from the chain exactly once if the transfer happened; false: a human must recover it), or `credited: true` without `reconciling` (signup's key cap; a payment already used by another funding route). The receipt (X-PAYMENT-RESPONSE, or PAYMENT-RESPONSE for a v2 payment) says `success: false` while the outcome is unknown. Do not pay again. Or `payment_identifier_conflict`: the PAYMENT-SIGNATURE's `payment-identifier` id was used by this payer with another payment or request; nothing was charged by this one.",
      503: "`not_configured`, or `facilitator_unavailable`: the facilitator could not be reached and nothing moved; retry the same request and payment header after Retry-After. `service_unavailable`: a replayed payment from a contract wallet whose signature the chain could not check just now; retry it after Retry-After.",
    }),
    409: { ...errorResponse(409), headers: headers("errorCode", "paymentResponse", "paymentResponseV2") },
  };
}

/** The x402 funding routes: signup, top-up and refill. */
export function registerFundingRoutes(): void {
  registry.registerPath({
    method: "post",
    path: "/v1/x402/signup",
    operationId: "signup",
    tags: ["Funding"],
    summary: "Create an account and an API key, prepaid with USDC (the payer's wallet is the account)",
    security: PUBLIC,
    request: { headers: FUNDING_PAYMENT_HEADERS, body: jsonBody(signupBody) },
    responses: fundingResponses(signupResponse, [429]),
  });

  registry.registerPath({
    method: "post",
    path: "/v1/x402/top-up",
    operationId: "topUp",
    tags: ["Funding"],
    summary: "Add prepaid USDC to the signed-in account (payer = session wallet)",
    security: SESSION,
    request: { headers: FUNDING_PAYMENT_HEADERS, body: jsonBody(fundingBody) },
    responses: fundingResponses(fundedResponse, [401, 403]),
  });

  registry.registerPath({
    method: "post",
    path: "/v1/x402/refill",
    operationId: "refill",
    tags: ["Funding"],
    summary: "Add prepaid USDC to the account behind this API key (payer = key's wallet)",
    security: BEARER,
    request: { headers: FUNDING_PAYMENT_HEADERS, body: jsonBody(fundingBody) },
    responses: fundingResponses(fundedResponse, [401, 403]),
  });
}
