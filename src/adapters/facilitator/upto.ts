import type { PaymentRequirementsV2 } from "@x402/core/schemas";
import { isAddress } from "viem";
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
