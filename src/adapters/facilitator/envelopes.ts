import type { Address, Hex } from "viem";
import { type ExactAuthorization, type ExactPayment, type ExactRequirements, NETWORK_BY_CHAIN_ID } from "./types.js";

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
