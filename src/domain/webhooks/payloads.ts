import { maskedKey, soldMicroDiem } from "../../contract/supply.js";
import { formatDecimal6 } from "../../lib/money.js";
import type { EventData } from "./outbox.js";

/**
 * The `data` of each event (docs/decisions.md "Webhooks"): the resource's id and its
 * amounts as six-decimal strings, under the names its REST resource uses (the offer's as
 * `GET /v1/supply/offers/mine`, the video job's as `POST /v1/video/retrieve`, the payout's as
 * `GET /v1/supply/ledger`…). Never a secret, another account's data, or (in a buyer's event) who
 * supplied it.
 */

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** `credit.confirmed`: a payment's pending credit became confirmed (spendable). */
export function creditConfirmedData(p: {
  id: string;
  kind: string;
  amountMicroUsdc: bigint;
  settlementTxHash: string | null;
  confirmations: number;
  confirmedAt: Date;
}): EventData {
  return {
    paymentId: p.id,
    kind: p.kind,
    amountUsdc: formatDecimal6(p.amountMicroUsdc),
    transaction: p.settlementTxHash,
    confirmations: p.confirmations,
    confirmedAt: iso(p.confirmedAt),
  };
}

/** `balance.low`: a charge took the confirmed balance below the endpoint's threshold. */
export function balanceLowData(confirmedMicroUsdc: bigint, thresholdMicroUsdc: bigint): EventData {
  return { confirmedUsdc: formatDecimal6(confirmedMicroUsdc), thresholdUsdc: formatDecimal6(thresholdMicroUsdc) };
}

/** `key.budget_exhausted`: a key's spend reached its limit for the period (or a request was refused for it). */
export function keyBudgetExhaustedData(k: {
  id: string;
  name: string;
  limitMicroUsdc: bigint;
  spentMicroUsdc: bigint;
  limitReset: string;
  resetsAt: Date | null;
}): EventData {
  const remaining = k.limitMicroUsdc - k.spentMicroUsdc;
  return {
    keyId: k.id,
    name: k.name,
    limitUsdc: formatDecimal6(k.limitMicroUsdc),
    spentUsdc: formatDecimal6(k.spentMicroUsdc),
    remainingUsdc: formatDecimal6(remaining > 0n ? remaining : 0n),
    limitReset: k.limitReset,
    resetsAt: iso(k.resetsAt),
  };
}

/** `video.completed`: the provider finished the render; the media waits at `POST /v1/video/retrieve`. */
export function videoCompletedData(j: { queueId: string; model: string; state: string; completedAt: Date }): EventData {
  return { queue_id: j.queueId, model: j.model, state: j.state, completed_at: iso(j.completedAt) };
}

/** `video.refunded`: the job's charge went back to the buyer. */
export function videoRefundedData(j: {
  queueId: string;
  model: string;
  reason: string;
  refundedMicroUsdc: bigint;
  refundedAt: Date;
}): EventData {
  return {
    queue_id: j.queueId,
    model: j.model,
    state: "refunded",
    reason: j.reason,
    refunded_usdc: formatDecimal6(j.refundedMicroUsdc),
    refunded_at: iso(j.refundedAt),
  };
}

/** An offer's columns as `offerData` reads them (SQL: `OFFER_EVENT_COLUMNS`). */
export interface OfferEventRow {
  id: string;
  accountId: string;
  upstreamKeyId: string;
  priceCentsPerDollar: number;
  quantityMicroDiem: bigint;
  remainingMicroDiem: bigint;
  status: string;
  expiresAt: Date;
  endedAt: Date | null;
}

/** The columns of `OfferEventRow`, for a RETURNING or SELECT on `offers` (alias-free). */
export const OFFER_EVENT_COLUMNS = `id::text AS "id", account_id::text AS "accountId",
  upstream_key_id::text AS "upstreamKeyId", price_cents_per_dollar AS "priceCentsPerDollar",
  quantity_micro_diem AS "quantityMicroDiem", remaining_micro_diem AS "remainingMicroDiem",
  status::text AS "status", expires_at AS "expiresAt", ended_at AS "endedAt"`;

/** `offer.depleted`, `offer.expired`: the supplier's own offer, as its REST record names it. */
export function offerData(o: OfferEventRow): EventData {
  const quantity = BigInt(o.quantityMicroDiem);
  const remaining = BigInt(o.remainingMicroDiem);
  return {
    id: o.id,
    upstreamKeyId: o.upstreamKeyId,
    priceCentsPerDollar: o.priceCentsPerDollar,
    quantityDiem: formatDecimal6(quantity),
    remainingDiem: formatDecimal6(remaining),
    soldDiem: formatDecimal6(soldMicroDiem({ quantityMicroDiem: quantity, remainingMicroDiem: remaining })),
    status: o.status,
    expiresAt: iso(o.expiresAt),
    endedAt: iso(o.endedAt),
  };
}

/** `upstream_key.unhealthy`: the upstream refused the supplier's key itself (invalid or revoked); it is out of routing. */
export function upstreamKeyUnhealthyData(k: {
  id: string;
  label: string;
  secretLast4: string;
  authFailedAt: Date;
}): EventData {
  return {
    id: k.id,
    label: k.label,
    status: "auth_failed",
    maskedKey: maskedKey(k.secretLast4),
    authFailedAt: iso(k.authFailedAt),
  };
}

/** `payout.sent`: the supplier's payout transfer was sent (its hash recorded). */
export function payoutSentData(p: {
  id: string;
  period: string;
  toAddress: string;
  amountMicroUsdc: bigint;
  txHash: string;
  submittedAt: Date | null;
}): EventData {
  return {
    id: p.id,
    period: p.period,
    toAddress: p.toAddress,
    amountUsdc: formatDecimal6(p.amountMicroUsdc),
    status: "submitted",
    transaction: p.txHash,
    submittedAt: iso(p.submittedAt),
  };
}

/** `webhook.disabled`: another endpoint of the account stopped receiving events. */
export function webhookDisabledData(e: {
  id: string;
  url: string;
  disabledReason: string;
  disabledAt: Date;
}): EventData {
  return {
    webhookId: e.id,
    url: e.url,
    status: "disabled",
    disabledReason: e.disabledReason,
    disabledAt: iso(e.disabledAt),
  };
}

/** `webhook.test`: sent on request to one endpoint. */
export function webhookTestData(endpointId: string): EventData {
  return { webhookId: endpointId, message: "A test event from svc: your endpoint receives and verifies webhooks." };
}
