import { PaymentPayloadV1Schema, PaymentPayloadV2Schema } from "@x402/core/schemas";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { Address, Hex } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { createPaymentHeader } from "x402/client";
import { exact } from "x402/schemes";
import type { PaymentRequirements } from "x402/types";
import { v1Requirements, v2Requirements } from "../src/adapters/facilitator/envelopes.js";
import type { ExactAuthorization, ExactPayment, ExactRequirements } from "../src/adapters/facilitator/types.js";

/** `exact` requirements for the local USDC on chain 8453, as the service issues them. */
export function exactRequirements(opts: {
  usdcAddress: Address;
  payTo: Address;
  amountMicro: bigint;
  resource?: string;
  chainId?: number;
}): ExactRequirements {
  return {
    chainId: opts.chainId ?? 8453,
    amountMicroUsdc: opts.amountMicro,
    payTo: opts.payTo,
    asset: opts.usdcAddress,
    resource: opts.resource ?? "http://127.0.0.1/v1/x402/top-up",
    description: "svc top-up",
    mimeType: "application/json",
    maxTimeoutSeconds: 300,
    extra: { name: "USD Coin", version: "2" },
  };
}

/**
 * The buyer signs `requirements` with a real x402 client: `x402` 1.2 (`createPaymentHeader`, what
 * `x402-fetch` runs) for v1, `@x402/evm`'s `exact` client scheme (what `@x402/fetch` runs) for v2.
 */
export async function signExactPayment(
  buyer: PrivateKeyAccount,
  requirements: ExactRequirements,
  x402Version: 1 | 2,
): Promise<ExactPayment> {
  if (x402Version === 1) {
    const header = await createPaymentHeader(buyer, 1, v1Requirements(requirements) as PaymentRequirements);
    const decoded = exact.evm.decodePayment(header);
    return { x402Version: 1, ...exactEvmPayloadOf(decoded.payload), requirements };
  }
  const signed = await new ExactEvmScheme(buyer).createPaymentPayload(2, {
    ...v2Requirements(requirements),
    extra: { ...requirements.extra },
  });
  return { x402Version: 2, ...exactEvmPayloadOf(signed.payload), requirements };
}

function exactEvmPayloadOf(payload: unknown): { authorization: ExactAuthorization; signature: Hex } {
  const p = payload as { authorization?: ExactAuthorization; signature?: Hex };
  if (p.authorization === undefined || p.signature === undefined) throw new Error("not an EIP-3009 payload");
  const a = p.authorization;
  return {
    authorization: {
      from: a.from,
      to: a.to,
      value: String(a.value),
      validAfter: String(a.validAfter),
      validBefore: String(a.validBefore),
      nonce: a.nonce,
    },
    signature: p.signature,
  };
}

const CHAIN_BY_V1_NETWORK: Record<string, number> = { base: 8453, "base-sepolia": 84532 };

/**
 * A facilitator request body (`{x402Version, paymentPayload, paymentRequirements}`, v1 or v2,
 * checked against @x402/core's schemas) read back as the port's `ExactPayment`: what a stand-in
 * facilitator hands the local one.
 */
export function exactPaymentFromWire(body: unknown): ExactPayment {
  const b = body as { x402Version?: unknown; paymentPayload?: unknown; paymentRequirements?: unknown };
  const r = b.paymentRequirements as Record<string, unknown> & { extra: { name: string; version: string } };
  const common = {
    payTo: r.payTo as Address,
    asset: r.asset as Address,
    maxTimeoutSeconds: Number(r.maxTimeoutSeconds),
    extra: { name: r.extra.name, version: r.extra.version },
  };
  if (b.x402Version === 2) {
    const p = PaymentPayloadV2Schema.parse(b.paymentPayload);
    return {
      x402Version: 2,
      ...exactEvmPayloadOf(p.payload),
      requirements: {
        ...common,
        chainId: Number(String(r.network).replace(/^eip155:/, "")),
        amountMicroUsdc: BigInt(String(r.amount)),
        resource: p.resource?.url ?? "",
        description: p.resource?.description ?? "",
        mimeType: p.resource?.mimeType ?? "",
      },
    };
  }
  const p = PaymentPayloadV1Schema.parse(b.paymentPayload);
  return {
    x402Version: 1,
    ...exactEvmPayloadOf(p.payload),
    requirements: {
      ...common,
      chainId: CHAIN_BY_V1_NETWORK[String(r.network)] ?? 0,
      amountMicroUsdc: BigInt(String(r.maxAmountRequired)),
      resource: String(r.resource),
      description: String(r.description),
      mimeType: String(r.mimeType ?? ""),
    },
  };
}
