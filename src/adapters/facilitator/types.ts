import type { Address, Hex } from "viem";
import type { ExactEvmPayload, PaymentPayload, PaymentRequirements, SettleResponse } from "x402/types";

export type { PaymentPayload, PaymentRequirements, SettleResponse };

/**
 * What went wrong, as data. Every kind except `timeout` means NO money moved, so the caller may
 * answer 402 and let the buyer sign a fresh payment.
 *
 * - `invalid`: the payment does not satisfy the requirements or is no longer usable (bad
 *   signature, wrong amount/payTo, expired, nonce already used, insufficient funds). `reason` is
 *   the x402 `invalidReason` / `errorReason` code.
 * - `settle_failed`: settlement was attempted and definitively failed (transaction reverted or
 *   refused at gas estimation; a remote facilitator answered `success: false`). `transaction` is
 *   set when a reverted transaction exists.
 * - `network`: the local facilitator could not reach its RPC before broadcasting anything.
 * - `unreachable`: the HTTP facilitator could not be reached (connection refused, DNS, timeout on
 *   verify/supported). Nothing was processed.
 * - `rejected`: the HTTP facilitator answered non-2xx or with a body we cannot read.
 * - `timeout`: OUTCOME UNKNOWN. A settlement was sent (transaction broadcast, or /settle request
 *   written) but no final answer came in time. Money MAY have moved: reconcile from the chain
 *   using `transaction` when present (SPEC funding rule 6, 409 `reconciling`), never re-settle.
 */
export type FacilitatorFailureKind = "invalid" | "settle_failed" | "network" | "unreachable" | "rejected" | "timeout";

export interface FacilitatorFailure {
  kind: FacilitatorFailureKind;
  /** Human-readable, safe to log (never contains signatures or keys). */
  message: string;
  /** x402 reason code when the facilitator gave one (e.g. `invalid_exact_evm_payload_signature`). */
  reason?: string;
  /** The authorization's signer, when known. */
  payer?: Address;
  /** Settlement transaction, when one was broadcast. */
  transaction?: Hex;
  /** HTTP status of a `rejected` answer. */
  status?: number;
}

export type FacilitatorResult<T> = { ok: true; value: T } | { ok: false; failure: FacilitatorFailure };

export interface VerifyOk {
  /** The authorization's signer (`authorization.from`), checksummed. */
  payer: Address;
}

export interface SettleOk {
  /** Settlement transaction hash (mined and successful for the local facilitator). */
  transaction: Hex;
  payer: Address;
  network: string;
  /** The x402 settle response, ready for `settleResponseHeader()` (X-PAYMENT-RESPONSE). */
  response: SettleResponse;
}

/** `GET /supported` (x402's SupportedPaymentKindsResponse, with the network left as a string). */
export interface SupportedOk {
  kinds: { x402Version: number; scheme: "exact"; network: string; extra?: Record<string, unknown> }[];
}

/**
 * An x402 v1 facilitator: verifies and settles `exact` EIP-3009 payments. Never throws for
 * payment or transport problems; every outcome is a `FacilitatorResult`.
 */
export interface Facilitator {
  readonly kind: "local" | "http";
  verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<FacilitatorResult<VerifyOk>>;
  /** Resolves after the settlement is final (local: receipt mined) or definitively failed. */
  settle(payload: PaymentPayload, requirements: PaymentRequirements): Promise<FacilitatorResult<SettleOk>>;
  supported(): Promise<FacilitatorResult<SupportedOk>>;
}

/** Narrows an x402 payload to the EVM `exact` shape (EIP-3009 authorization + signature). */
export function evmPayloadOf(payload: PaymentPayload): ExactEvmPayload | undefined {
  const inner: unknown = payload.payload;
  if (typeof inner !== "object" || inner === null || !("authorization" in inner) || !("signature" in inner)) {
    return undefined;
  }
  return inner as ExactEvmPayload;
}

/** x402 v1 network names this service can settle on, by chain id. */
export const NETWORK_BY_CHAIN_ID: Readonly<Record<number, "base" | "base-sepolia">> = {
  8453: "base",
  84532: "base-sepolia",
};
