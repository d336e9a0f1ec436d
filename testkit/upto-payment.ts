import { x402Client } from "@x402/core/client";
import { type PaymentPayloadV2, PaymentPayloadV2Schema, PaymentRequirementsV2Schema } from "@x402/core/schemas";
import type { PaymentRequirements } from "@x402/core/types";
import { toClientEvmSigner } from "@x402/evm";
import { UptoEvmScheme } from "@x402/evm/upto/client";
import { type Address, createPublicClient, http } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { uptoRequirementsV2 } from "../src/adapters/facilitator/envelopes.js";
import type { UptoPayment, UptoRequirements } from "../src/adapters/facilitator/types.js";

/** `upto` requirements for the local USDC on chain 8453, as a 402 issues them (`extra` names the facilitator). */
export function uptoRequirements(opts: {
  usdcAddress: Address;
  payTo: Address;
  maxMicro: bigint;
  facilitatorAddress: Address;
  resource?: string;
  chainId?: number;
}): UptoRequirements {
  return {
    chainId: opts.chainId ?? 8453,
    maxAmountMicroUsdc: opts.maxMicro,
    payTo: opts.payTo,
    asset: opts.usdcAddress,
    resource: opts.resource ?? "http://127.0.0.1/x402/v1/chat/completions",
    description: "svc pay-per-request inference",
    mimeType: "application/json",
    maxTimeoutSeconds: 300,
    extra: { name: "USD Coin", version: "2", facilitatorAddress: opts.facilitatorAddress },
  };
}

export interface SignUptoOptions {
  /**
   * Declare the `eip2612GasSponsoring` extension in the 402 (as a server whose facilitator
   * sponsors the Permit2 approval does): the client then also signs an EIP-2612 permit for
   * Permit2 when its allowance is short. Needs `rpcUrl` (the client reads the allowance and the
   * token's permit nonce).
   */
  eip2612?: boolean;
  /** the chain the client reads from (never a public RPC in tests) */
  rpcUrl?: string;
  /**
   * Keep the client's default spend controls (what `@x402/fetch` does unless told otherwise):
   * only default assets (USDC at Base's address), at most $1 a payment. Default: off.
   */
  defaultSpendControls?: boolean;
}

/**
 * The buyer signs `requirements` the way `@x402/fetch` does: @x402/core's `x402Client` with
 * @x402/evm's `upto` client scheme, from a v2 402 (`accepts: [requirement]`). Spend controls are
 * off unless `defaultSpendControls`: the local USDC is not at Base's address unless the chain was
 * started with `usdcAtBaseAddress`, and a default client pays only default assets.
 */
export async function signUptoPayment(
  buyer: PrivateKeyAccount,
  requirements: UptoRequirements,
  opts: SignUptoOptions = {},
): Promise<UptoPayment> {
  const reader =
    opts.rpcUrl === undefined ? undefined : createPublicClient({ transport: http(opts.rpcUrl), pollingInterval: 50 });
  const signer = toClientEvmSigner(buyer, reader as Parameters<typeof toClientEvmSigner>[1]);
  const client = new x402Client().register("eip155:*", new UptoEvmScheme(signer));
  if (!opts.defaultSpendControls) client.setSpendControls(false);
  const payload = await client.createPaymentPayload({
    x402Version: 2,
    resource: { url: requirements.resource, description: requirements.description, mimeType: requirements.mimeType },
    accepts: [uptoRequirementsV2(requirements) as PaymentRequirements],
    ...(opts.eip2612 ? { extensions: { eip2612GasSponsoring: { info: {}, schema: {} } } } : {}),
  });
  return { payload: PaymentPayloadV2Schema.parse(payload), requirements };
}

/**
 * A facilitator request body for `upto` (`{x402Version: 2, paymentPayload, paymentRequirements}`,
 * checked against @x402/core's schemas) read back as the port's `UptoPayment` and the amount the
 * requirement carries (verify: the maximum; settle: the amount to settle). The maximum comes
 * from the payload's `accepted` requirement (what the buyer signed against).
 */
export function uptoPaymentFromWire(body: unknown): { payment: UptoPayment; amountMicroUsdc: bigint } {
  const b = body as { x402Version?: unknown; paymentPayload?: unknown; paymentRequirements?: unknown };
  if (b.x402Version !== 2) throw new Error("upto bodies are x402 v2");
  const payload: PaymentPayloadV2 = PaymentPayloadV2Schema.parse(b.paymentPayload);
  const r = PaymentRequirementsV2Schema.parse(b.paymentRequirements);
  const chainId = Number(/^eip155:(\d+)$/.exec(r.network)?.[1] ?? Number.NaN);
  const requirements: UptoRequirements = {
    chainId,
    maxAmountMicroUsdc: BigInt(payload.accepted.amount),
    payTo: r.payTo as Address,
    asset: r.asset as Address,
    resource: payload.resource?.url ?? "",
    description: payload.resource?.description ?? "",
    mimeType: payload.resource?.mimeType ?? "",
    maxTimeoutSeconds: r.maxTimeoutSeconds,
    extra: { ...(r.extra ?? {}) },
  };
  return { payment: { payload, requirements }, amountMicroUsdc: BigInt(r.amount) };
}
