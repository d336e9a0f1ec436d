import type { PaymentRequirementsV2 } from "@x402/core/schemas";
import { type Address, isAddress, toFunctionSelector } from "viem";
import { permit2NonceSlot } from "../chain/upto-reads.js";
import { type UptoAuthorizationFacts, uptoAuthorizationOf, uptoRequirementsV2, v2Network } from "./envelopes.js";
import type { FacilitatorFailure, UptoPayment, UptoSettleOk } from "./types.js";

/**
 * What both facilitator adapters check of an `upto` payment before a facilitator sees it, and
 * the requirement each call sends: verify sends the maximum as `amount`; settle sends the ACTUAL
 * amount (the x402 upto spec: the settle request's requirement carries the amount to charge,
 * ≤ the signed `permitted.amount`), and a settle of 0 sends nothing at all.
 */

// @x402/evm upto reason codes (its facilitator/errors) this module produces itself
export const UPTO_NETWORK_MISMATCH = "invalid_upto_evm_network_mismatch";
export const UPTO_SCHEME_MISMATCH = "invalid_upto_evm_scheme";
export const UPTO_SETTLEMENT_EXCEEDS_AMOUNT = "invalid_upto_evm_payload_settlement_exceeds_amount";
export const PERMIT2_AMOUNT_MISMATCH = "permit2_amount_mismatch";
const UPTO_TRANSACTION_FAILED = "invalid_upto_evm_transaction_failed";
const PERMIT2_NONCE_USED = "permit2_invalid_nonce";
/** what @x402/evm answers when the Permit2 settle simulation fails for a reason its reads cannot name */
const PERMIT2_SIMULATION_FAILED = "permit2_simulation_failed";
/** Permit2's InvalidNonce() (not in the proxy ABI @x402/evm decodes reverts with: matched by selector) */
const PERMIT2_INVALID_NONCE_SELECTOR = toFunctionSelector("InvalidNonce()");

/** How one scheme names its settle failures (the local facilitator's judgement). */
export interface SchemeReasons {
  /** reason for a settlement transaction that was mined and reverted, or failed otherwise */
  transactionFailed: string;
  /** the reason when `message` (a revert at gas estimation) says the payment is spent, else undefined */
  nonceUsed(message: string): string | undefined;
}

export const UPTO_REASONS: SchemeReasons = {
  transactionFailed: UPTO_TRANSACTION_FAILED,
  nonceUsed: (m) =>
    /InvalidNonce/.test(m) || m.toLowerCase().includes(PERMIT2_INVALID_NONCE_SELECTOR) ? PERMIT2_NONCE_USED : undefined,
};

/**
 * @x402/evm names a Permit2 settle simulation it cannot explain `permit2_simulation_failed`; a
 * spent nonce (the payment was settled already, or the buyer invalidated it) is the usual cause:
 * name it `permit2_invalid_nonce` when Permit2's bitmap says so. Any other outcome passes unchanged,
 * as does this one when the bitmap cannot be read.
 */
export async function namingSpentNonce<T extends { ok: boolean; failure?: FacilitatorFailure }>(
  result: T,
  facts: UptoAuthorizationFacts,
  readNonceWord: (owner: Address, wordPos: bigint) => Promise<bigint>,
): Promise<T> {
  if (result.ok || result.failure?.kind !== "invalid" || result.failure.reason !== PERMIT2_SIMULATION_FAILED)
    return result;
  try {
    const { wordPos, bit } = permit2NonceSlot(facts.nonce);
    if (((await readNonceWord(facts.payer, wordPos)) & bit) === 0n) return result;
  } catch {
    return result;
  }
  const message = "payment rejected: the authorization's Permit2 nonce is already spent";
  return { ...result, failure: { ...result.failure, reason: PERMIT2_NONCE_USED, message } };
}

export type UptoChecked =
  | { ok: true; facts: UptoAuthorizationFacts; requirements: PaymentRequirementsV2 }
  | { ok: false; failure: FacilitatorFailure };

function invalid(reason: string, message: string, facts?: UptoAuthorizationFacts): UptoChecked {
  return { ok: false, failure: { kind: "invalid", reason, message, ...(facts ? { payer: facts.payer } : {}) } };
}

/**
 * The payment's signed authorization and the v2 requirement to send, or why it cannot be sent:
 * a payload that is not an x402 v2 `upto` Permit2 payload, requirements that are not addresses,
 * a payload for another network, or a signed maximum other than the requirement's (all `invalid`,
 * nothing sent). With `settleAmount`: also an amount outside 0..max, and the requirement's
 * `amount` becomes the settle amount.
 */
export function checkUpto(p: UptoPayment, settleAmount?: bigint): UptoChecked {
  const facts = uptoAuthorizationOf(p.payload);
  if (facts === undefined || p.payload.x402Version !== 2)
    return invalid("invalid_payload", "not an x402 v2 upto Permit2 payload");
  const r = p.requirements;
  if (!isAddress(r.payTo) || !isAddress(r.asset) || r.maxAmountMicroUsdc < 0n)
    return invalid("invalid_payload", "malformed requirement fields", facts);
  if (p.payload.accepted?.scheme !== "upto") return invalid(UPTO_SCHEME_MISMATCH, "the payload is not for upto", facts);
  if (p.payload.accepted.network !== v2Network(r.chainId))
    return invalid(
      UPTO_NETWORK_MISMATCH,
      `the payload is for ${p.payload.accepted.network}; the requirement is for ${v2Network(r.chainId)}`,
      facts,
    );
  if (facts.maxAmount !== r.maxAmountMicroUsdc)
    return invalid(
      PERMIT2_AMOUNT_MISMATCH,
      `the payload authorises ${facts.maxAmount}; the requirement's maximum is ${r.maxAmountMicroUsdc}`,
      facts,
    );
  const requirements = uptoRequirementsV2(r);
  if (settleAmount === undefined) return { ok: true, facts, requirements };
  if (settleAmount < 0n || settleAmount > r.maxAmountMicroUsdc)
    return invalid(
      UPTO_SETTLEMENT_EXCEEDS_AMOUNT,
      `cannot settle ${settleAmount} of an authorization for at most ${r.maxAmountMicroUsdc}`,
      facts,
    );
  return { ok: true, facts, requirements: { ...requirements, amount: settleAmount.toString() } };
}

/**
 * A settle of 0: nothing is owed, so nothing is sent, neither on chain nor to a facilitator.
 * The x402 upto spec ("no on-chain transaction is required; the authorization simply expires
 * unused") and @x402/evm's facilitator (success, transaction "", amount "0") agree; @x402/evm
 * re-verifies first, which we skip on purpose: a buyer who spent the funds since verify must not
 * turn an uncharged request into a failure. The Permit2 nonce stays unspent until the deadline.
 */
export function zeroSettle(p: UptoPayment, facts: UptoAuthorizationFacts): { ok: true; value: UptoSettleOk } {
  const network = v2Network(p.requirements.chainId);
  return {
    ok: true,
    value: {
      transaction: "",
      payer: facts.payer,
      network,
      response: { success: true, transaction: "", network, payer: facts.payer, amount: "0" },
    },
  };
}
