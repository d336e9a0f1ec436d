import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
} from "@x402/core/http";
import {
  type PaymentPayloadV1 as PaymentPayload,
  PaymentPayloadV1Schema,
  type PaymentPayloadV2,
  PaymentPayloadV2Schema,
} from "@x402/core/schemas";
import type {
  Network,
  PaymentRequired as PaymentRequiredV2,
  PaymentRequirements as PaymentRequirementsV2,
  ResourceInfo,
} from "@x402/core/types";
import { type Hex, verifyTypedData } from "viem";
import {
  type V1Requirements as PaymentRequirements,
  v1Requirements,
  v2Requirements,
} from "../../adapters/facilitator/envelopes.js";
import {
  type ExactEvmPayload,
  ExactEvmPayloadSchema,
  type ExactPayment,
  type ExactRequirements,
  evmPayloadOf,
} from "../../adapters/facilitator/types.js";
import type { HeaderField } from "../../lib/errors.js";

/**
 * x402 `exact` on Base, both versions on the same routes (docs/decisions.md "x402 v2 beside v1"):
 * the 402 body is the spec's v1 challenge and the `PAYMENT-REQUIRED` header its v2 twin, built from
 * one input; a payment comes as `X-PAYMENT` (v1) or `PAYMENT-SIGNATURE` (v2), is decoded into one
 * `DecodedPayment`, and is answered with the receipt header of its own version. Header names and
 * encodings live here and nowhere else.
 */

/** x402 `exact` on Base, v1 (SPEC "Payment requirement"). */
export const X402_VERSION = 1;
export const X402_NETWORK = "base";
/** How long a signed authorization may take to settle (x402 `maxTimeoutSeconds`). */
export const MAX_TIMEOUT_SECONDS = 300;

export type X402Version = 1 | 2;

/** The request header that carries a payment, by x402 version. */
export const PAYMENT_HEADER: Readonly<Record<X402Version, string>> = { 1: "X-PAYMENT", 2: "PAYMENT-SIGNATURE" };
/** The response header that carries the settlement receipt, by x402 version. */
export const RECEIPT_HEADER: Readonly<Record<X402Version, string>> = { 1: "X-PAYMENT-RESPONSE", 2: "PAYMENT-RESPONSE" };
/** The response header of a 402 that carries the v2 `PaymentRequired`. */
export const PAYMENT_REQUIRED_HEADER = "PAYMENT-REQUIRED";

export interface RequirementInput {
  amountMicroUsdc: bigint;
  resource: string;
  description: string;
  payTo: string;
  asset: string;
  usdcName: string;
  usdcVersion: string;
  /** CHAIN_ID: the chain this deployment settles on (8453, Base) */
  chainId: number;
}

/**
 * One challenge: its values as the facilitator port takes them (`exact`), and the two wire forms
 * written from them by the adapter's envelopes (src/adapters/facilitator/envelopes.ts), the same
 * functions that write what a facilitator is sent, so the 402's versions and the facilitator's
 * request cannot disagree.
 */
export interface Requirements {
  exact: ExactRequirements;
  /** the `accepts[0]` of the 402 body */
  v1: PaymentRequirements;
  v2: PaymentRequirementsV2;
  /** the v2 `resource` (v1 carries it inside the requirement) */
  resource: ResourceInfo;
}

export function buildBothRequirements(i: RequirementInput): Requirements {
  const exact: ExactRequirements = {
    chainId: i.chainId,
    amountMicroUsdc: i.amountMicroUsdc,
    payTo: i.payTo as ExactRequirements["payTo"],
    asset: i.asset as ExactRequirements["asset"],
    resource: i.resource,
    description: i.description,
    mimeType: "application/json",
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    extra: { name: i.usdcName, version: i.usdcVersion },
  };
  return {
    exact,
    v1: v1Requirements(exact),
    v2: v2Requirements(exact) as PaymentRequirementsV2,
    resource: { url: i.resource, description: i.description, mimeType: exact.mimeType },
  };
}

/** The v1 requirement alone (`accepts[0]` of the 402 body). */
export function buildRequirements(i: RequirementInput): PaymentRequirements {
  return buildBothRequirements(i).v1;
}

/**
 * The v2 `PaymentRequired` of a challenge. `extensions` (the Bazaar discovery extension, so an index can
 * list the route) is passed through as given; absent, the key is left out.
 */
export function paymentRequiredV2(
  r: Requirements,
  error: string,
  extensions?: Record<string, unknown>,
): PaymentRequiredV2 {
  return {
    x402Version: 2,
    error,
    resource: { ...r.resource },
    accepts: [{ ...r.v2 }],
    ...(extensions ? { extensions } : {}),
  };
}

/** `PAYMENT-REQUIRED`: the base64 v2 `PaymentRequired`, on every 402 of a funding route. */
export function paymentRequiredHeader(
  r: Requirements,
  error: string,
  extensions?: Record<string, unknown>,
): HeaderField {
  return { name: PAYMENT_REQUIRED_HEADER, value: encodePaymentRequiredHeader(paymentRequiredV2(r, error, extensions)) };
}

interface Authorized {
  payer: `0x${string}`;
  payTo: string;
  valueMicroUsdc: bigint;
  /** lower-case bytes32 hex */
  nonce: Hex;
  validAfter: Date;
  validBefore: Date;
  /** the EIP-3009 authorization and its signature: the same in either envelope */
  evm: ExactEvmPayload;
}

/** A payment sent as `X-PAYMENT`. */
export type DecodedPaymentV1 = Authorized & { version: 1; payload: PaymentPayload };
/** A payment sent as `PAYMENT-SIGNATURE`. */
export type DecodedPaymentV2 = Authorized & { version: 2; payload: PaymentPayloadV2 };
/**
 * A payment of either version. One authorization is one payment whichever envelope carries it:
 * everything after the mismatch check keys on `nonce`.
 */
export type DecodedPayment = DecodedPaymentV1 | DecodedPaymentV2;

/**
 * The latest `validAfter`/`validBefore` a payment may name, in seconds (9999-12-31T23:59:59Z): the
 * times are recorded as timestamps, and a payment needs no later bound than that.
 */
const MAX_AUTHORIZATION_TIME_S = 253_402_300_799n;

/** A uint256 of seconds an authorization names, as a Date; `undefined` beyond what a timestamp holds. */
function authorizationTime(seconds: string): Date | undefined {
  if (!/^\d{1,78}$/.test(seconds)) return undefined;
  const s = BigInt(seconds);
  return s <= MAX_AUTHORIZATION_TIME_S ? new Date(Number(s) * 1000) : undefined;
}

function authorizedOf(evm: ExactEvmPayload): Authorized | undefined {
  const a = evm.authorization;
  const validAfter = authorizationTime(String(a.validAfter));
  const validBefore = authorizationTime(String(a.validBefore));
  if (!/^0x[0-9a-fA-F]{64}$/.test(a.nonce) || !/^\d+$/.test(a.value) || !validAfter || !validBefore) {
    return undefined;
  }
  return {
    payer: a.from.toLowerCase() as `0x${string}`,
    payTo: a.to.toLowerCase(),
    valueMicroUsdc: BigInt(a.value),
    nonce: a.nonce.toLowerCase() as Hex,
    validAfter,
    validBefore,
    evm,
  };
}

/** A payment as recorded when it was first submitted (the `payments` row). */
export interface RecordedAuthorization {
  payerAddress: string;
  payToAddress: string;
  assetAddress: string;
  amountMicroUsdc: bigint;
  authorizationNonce: string;
  /** null on rows recorded before validAfter was (the presented value is then the one checked) */
  validAfter: Date | null;
  validBefore: Date | null;
}

/** The EIP-712 domain of the USDC contract (USDC_EIP712_NAME, USDC_EIP712_VERSION, CHAIN_ID). */
export interface TokenDomain {
  name: string;
  version: string;
  chainId: number;
}

const TRANSFER_WITH_AUTHORIZATION = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

const seconds = (d: Date): bigint => BigInt(Math.floor(d.getTime() / 1000));

/**
 * The EIP-712 `TransferWithAuthorization` a recorded payment is, as the token verifies it: every
 * field from the record (validAfter from the payment when the record predates it). `undefined` when
 * the presented payment names another authorization than the record: another payer, payee, value,
 * window or nonce.
 */
export function recordedTypedData(d: DecodedPayment, r: RecordedAuthorization, domain: TokenDomain) {
  const validAfter = r.validAfter ?? d.validAfter;
  const same =
    d.payer === r.payerAddress.toLowerCase() &&
    d.payTo === r.payToAddress.toLowerCase() &&
    d.valueMicroUsdc === r.amountMicroUsdc &&
    d.nonce === r.authorizationNonce.toLowerCase() &&
    r.validBefore !== null &&
    seconds(d.validBefore) === seconds(r.validBefore) &&
    seconds(d.validAfter) === seconds(validAfter);
  if (!same || r.validBefore === null) return undefined;
  return {
    domain: {
      name: domain.name,
      version: domain.version,
      chainId: domain.chainId,
      verifyingContract: r.assetAddress as Hex,
    },
    types: TRANSFER_WITH_AUTHORIZATION,
    primaryType: "TransferWithAuthorization" as const,
    message: {
      from: r.payerAddress as Hex,
      to: r.payToAddress as Hex,
      value: r.amountMicroUsdc,
      validAfter: seconds(validAfter),
      validBefore: seconds(r.validBefore),
      nonce: r.authorizationNonce as Hex,
    },
  };
}

export type RecordedTypedData = NonNullable<ReturnType<typeof recordedTypedData>>;

/**
 * Did the payer's own key (an EOA) sign the recorded authorization with this payment's signature?
 * Pure (ECDSA recovery); false for anything else, including a contract wallet's signature, which
 * only the chain can check (ERC-1271; the caller asks it then).
 */
export async function signedByPayerKey(d: DecodedPayment, typed: RecordedTypedData): Promise<boolean> {
  try {
    return await verifyTypedData({ ...typed, address: typed.message.from, signature: d.evm.signature as Hex });
  } catch {
    return false;
  }
}

/** Decodes `X-PAYMENT` with the x402 package; `undefined` for anything that is not an exact/EVM payment. */
export function decodePaymentHeader(header: string): DecodedPaymentV1 | undefined {
  let payload: PaymentPayload;
  try {
    // x402 v1's encoding: base64 of the payload's JSON
    const parsed = PaymentPayloadV1Schema.safeParse(JSON.parse(Buffer.from(header, "base64").toString("utf8")));
    if (!parsed.success || parsed.data.scheme !== "exact") return undefined;
    payload = parsed.data;
  } catch {
    return undefined;
  }
  const evm = evmPayloadOf(payload);
  const authorized = evm && authorizedOf(evm);
  return authorized && { ...authorized, version: 1, payload };
}

/**
 * Decodes `PAYMENT-SIGNATURE`: base64 JSON that is a v2 `PaymentPayload` (`@x402/core`'s schema)
 * whose `payload` is an EIP-3009 authorization with its signature (x402's exact/EVM schema, the one
 * a v1 payload passes); `undefined` for anything else.
 */
export function decodePaymentSignature(header: string): DecodedPaymentV2 | undefined {
  let json: unknown;
  try {
    json = decodePaymentSignatureHeader(header);
  } catch {
    return undefined;
  }
  const parsed = PaymentPayloadV2Schema.safeParse(json);
  if (!parsed.success) return undefined;
  const evm = ExactEvmPayloadSchema.safeParse(parsed.data.payload);
  const authorized = evm.success ? authorizedOf(evm.data) : undefined;
  return authorized && { ...authorized, version: 2, payload: parsed.data };
}

/** The payment of a request: the header it came in and its value. */
export function decodePayment(sent: { version: X402Version; header: string }): DecodedPayment | undefined {
  return sent.version === 1 ? decodePaymentHeader(sent.header) : decodePaymentSignature(sent.header);
}

/** The decoded payment and its challenge, as the facilitator port takes them (either version). */
export function exactPaymentOf(d: DecodedPayment, r: Requirements): ExactPayment {
  return {
    x402Version: d.version,
    authorization: d.evm.authorization as ExactPayment["authorization"],
    signature: d.evm.signature as ExactPayment["signature"],
    requirements: r.exact,
  };
}

/**
 * Does the signed payment answer this challenge? The amount must equal the challenged amount
 * (the body is part of what was signed), payee and network must match. A v2 payment names the
 * requirement it accepted: that must be ours (scheme, network, amount, asset, payTo), and the
 * authorization must carry the same amount and payee.
 */
export function mismatch(d: DecodedPayment, r: Requirements): string | undefined {
  if (d.version === 2) return mismatchV2(d, r.v2);
  const req = r.v1;
  if (d.payload.x402Version !== X402_VERSION) return "x402Version must be 1";
  if (d.payload.scheme !== "exact") return "scheme must be exact";
  if (d.payload.network !== req.network) return `network must be ${req.network}`;
  if (d.payTo !== req.payTo.toLowerCase()) return "payment is not to this deployment's payTo";
  if (d.valueMicroUsdc !== BigInt(req.maxAmountRequired)) {
    return "signed amount differs from amountMicroUsdc of the request";
  }
  return undefined;
}

function mismatchV2(d: DecodedPaymentV2, req: PaymentRequirementsV2): string | undefined {
  const accepted = d.payload.accepted;
  if (accepted.scheme !== req.scheme) return `scheme must be ${req.scheme}`;
  if (accepted.network !== req.network) return `network must be ${req.network}`;
  if (accepted.asset.toLowerCase() !== req.asset.toLowerCase()) return `asset must be ${req.asset}`;
  const payTo = req.payTo.toLowerCase();
  if (accepted.payTo.toLowerCase() !== payTo || d.payTo !== payTo) return "payment is not to this deployment's payTo";
  const amount = BigInt(req.amount);
  if (!/^\d+$/.test(accepted.amount) || BigInt(accepted.amount) !== amount || d.valueMicroUsdc !== amount) {
    return "signed amount differs from amountMicroUsdc of the request";
  }
  return undefined;
}

/**
 * The settlement receipt, on every 200 and 409 of a funding route, in the version the payment came
 * in: `X-PAYMENT-RESPONSE` (x402 1.2's encoding, network `base`) for `X-PAYMENT`, `PAYMENT-RESPONSE`
 * (`@x402/core`'s encoding, the payment's CAIP-2 network) for `PAYMENT-SIGNATURE`; both carry the
 * same fields. `success` is true only for a settlement the facilitator or the chain proved; a 409
 * whose outcome is still unknown sends `success: false` with the broadcast transaction when one is
 * known (else an empty one), and its body says the payment is being reconciled (docs/decisions.md
 * "Only proof that nothing moved answers 402"): the buyer must not pay again.
 */
export function paymentResponseHeader(
  d: DecodedPayment,
  transaction: string | null,
  payer: string,
  o: { settled: boolean } = { settled: true },
): HeaderField {
  const receipt = { success: o.settled, transaction: transaction ?? "", payer };
  if (d.version === 1) {
    // x402 v1's encoding: base64 of the receipt's JSON (x402 1.x `settleResponseHeader`)
    const v1 = { ...receipt, network: X402_NETWORK };
    return { name: RECEIPT_HEADER[1], value: Buffer.from(JSON.stringify(v1)).toString("base64") };
  }
  return {
    name: RECEIPT_HEADER[2],
    value: encodePaymentResponseHeader({ ...receipt, network: d.payload.accepted.network as Network }),
  };
}
