import { DomainError } from "../../lib/errors.js";
import { bazaarExtension, type ServiceMetadata, v1OutputSchema } from "./discovery.js";
import type { ChallengeCode, FundingKind, FundingOutcome, FundingRequest } from "./funding-request.js";
import { PAYMENT_IDENTIFIER_EXTENSION } from "./payment-identifier.js";
import { paymentRequiredHeader, type Requirements, type X402Version } from "./x402.js";

/**
 * A funding route's 402 for one request, by message and code: the body is the spec's v1 challenge
 * (its requirement with the v1 `outputSchema`); PAYMENT-REQUIRED carries the same requirement as v2,
 * with the service metadata on `resource` and the Bazaar and payment-identifier extensions
 * (discovery.ts, payment-identifier.ts). `message` may name the header each version pays with.
 */
export function fundingChallenge(c: {
  kind: FundingKind;
  amountMicroUsdc: bigint;
  requirements: Requirements;
  service: ServiceMetadata;
}): (message: string | Record<X402Version, string>, code?: ChallengeCode) => FundingOutcome {
  const { requirements } = c;
  return (message, code = "payment_required") => {
    const text = typeof message === "string" ? { 1: message, 2: message } : message;
    return {
      type: "challenge",
      status: 402,
      code,
      body: {
        x402Version: 1,
        error: { code, message: text[1] },
        accepts: [{ ...requirements.v1, outputSchema: v1OutputSchema(c.kind) }],
        amountMicroUsdc: Number(c.amountMicroUsdc),
      },
      paymentRequired: paymentRequiredHeader(
        { ...requirements, resource: { ...requirements.resource, ...c.service } },
        text[2],
        { ...bazaarExtension(c.kind), ...PAYMENT_IDENTIFIER_EXTENSION },
      ),
    };
  };
}

export function facilitatorUnavailable(header: string): DomainError {
  return new DomainError(
    "facilitator_unavailable",
    `The payment facilitator is unavailable; nothing was charged. Retry the same request, with the same ${header}, after Retry-After seconds.`,
    { retryAfterSeconds: 5 },
  );
}

/**
 * Which payment the request carries: none, `X-PAYMENT` (v1) or `PAYMENT-SIGNATURE` (v2). Both at
 * once is refused before anything is decoded: two envelopes may carry two authorizations, and the
 * service settles one payment per request (docs/decisions.md "x402 v2 beside v1").
 * @throws invalid_request (400) when both are present
 */
export function sentPayment(p: FundingRequest["payment"]): { version: X402Version; header: string } | undefined {
  if (p.xPayment && p.paymentSignature) {
    throw new DomainError(
      "invalid_request",
      "Send one payment header: X-PAYMENT (x402 v1) or PAYMENT-SIGNATURE (x402 v2), not both.",
    );
  }
  if (p.xPayment) return { version: 1, header: p.xPayment };
  if (p.paymentSignature) return { version: 2, header: p.paymentSignature };
  return undefined;
}
