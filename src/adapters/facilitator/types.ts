import type { PaymentPayloadV2 } from "@x402/core/schemas";
import type { PaymentPayloadV1 } from "@x402/core/types";
import type { Address, Hex } from "viem";
import { z } from "zod";

/**
 * What a payment asks for, in neither x402 version: `envelopes.ts` writes it as a v1 or a v2
 * requirement (the same values, so the two cannot disagree).
 */
export interface ExactRequirements {
  /** EVM chain id the authorization is signed for (x402 v1 `base` = 8453, v2 `eip155:8453`). */
  chainId: number;
  amountMicroUsdc: bigint;
  payTo: Address;
  /** The USDC contract (EIP-3009 `transferWithAuthorization`). */
  asset: Address;
  resource: string;
  description: string;
  mimeType: string;
  maxTimeoutSeconds: number;
  /** EIP-712 domain of the asset. */
  extra: { name: string; version: string };
}

/** An EIP-3009 `TransferWithAuthorization` as signed (decimal strings, as x402 carries them). */
export interface ExactAuthorization {
  from: Address;
  to: Address;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: Hex;
}

/** One `exact` payment: the buyer's signed authorization and the requirements it must satisfy. */
export interface ExactPayment {
  /** the envelope the buyer sent: the local facilitator verifies it in that version; the HTTP one speaks what its facilitator supports */
  x402Version: 1 | 2;
  authorization: ExactAuthorization;
  signature: Hex;
  requirements: ExactRequirements;
}

/**
 * What an x402 v2 `upto` payment asks for: the buyer signs a Permit2 witness transfer for at most
 * `maxAmountMicroUsdc`, and the service settles the actual amount (0 ≤ amount ≤ max) afterwards.
 * `envelopes.ts` writes it as a v2 requirement (`uptoRequirementsV2`).
 */
export interface UptoRequirements {
  /** EVM chain id the Permit2 signature is for (`eip155:<chainId>`). */
  chainId: number;
  /** the most the buyer authorises: the v2 requirement's `amount` */
  maxAmountMicroUsdc: bigint;
  payTo: Address;
  /** The USDC contract (moved by Permit2's `transferFrom` on it). */
  asset: Address;
  resource: string;
  description: string;
  mimeType: string;
  maxTimeoutSeconds: number;
  /** the scheme's `extra` (EIP-712 name/version of the asset, facilitatorAddress, …) */
  extra: Record<string, unknown>;
}

/** One `upto` payment: the buyer's v2 payload and the requirements it must satisfy. */
export interface UptoPayment {
  /** the x402 v2 PaymentPayload exactly as the buyer sent it (PAYMENT-SIGNATURE decoded) */
  payload: PaymentPayloadV2;
  requirements: UptoRequirements;
}

/** An x402 settle response (v1 and v2 share the shape; `network` is `base` or `eip155:8453`). */
export interface SettleResponse {
  success: boolean;
  transaction: string;
  network: string;
  payer?: string;
  errorReason?: string;
  /** `upto`: the amount settled (atomic units, "0" for a settle of 0) */
  amount?: string;
}

/**
 * What went wrong, as data. The kinds split by one question: can money have moved?
 *
 * Nothing moved (the caller may answer 402, or 503 and let the buyer retry the same payment):
 * - `invalid`: the payment does not satisfy the requirements or is no longer usable (bad
 *   signature, wrong amount/payTo, expired, nonce already used, insufficient funds). `reason` is
 *   the x402 `invalidReason` / `errorReason` code.
 * - `settle_failed`: settlement definitively failed: the transaction reverted, or was refused at
 *   gas estimation, or a facilitator answered `success: false` with a reason of its own
 *   (`transaction` is set when a reverted transaction exists).
 * - `network`: the local facilitator could not reach its RPC before broadcasting anything.
 * - `unreachable`: the HTTP facilitator could not be reached (the connection never opened, or a
 *   verify/supported call failed in transport). A settle request was never sent.
 * - `rejected`: a verify or supported call answered non-2xx or with a body we cannot read.
 *   Never returned by `settle`.
 *
 * Money MAY have moved:
 * - `unknown`: a settlement was sent (transaction broadcast, or the /settle request written) and no
 *   answer proves what happened: a timeout, a connection broken after the request went out, a
 *   non-2xx or unreadable /settle answer (a gateway 502/504 in front of the facilitator), a 5xx
 *   `success: false`, a `success: false` whose reason says the outcome is open (`settlement_pending`,
 *   `unexpected_settle_error`), or a claimed success without a transaction. Reconcile from the chain (the
 *   authorization's nonce says whether it was used; `transaction` when known), never re-settle:
 *   SPEC funding rule 6, 409 `reconciling`.
 */
export type FacilitatorFailureKind = "invalid" | "settle_failed" | "network" | "unreachable" | "rejected" | "unknown";

export interface FacilitatorFailure {
  kind: FacilitatorFailureKind;
  /** Human-readable, safe to log (never contains signatures or keys). */
  message: string;
  /** x402 reason code when the facilitator gave one (e.g. `invalid_exact_evm_signature`). */
  reason?: string;
  /** The authorization's signer, when known. */
  payer?: Address;
  /** Settlement transaction, when one was broadcast. */
  transaction?: Hex;
  /** HTTP status of the facilitator's answer, when one came (`rejected`, `unknown`). */
  status?: number;
}

/**
 * What a failed settle proves (THE rule; funding answers from it):
 * - `refused`: nothing moved and this payment cannot settle as sent (402, sign a new one);
 * - `not_sent`: nothing moved, the settlement never left (503; the same payment may be retried);
 * - `unknown`: money may have moved (409 `reconciling`; the chain decides, never settle again).
 */
export type SettleVerdict = "refused" | "not_sent" | "unknown";

export function settleVerdict(f: FacilitatorFailure): SettleVerdict {
  switch (f.kind) {
    case "invalid":
    case "settle_failed":
      return "refused";
    case "unreachable":
    case "network":
      return "not_sent";
    case "rejected":
    case "unknown":
      return "unknown";
  }
}

export type FacilitatorResult<T> = { ok: true; value: T } | { ok: false; failure: FacilitatorFailure };

export interface VerifyOk {
  /** The authorization's signer (`authorization.from`), checksummed. */
  payer: Address;
}

/** A successful settle; `UptoSettleOk` (an upto settle) may carry transaction "" (amount 0, nothing sent). */
export interface SettleOk<Tx extends Hex | "" = Hex> {
  /** Settlement transaction hash (mined and successful for the local facilitator). */
  transaction: Tx;
  payer: Address;
  /** The network as the facilitator named it in the version it spoke (`base`, `eip155:8453`). */
  network: string;
  /** The facilitator's x402 settle response, ready for a payment-response header. */
  response: SettleResponse;
}

/** An `upto` settle: transaction "" when the amount was 0 and nothing was sent on chain. */
export type UptoSettleOk = SettleOk<Hex | "">;

/**
 * `GET /supported` (x402's SupportedResponse, networks left as strings: `base` for v1 kinds,
 * `eip155:8453` for v2 ones). Every kind the facilitator lists, whatever its scheme.
 */
export interface SupportedOk {
  kinds: { x402Version: number; scheme: string; network: string; extra?: Record<string, unknown> }[];
}

/**
 * An x402 facilitator for `exact` EIP-3009 payments, in either protocol version: the port takes a
 * version-neutral `ExactPayment` and each adapter writes the envelope it speaks. Never throws for
 * payment or transport problems; every outcome is a `FacilitatorResult`.
 */
export interface Facilitator {
  readonly kind: "local" | "http";
  verify(payment: ExactPayment): Promise<FacilitatorResult<VerifyOk>>;
  /** Resolves after the settlement is final (local: receipt mined) or definitively failed. */
  settle(payment: ExactPayment): Promise<FacilitatorResult<SettleOk>>;
  supported(): Promise<FacilitatorResult<SupportedOk>>;
  /** Checks an x402 v2 `upto` payment (Permit2 witness signature, max, payTo, time window, funds). */
  verifyUpto(p: UptoPayment): Promise<FacilitatorResult<VerifyOk>>;
  /**
   * Settles `amountMicroUsdc` (0 ≤ amount ≤ max) of an `upto` payment. Amount 0: nothing is sent
   * on chain and the result is ok with transaction "" (the x402 upto facilitator answers a zero
   * settle with success and an empty transaction; the authorization stays unused until its
   * deadline). Same failure kinds and `settleVerdict` rules as `settle`.
   */
  settleUpto(p: UptoPayment, amountMicroUsdc: bigint): Promise<FacilitatorResult<UptoSettleOk>>;
}

const uint = z.string().regex(/^\d+$/, { message: "must be a non-negative integer" });
const evmAddress = z.string().regex(/^0x[0-9a-fA-F]{40}$/) as unknown as z.ZodType<Address>;

/**
 * x402's `exact` EVM payload (an EIP-3009 authorization and its signature), the same in both
 * versions: the rules of x402 1.x's `ExactEvmPayloadSchema` (amounts of at most 18 digits).
 */
export const ExactEvmPayloadSchema = z.object({
  signature: z.string().regex(/^0x[0-9a-fA-F]+$/) as unknown as z.ZodType<Hex>,
  authorization: z.object({
    from: evmAddress,
    to: evmAddress,
    value: uint.max(18),
    validAfter: uint,
    validBefore: uint,
    nonce: z.string().regex(/^0x[0-9a-fA-F]{64}$/) as unknown as z.ZodType<Hex>,
  }),
});
export type ExactEvmPayload = z.infer<typeof ExactEvmPayloadSchema>;

/** Narrows an x402 payload to the EVM `exact` shape (EIP-3009 authorization + signature). */
export function evmPayloadOf(payload: Pick<PaymentPayloadV1, "payload">): ExactEvmPayload | undefined {
  const parsed = ExactEvmPayloadSchema.safeParse(payload.payload);
  return parsed.success ? parsed.data : undefined;
}

/** x402 v1 network names this service can settle on, by chain id (v2 names are `eip155:<id>`). */
export const NETWORK_BY_CHAIN_ID: Readonly<Record<number, "base" | "base-sepolia">> = {
  8453: "base",
  84532: "base-sepolia",
};
