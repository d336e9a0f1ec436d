import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
} from "@x402/core/http";
import { type PaymentPayloadV2, PaymentPayloadV2Schema } from "@x402/core/schemas";
import type { Network, PaymentRequired, PaymentRequirements, ResourceInfo } from "@x402/core/types";
import { type Address, getAddress } from "viem";
import {
  type UptoAuthorizationFacts,
  uptoAuthorizationOf,
  uptoRequirementsV2,
  v2Network,
} from "../../adapters/facilitator/envelopes.js";
import type { UptoRequirements } from "../../adapters/facilitator/types.js";
import type { PaidRoute } from "../../contract/paid-routes.js";
import type { HeaderField } from "../../lib/errors.js";
import { bazaarExtension, v1OutputSchema } from "../funding/discovery.js";
import { PAYMENT_IDENTIFIER_EXTENSION } from "../funding/payment-identifier.js";
import { PAYMENT_REQUIRED_HEADER, RECEIPT_HEADER } from "../funding/x402.js";

/**
 * The x402 v2 `upto` exchange of a pay-per-request route (docs/decisions.md "Pay per
 * request"), pure: the requirement a 402 asks the buyer to sign (the request's maximum charge, the
 * facilitator the witness must name), the 402 itself, the payment decoded and checked against the
 * requirement, and the receipt. Header names come from funding/x402.ts.
 */

/**
 * How long an `upto` authorization may wait for its settle (x402 `maxTimeoutSeconds`: the client
 * signs `deadline = now + this`). The charge is settled after the answer — a long stream's last byte,
 * or a reconciliation after a crash — so an hour, not exact's five minutes: a settle after the
 * deadline is refused and the charge becomes the platform's loss.
 */
export const UPTO_MAX_TIMEOUT_SECONDS = 3600;

/**
 * The least time an `upto` authorization must have left when it arrives: the time asked for, less ten
 * minutes for the client's clock and its signing. Nothing else bounds it (the facilitator's verify
 * refuses only a deadline a few seconds away), and a charge is settled after its answer: an
 * authorization signed to expire in seconds would let a stream be served, its settle be refused, and
 * the charge fall on the platform.
 */
export const UPTO_MIN_REMAINING_SECONDS = UPTO_MAX_TIMEOUT_SECONDS - 600;

export interface UptoChallengeInput {
  maxMicroUsdc: bigint;
  route: PaidRoute;
  resource: ResourceInfo;
  payTo: Address;
  asset: Address;
  usdcName: string;
  usdcVersion: string;
  chainId: number;
  /** the facilitator that settles (`/supported`'s `extra.facilitatorAddress`): the witness must name it */
  facilitatorAddress: Address;
}

/** The requirement of one request: as the port takes it, and its v2 wire form (`accepts[0]`). */
export interface UptoChallenge {
  requirements: UptoRequirements;
  accepted: PaymentRequirements;
  resource: ResourceInfo;
  route: PaidRoute;
}

export function uptoChallenge(i: UptoChallengeInput): UptoChallenge {
  const requirements: UptoRequirements = {
    chainId: i.chainId,
    maxAmountMicroUsdc: i.maxMicroUsdc,
    payTo: i.payTo,
    asset: i.asset,
    resource: i.resource.url,
    description: i.route.description,
    mimeType: "application/json",
    maxTimeoutSeconds: UPTO_MAX_TIMEOUT_SECONDS,
    // what @x402/evm's upto server puts in `extra`: the token's EIP-712 domain (an EIP-2612 permit
    // for Permit2 is signed with it), the transfer method, the facilitator the witness names
    extra: {
      name: i.usdcName,
      version: i.usdcVersion,
      assetTransferMethod: "permit2",
      facilitatorAddress: getAddress(i.facilitatorAddress),
    },
  };
  return {
    requirements,
    accepted: uptoRequirementsV2(requirements) as PaymentRequirements,
    resource: i.resource,
    route: i.route,
  };
}

/** The code of a pay-per-request 402: none sent yet, or the one sent cannot pay (nothing moved). */
export type PaidChallengeCode = "payment_required" | "invalid_payment";

/** A 402: the JSON body and the `PAYMENT-REQUIRED` header, and that header's value as an object (MCP). */
export interface PaidChallenge {
  type: "challenge";
  status: 402;
  code: PaidChallengeCode;
  body: Record<string, unknown>;
  paymentRequired: HeaderField;
  required: PaymentRequired;
}

/**
 * The 402 of a pay-per-request route: `PAYMENT-REQUIRED` carries the v2 `PaymentRequired` (resource
 * with the service metadata, the `upto` requirement, the Bazaar and payment-identifier extensions);
 * the body is the same in the house style of a funding 402 (docs/decisions.md "Funding", "402
 * body"): `x402Version`, `error` as our error envelope, `resource`, `accepts` (the requirement with
 * the route's `outputSchema`), `extensions`, and `maxAmountMicroUsdc`.
 */
export function paidChallenge(c: UptoChallenge, code: PaidChallengeCode, message: string): PaidChallenge {
  const extensions = { ...bazaarExtension(c.route.id), ...PAYMENT_IDENTIFIER_EXTENSION };
  const required: PaymentRequired = {
    x402Version: 2,
    error: message,
    resource: { ...c.resource },
    accepts: [{ ...c.accepted }],
    extensions,
  };
  return {
    type: "challenge",
    status: 402,
    code,
    body: {
      x402Version: 2,
      error: { code, message },
      resource: required.resource,
      accepts: [{ ...c.accepted, outputSchema: v1OutputSchema(c.route.id) }],
      extensions,
      maxAmountMicroUsdc: Number(c.requirements.maxAmountMicroUsdc),
    },
    paymentRequired: { name: PAYMENT_REQUIRED_HEADER, value: encodePaymentRequiredHeader(required) },
    required,
  };
}

/** A decoded `upto` payment: the v2 payload as sent and its signed authorization. */
export interface UptoPaymentSent {
  payload: PaymentPayloadV2;
  facts: UptoAuthorizationFacts;
}

/**
 * The payment a call carries: `PAYMENT-SIGNATURE` (base64 JSON) or the payload itself (x402's MCP
 * binding); `undefined` for anything that is not an x402 v2 payload with an upto Permit2 authorization.
 */
export function decodeUpto(sent: { header: string } | { payload: unknown }): UptoPaymentSent | undefined {
  let json: unknown;
  if ("header" in sent) {
    try {
      json = decodePaymentSignatureHeader(sent.header);
    } catch {
      return undefined;
    }
  } else {
    json = sent.payload;
  }
  const parsed = PaymentPayloadV2Schema.safeParse(json);
  if (!parsed.success || parsed.data.x402Version !== 2) return undefined;
  const facts = uptoAuthorizationOf(parsed.data);
  return facts && { payload: parsed.data, facts };
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/**
 * Does the payment answer this challenge at `now`? The requirement it accepted must be ours (scheme,
 * network, asset, payTo, amount = the maximum), and the signed authorization must carry the same
 * maximum, token and payee, name our facilitator, and stay valid for at least
 * `UPTO_MIN_REMAINING_SECONDS`. The maximum is recomputed from the request on every call: a payment
 * signed for another body (or before the catalog's price changed) does not pay.
 */
export function uptoMismatch(sent: UptoPaymentSent, c: UptoChallenge, now: Date): string | undefined {
  const a = sent.payload.accepted;
  const r = c.accepted;
  const f = sent.facts;
  if (a.scheme !== "upto") return "scheme must be upto";
  if (a.network !== r.network) return `network must be ${r.network}`;
  if (!same(a.asset, r.asset) || !same(f.token, r.asset)) return `asset must be ${r.asset}`;
  if (!same(a.payTo, r.payTo) || !same(f.payTo, r.payTo)) return "payment is not to this deployment's payTo";
  if (a.amount !== r.amount || f.maxAmount !== c.requirements.maxAmountMicroUsdc) {
    return `the signed maximum must be this request's maximum charge, ${r.amount} micro-USDC`;
  }
  const facilitator = String(c.requirements.extra.facilitatorAddress ?? "");
  if (!same(f.facilitator, facilitator)) return `the authorization must name the facilitator ${facilitator}`;
  if (f.deadline < BigInt(Math.floor(now.getTime() / 1000) + UPTO_MIN_REMAINING_SECONDS)) {
    return `the authorization's deadline must be at least ${UPTO_MIN_REMAINING_SECONDS} seconds away (sign deadline = now + maxTimeoutSeconds, ${UPTO_MAX_TIMEOUT_SECONDS})`;
  }
  return undefined;
}

/**
 * `PAYMENT-RESPONSE` of a pay-per-request call: the x402 v2 settle response — `success`, the
 * settlement `transaction` ("" when none: a charge of 0, or not known yet), the `network`, the
 * `payer` and the settled `amount` (upto). `success` is true only for a settle the facilitator
 * proved (or one of 0, which moves nothing).
 */
export function uptoReceipt(r: {
  success: boolean;
  transaction: string | null;
  chainId: number;
  payer: string;
  amountMicroUsdc: bigint;
  errorReason?: string;
}): HeaderField {
  return {
    name: RECEIPT_HEADER[2],
    value: encodePaymentResponseHeader({
      success: r.success,
      transaction: r.transaction ?? "",
      network: v2Network(r.chainId) as Network,
      payer: r.payer,
      amount: r.amountMicroUsdc.toString(),
      ...(r.errorReason ? { errorReason: r.errorReason } : {}),
    }),
  };
}
