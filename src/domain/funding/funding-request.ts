/**
 * The funding routes' domain types (SPEC "Funding flow"), pure: what a funding call carries and the
 * shape of a funded answer. The body's rules (amount, signup key name and ceiling) are the
 * contract's (`parseFundingRequest`, src/contract/funding.ts); FundingService (funding-service.ts)
 * parses the body once and runs the x402 exchange.
 */
import type { FundingKind } from "../../contract/funding.js";
import { paidRoute } from "../../contract/paid-routes.js";
import { DomainError, type HeaderField } from "../../lib/errors.js";
import { formatDecimal6 } from "../../lib/money.js";
import {
  type IdentifiedRequest,
  paymentIdentifierOf,
  type RecordedResponse,
  requestFingerprint,
} from "./payment-identifier.js";
import type { Recorded } from "./settlement-record.js";
import type { DecodedPayment } from "./x402.js";

export type { FundingKind };

export interface FundingRequest {
  kind: FundingKind;
  /** the JSON body as received (parsed by the service with the contract) */
  body: unknown;
  /** the payment headers as sent: `X-PAYMENT` (x402 v1) and `PAYMENT-SIGNATURE` (v2); at most one may be */
  payment: { xPayment: string | undefined; paymentSignature: string | undefined };
  /** absolute URL of the route (x402 `resource`) */
  resource: string;
  /** the caller: the session wallet (top-up) or the key's wallet (refill); none for signup */
  caller?: { accountId: string; walletAddress: string };
}

/** The code of a 402 challenge: none sent yet, or the one sent cannot settle (no money moved either way). */
export type ChallengeCode = "payment_required" | "invalid_payment";

/**
 * A funding route's answer. The challenge's body is the v1 challenge and `paymentRequired` its v2
 * form (the `PAYMENT-REQUIRED` header); a funded answer carries the receipt header of the payment's
 * version. Both headers are named and encoded in x402.ts.
 */
export type FundingOutcome =
  | {
      type: "challenge";
      status: 402;
      code: ChallengeCode;
      body: Record<string, unknown>;
      paymentRequired: HeaderField;
    }
  | { type: "funded"; status: 200; body: Record<string, unknown>; paymentResponse: HeaderField };

/** The x402 requirement's `description`, per route: the catalog's (contract/paid-routes.ts). */
export const DESCRIPTIONS: Record<FundingKind, string> = {
  signup: paidRoute("signup").description,
  top_up: paidRoute("top_up").description,
  refill: paidRoute("refill").description,
};

/**
 * The 200 answer for a recorded payment, fresh or replayed (`idempotent`). A signup that credited
 * but hit the wallet's key cap is not a 200. A signup answered without a key says `keyIssued: false`
 * when none was ever issued for the payment.
 * @throws payment_unfinished (credited: true) when the signup's key could not be issued
 */
export function fundedOutcome(
  kind: FundingKind,
  r: Recorded,
  o: { paymentResponse: HeaderField; idempotent: boolean; confirmationBlocks: number },
): FundingOutcome {
  const a = r.account;
  const transaction = r.payment.settlementTxHash;
  if (kind === "signup") {
    if (r.keyCapReached) {
      throw new DomainError(
        "payment_unfinished",
        "Payment credited, but this wallet already holds 10 active API keys; no key was issued.",
        // credited: nothing to reconcile and nothing for a human to recover, so no `reconciling`
        // (SPEC funding rules 6 and 9 together; docs/decisions.md "money safety and the letter of the spec")
        { transaction, credited: true, paymentResponse: o.paymentResponse },
      );
    }
    const body: Record<string, unknown> = {
      walletAddress: a.walletAddress,
      accountId: a.id,
      pendingUsdc: formatDecimal6(a.pendingMicroUsdc),
      transaction,
      confirmationBlocks: o.confirmationBlocks,
    };
    if (o.idempotent || !r.key) {
      body.idempotent = true;
      // no key was ever issued for this payment (credited from the chain after its answer was lost,
      // or at the key cap): the wallet's session mints one, so the buyer is never left without a key
      if (!r.payment.apiKeyId) body.keyIssued = false;
    } else {
      body.apiKey = r.key.apiKey;
      body.keyPrefix = r.key.keyPrefix;
      body.keyName = r.key.name;
    }
    return { type: "funded", status: 200, body, paymentResponse: o.paymentResponse };
  }
  return {
    type: "funded",
    status: 200,
    body: {
      confirmedUsdc: formatDecimal6(a.confirmedMicroUsdc),
      pendingUsdc: formatDecimal6(a.pendingMicroUsdc),
      topUpAmountUsdc: formatDecimal6(r.payment.amountMicroUsdc),
      walletAddress: a.walletAddress,
      transaction,
      confirmationBlocks: o.confirmationBlocks,
      ...(o.idempotent ? { idempotent: true } : {}),
    },
    paymentResponse: o.paymentResponse,
  };
}

/**
 * The payment-identifier claim of a funding call: a v2 payment carrying an id, for this route, its
 * body and its payment payload; undefined without one (v1 payloads carry no extensions).
 * @throws invalid_request (400) for a malformed id
 */
export function identifiedRequest(
  req: FundingRequest,
  d: DecodedPayment,
  header: string,
): IdentifiedRequest | undefined {
  if (d.version !== 2) return undefined;
  const identifier = paymentIdentifierOf(d.payload, header);
  if (identifier === undefined) return undefined;
  const route = `POST ${paidRoute(req.kind).path}`;
  return {
    payer: d.payer,
    identifier,
    route,
    fingerprint: requestFingerprint({ route, body: req.body, payment: d.payload }),
  };
}

/** A signup's key and its names: shown once, never recorded. */
const SHOWN_ONCE = ["apiKey", "keyPrefix", "keyName"];

/**
 * What a funded answer is recorded as for its payment-identifier: the same status, receipt and body,
 * as a replay of the settlement answers it (`idempotent: true`; a signup's key is shown once only).
 */
export function recordedAnswer(o: Extract<FundingOutcome, { type: "funded" }>): RecordedResponse {
  const body = Object.fromEntries(Object.entries(o.body).filter(([k]) => !SHOWN_ONCE.includes(k)));
  return { status: o.status, body: { ...body, idempotent: true }, headers: [o.paymentResponse] };
}

/** The recorded answer of a payment-identifier, sent again. */
export function replayedOutcome(r: RecordedResponse): FundingOutcome {
  const [paymentResponse] = r.headers;
  if (r.status !== 200 || !paymentResponse) throw new Error(`unexpected recorded funding answer ${r.status}`);
  return { type: "funded", status: 200, body: r.body, paymentResponse };
}
