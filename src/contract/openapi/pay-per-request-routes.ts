import type { ResponseConfig, RouteConfig } from "@asteasolutions/zod-to-openapi";
import type { HeaderName } from "../common.js";
import { PAY_PER_REQUEST_ROUTES } from "../paid-routes.js";
import { type HeadersObject, headers, PUBLIC, registry, V2_PAYMENT_HEADER } from "./registry.js";

/**
 * The pay-per-request twins of the inference routes (the catalog's `/x402/v1/…`, paid-routes.ts):
 * the same body and answers as the keyed route, no credential, an x402 v2 `upto` payment per
 * request. The 401 and the balance's 402 of the twin give way to the payment challenge; the 200
 * carries the receipt; 409 is a payment whose request still runs, or used for another request, or an
 * identifier reused.
 */
export function registerPayPerRequestRoutes(twins: Map<string, RouteConfig>): void {
  for (const route of PAY_PER_REQUEST_ROUTES) {
    const twin = twins.get(route.twin ?? "");
    if (!twin) throw new Error(`no keyed twin documented for ${route.path}`);
    const anthropic = twin.path === "/v1/messages";
    const errorContent = {
      "application/json": {
        schema: { $ref: `#/components/schemas/${anthropic ? "AnthropicErrorBody" : "ErrorBody"}` },
      },
    };
    const errorHeaders = (...names: HeaderName[]) =>
      headers("errorCode", ...names, ...(anthropic ? (["shouldRetry"] as HeaderName[]) : []));
    const kept = Object.entries(twin.responses).filter(([status]) => status !== "401" && status !== "402");
    const twinOk = twin.responses[200] as ResponseConfig;
    const { "X-Balance-Remaining": _balance, ...okHeaders } = (twinOk.headers ?? {}) as HeadersObject;
    const ok = { ...twinOk, headers: okHeaders };
    registry.registerPath({
      ...twin,
      path: route.path,
      operationId: `${twin.operationId}PayPerRequest`,
      tags: ["Pay per request"],
      summary: `${twin.summary}: paid per request (x402 upto), no API key`,
      description:
        `The request and answers of \`POST ${twin.path}\`, with no API key (an Authorization header is ignored). ` +
        "Unpaid: 402 with PAYMENT-REQUIRED, an x402 v2 `upto` requirement (USDC; `amount` = the request's maximum charge at its ceiling, `svc.maxPriceCentsPerDollar` or 80). " +
        "Send the same request again with PAYMENT-SIGNATURE: it runs, and the exact charge (at most that amount, 0 when nothing is charged) is settled; PAYMENT-RESPONSE, `usage.cost` and the cost headers carry it. " +
        "A stream settles after its last byte: its cost frame says so.",
      security: PUBLIC,
      request: { ...twin.request, headers: V2_PAYMENT_HEADER },
      responses: {
        ...Object.fromEntries(kept),
        200: {
          ...ok,
          description: `${ok.description} The receipt is PAYMENT-RESPONSE (buffered answers; settled before the body is released). A settlement whose outcome is not known yet still answers 200, with PAYMENT-RESPONSE \`success: false\`: it is reconciled from the chain, do not pay again.`,
          // no X-Balance-Remaining: the payment, not a prepaid balance, pays the request
          headers: { ...ok.headers, ...headers("paymentResponseV2") },
        },
        402: {
          description:
            "Payment challenge (`payment_required`, or `invalid_payment` when the payment sent was refused before anything moved): the x402 v2 PaymentRequired is the PAYMENT-REQUIRED header (`upto`, the request's maximum charge, the `bazaar` and `payment-identifier` extensions). No money moved. Also `invalid_payment` with PAYMENT-RESPONSE `success: false` when the payment could not settle the charge of an answer that was ready: the answer is withheld.",
          headers: errorHeaders("paymentRequired"),
          content: errorContent,
        },
        409: {
          description:
            "`payment_unfinished` (`inFlight: true`): this payment's request is still running; send the same request with the same payment again later for its recorded answer. `conflict`: this payment already paid for another request (a payment pays for one request); sign a new one. `payment_identifier_conflict`: the `payment-identifier` id was used by this payer with another payment or request; nothing was charged by this one.",
          headers: errorHeaders("paymentResponseV2"),
          content: errorContent,
        },
      },
    });
  }
}
