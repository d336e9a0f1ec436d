import type { Hex } from "viem";
import { exact } from "x402/schemes";
import { type PaymentPayload, type PaymentRequirements, settleResponseHeader } from "x402/types";
import { type ExactPayment, evmPayloadOf } from "../../adapters/facilitator/types.js";

/** x402 `exact` on Base, v1 (SPEC "Payment requirement"). */
export const X402_VERSION = 1;
export const X402_NETWORK = "base";
/** The chain `base` names (the EIP-712 domain a buyer signs for). */
export const X402_CHAIN_ID = 8453;
/** How long a signed authorization may take to settle (x402 `maxTimeoutSeconds`). */
export const MAX_TIMEOUT_SECONDS = 300;

export interface RequirementInput {
  amountMicroUsdc: bigint;
  resource: string;
  description: string;
  payTo: string;
  asset: string;
  usdcName: string;
  usdcVersion: string;
}

export function buildRequirements(i: RequirementInput): PaymentRequirements {
  return {
    scheme: "exact",
    network: X402_NETWORK,
    maxAmountRequired: i.amountMicroUsdc.toString(),
    resource: i.resource as PaymentRequirements["resource"],
    description: i.description,
    mimeType: "application/json",
    payTo: i.payTo as PaymentRequirements["payTo"],
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    asset: i.asset as PaymentRequirements["asset"],
    extra: { name: i.usdcName, version: i.usdcVersion },
  };
}

export interface DecodedPayment {
  payload: PaymentPayload;
  payer: `0x${string}`;
  payTo: string;
  valueMicroUsdc: bigint;
  /** lower-case bytes32 hex */
  nonce: Hex;
  validBefore: Date;
}

/** Decodes `X-PAYMENT` with the x402 package; `undefined` for anything that is not an exact/EVM payment. */
export function decodePaymentHeader(header: string): DecodedPayment | undefined {
  let payload: PaymentPayload;
  try {
    payload = exact.evm.decodePayment(header);
  } catch {
    return undefined;
  }
  const evm = evmPayloadOf(payload);
  if (!evm) return undefined;
  const a = evm.authorization;
  if (!/^0x[0-9a-fA-F]{64}$/.test(a.nonce) || !/^\d+$/.test(a.value) || !/^\d+$/.test(String(a.validBefore))) {
    return undefined;
  }
  return {
    payload,
    payer: a.from.toLowerCase() as `0x${string}`,
    payTo: a.to.toLowerCase(),
    valueMicroUsdc: BigInt(a.value),
    nonce: a.nonce.toLowerCase() as Hex,
    validBefore: new Date(Number(a.validBefore) * 1000),
  };
}

/** The decoded payment and the challenge's values, as the facilitator port takes them. */
export function exactPaymentOf(d: DecodedPayment, i: RequirementInput): ExactPayment {
  const evm = evmPayloadOf(d.payload);
  if (!evm) throw new Error("decoded payment without an EVM exact payload");
  return {
    x402Version: 1,
    authorization: evm.authorization as ExactPayment["authorization"],
    signature: evm.signature as ExactPayment["signature"],
    requirements: {
      chainId: X402_CHAIN_ID,
      amountMicroUsdc: i.amountMicroUsdc,
      payTo: i.payTo as ExactPayment["requirements"]["payTo"],
      asset: i.asset as ExactPayment["requirements"]["asset"],
      resource: i.resource,
      description: i.description,
      mimeType: "application/json",
      maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
      extra: { name: i.usdcName, version: i.usdcVersion },
    },
  };
}

/**
 * Does the signed payment answer this challenge? The amount must equal the challenged amount
 * (the body is part of what was signed), payee and network must match.
 */
export function mismatch(d: DecodedPayment, req: PaymentRequirements): string | undefined {
  if (d.payload.x402Version !== X402_VERSION) return "x402Version must be 1";
  if (d.payload.scheme !== "exact") return "scheme must be exact";
  if (d.payload.network !== req.network) return `network must be ${req.network}`;
  if (d.payTo !== req.payTo.toLowerCase()) return "payment is not to this deployment's payTo";
  if (d.valueMicroUsdc !== BigInt(req.maxAmountRequired)) {
    return "signed amount differs from amountMicroUsdc of the request";
  }
  return undefined;
}

/**
 * `X-PAYMENT-RESPONSE`: the base64 settlement receipt, on every 200 and 409 of a funding route.
 * `success` is true only for a settlement the facilitator or the chain proved; a 409 whose outcome
 * is still unknown sends `success: false` with the broadcast transaction when one is known (else an
 * empty one), and its body says the payment is being reconciled (docs/decisions.md, issue 26).
 */
export function paymentResponseHeader(
  transaction: string | null,
  payer: string,
  o: { settled: boolean } = { settled: true },
): string {
  return settleResponseHeader({ success: o.settled, transaction: transaction ?? "", network: X402_NETWORK, payer });
}
