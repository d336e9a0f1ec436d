import type { PaymentPayloadV2, PaymentRequirementsV2 } from "@x402/core/schemas";
import { type Address, getAddress, type Hex } from "viem";
import { z } from "zod";
import {
  type ExactAuthorization,
  type ExactPayment,
  type ExactRequirements,
  NETWORK_BY_CHAIN_ID,
  type UptoRequirements,
} from "./types.js";

/**
 * The one place that writes an `ExactPayment` / `ExactRequirements` as x402 wire envelopes, v1 and
 * v2, from the same values (so a challenge's two versions, and what a facilitator is sent, cannot
 * disagree). Validated against `@x402/core/schemas` by test/unit/facilitator/envelopes.test.ts.
 */

/** x402 v1 `PaymentRequirements` (the spec's challenge: `network: base`, `maxAmountRequired`). */
export interface V1Requirements {
  scheme: "exact";
  network: "base" | "base-sepolia";
  maxAmountRequired: string;
  resource: string;
  description: string;
  mimeType: string;
  payTo: Address;
  maxTimeoutSeconds: number;
  asset: Address;
  extra: { name: string; version: string };
}

/** x402 v2 `PaymentRequirements` (CAIP-2 network, `amount`; the resource moved to `resource`). */
export interface V2Requirements {
  scheme: "exact";
  network: `eip155:${number}`;
  amount: string;
  asset: Address;
  payTo: Address;
  maxTimeoutSeconds: number;
  extra: { name: string; version: string };
}

/** The `exact` EVM payload both versions carry. */
export interface ExactEvmWirePayload {
  signature: Hex;
  authorization: ExactAuthorization;
}

/** x402 v1 `PaymentPayload` (the decoded `X-PAYMENT`). */
export interface V1Payload {
  x402Version: 1;
  scheme: "exact";
  network: "base" | "base-sepolia";
  payload: ExactEvmWirePayload;
}

/** x402 v2 `PaymentPayload` (the decoded `PAYMENT-SIGNATURE`). */
export interface V2Payload {
  x402Version: 2;
  resource: { url: string; description: string; mimeType: string };
  accepted: V2Requirements;
  payload: ExactEvmWirePayload;
}

/** The x402 v1 network name of a chain, or undefined when v1 has none this service uses. */
export function v1Network(chainId: number): "base" | "base-sepolia" | undefined {
  return NETWORK_BY_CHAIN_ID[chainId];
}

/** The x402 v2 (CAIP-2) network of a chain. */
export function v2Network(chainId: number): `eip155:${number}` {
  return `eip155:${chainId}`;
}

/** @throws Error for a chain v1 has no name for (callers check `v1Network` first). */
export function v1Requirements(r: ExactRequirements): V1Requirements {
  const network = v1Network(r.chainId);
  if (network === undefined) throw new Error(`x402 v1 has no network name for chain ${r.chainId}`);
  return {
    scheme: "exact",
    network,
    maxAmountRequired: r.amountMicroUsdc.toString(),
    resource: r.resource,
    description: r.description,
    mimeType: r.mimeType,
    payTo: r.payTo,
    maxTimeoutSeconds: r.maxTimeoutSeconds,
    asset: r.asset,
    extra: { name: r.extra.name, version: r.extra.version },
  };
}

export function v2Requirements(r: ExactRequirements): V2Requirements {
  return {
    scheme: "exact",
    network: v2Network(r.chainId),
    amount: r.amountMicroUsdc.toString(),
    asset: r.asset,
    payTo: r.payTo,
    maxTimeoutSeconds: r.maxTimeoutSeconds,
    extra: { name: r.extra.name, version: r.extra.version },
  };
}

function wirePayload(p: ExactPayment): ExactEvmWirePayload {
  const a = p.authorization;
  return {
    signature: p.signature,
    authorization: {
      from: a.from,
      to: a.to,
      value: a.value,
      validAfter: a.validAfter,
      validBefore: a.validBefore,
      nonce: a.nonce,
    },
  };
}

/** @throws Error for a chain v1 has no name for (callers check `v1Network` first). */
export function v1Payload(p: ExactPayment): V1Payload {
  return { x402Version: 1, scheme: "exact", network: v1Requirements(p.requirements).network, payload: wirePayload(p) };
}

export function v2Payload(p: ExactPayment): V2Payload {
  const r = p.requirements;
  return {
    x402Version: 2,
    resource: { url: r.resource, description: r.description, mimeType: r.mimeType },
    accepted: v2Requirements(r),
    payload: wirePayload(p),
  };
}

/** x402 v2 `upto` requirement: the `amount` is the most the buyer authorises. */
export function uptoRequirementsV2(r: UptoRequirements): PaymentRequirementsV2 {
  return {
    scheme: "upto",
    network: v2Network(r.chainId),
    amount: r.maxAmountMicroUsdc.toString(),
    asset: r.asset,
    payTo: r.payTo,
    maxTimeoutSeconds: r.maxTimeoutSeconds,
    extra: { ...r.extra },
  };
}

/** a decimal uint256 */
const uintString = z
  .string()
  .regex(/^\d{1,78}$/)
  .refine((v) => BigInt(v) < 2n ** 256n, { message: "exceeds uint256" });
const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/);

/** The `upto` EVM payload: a Permit2 `PermitWitnessTransferFrom` and its signature. */
const UptoPermit2PayloadSchema = z.object({
  signature: z.string().regex(/^0x[0-9a-fA-F]+$/),
  permit2Authorization: z.object({
    from: address,
    permitted: z.object({ token: address, amount: uintString }),
    spender: address,
    nonce: uintString,
    deadline: uintString,
    witness: z.object({ to: address, facilitator: address, validAfter: uintString }),
  }),
});

/** What reconciliation needs from an `upto` payload: who signed, and which Permit2 nonce it spends. */
export interface UptoAuthorizationFacts {
  /** `permit2Authorization.from`, checksummed */
  payer: Address;
  /** the Permit2 unordered nonce (word = nonce >> 8, bit = nonce & 0xff) */
  nonce: bigint;
  /** the signed maximum (`permitted.amount`) */
  maxAmount: bigint;
  token: Address;
  /** `witness.to`: where the money may go */
  payTo: Address;
  facilitator: Address;
  deadline: bigint;
  validAfter: bigint;
  signature: Hex;
}

/** Reads the payer and Permit2 nonce (and the rest of the signed authorization) of an `upto` payload; undefined when it is not one. */
export function uptoAuthorizationOf(payload: Pick<PaymentPayloadV2, "payload">): UptoAuthorizationFacts | undefined {
  const parsed = UptoPermit2PayloadSchema.safeParse(payload.payload);
  if (!parsed.success) return undefined;
  const a = parsed.data.permit2Authorization;
  return {
    payer: getAddress(a.from),
    nonce: BigInt(a.nonce),
    maxAmount: BigInt(a.permitted.amount),
    token: getAddress(a.permitted.token),
    payTo: getAddress(a.witness.to),
    facilitator: getAddress(a.witness.facilitator),
    deadline: BigInt(a.deadline),
    validAfter: BigInt(a.witness.validAfter),
    signature: parsed.data.signature as Hex,
  };
}
