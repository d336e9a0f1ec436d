import type { Hold, Slice } from "../escrow/escrow.js";
import type { Attempt, AttemptRecord, InferenceSession, Modality, RouteKind } from "../pipeline/session.js";

/**
 * Request endings: what the pipeline hands the settlement. Each ended request is one `EndItem`, in
 * the domain's names and units (money in bigint); the settlement's store writes it as the SQL
 * composite type `svc_end_item` at the commit alone (`endItemRow`, end-item-row.ts: a test fails if
 * the row and the type disagree), and endings are group-committed by `svc_end_batch` (`SettlementStore.commit`, batched
 * in `settlement.ts`): for each item, in one transaction with the others of its batch, the request and
 * attempt records, and for a charge the buyer debit, the supplier credit and the platform fee
 * (ledger, double entry), the offer's remaining DIEM and the clear; plus what the request's escrow
 * slices give back.
 */

/** An escrow give-back: part of a holder's slice of a buyer (micro-USDC) or of an offer (micro-DIEM) goes back. */
export type EscrowReturn =
  | { holder: string; accountId: string; amountMicroUsdc: bigint }
  | { holder: string; offerId: string; amountMicroDiem: bigint };

/**
 * Rows a modality writes with its charge, in the ending's transaction, in the domain's names and
 * units: its `meter` returns them with the answer's usage, the ending carries them through unread,
 * and `endItemRow` (end-item-row.ts) alone knows the field of `svc_end_item` each goes to (and the
 * SQL the table). A part is present only when the modality wrote one.
 */
export interface EndRows {
  /** a queued video job (its row commits with its charge: a charge never exists without its job) */
  videoJob?: EndVideoJob;
}

/**
 * A queued video job: its row id, our queue id (the buyer's), the upstream's, the upstream's quote,
 * the body as queued and, for private models, where the upstream will serve the media.
 */
export interface EndVideoJob {
  id: string;
  queueId: string;
  upstreamQueueId: string;
  upstreamQuoteMicroDiem: bigint;
  body: Record<string, unknown>;
  downloadUrl: string | null;
}

/** No rows beside the request's own. */
export const NO_ROWS: EndRows = Object.freeze({});

/** The charge of an ended request (a request that ends without one has none). */
export interface EndCharge {
  offerId: string;
  upstreamKeyId: string;
  supplierAccountId: string;
  priceCentsPerDollar: number;
  burnMicroDiem: bigint;
  grossMicroUsdc: bigint;
  feeMicroUsdc: bigint;
  supplierMicroUsdc: bigint;
  /** the clear's id */
  clearId: string;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  /** the holder of the buyer's slice it was charged from (null: paid per request) */
  buyerHolder: string | null;
  offerHolder: string;
}

/** One ended request, as the domain states it (`endItemRow` is its SQL row). */
export interface EndItem {
  requestId: string;
  supportReference: string;
  accountId: string;
  /** null for a request paid per request (no key) */
  apiKeyId: string | null;
  route: RouteKind;
  modality: Modality;
  model: string;
  stream: boolean;
  status: "succeeded" | "incomplete" | "failed";
  errorCode: string | null;
  /** the effective ceiling it was planned and cleared at */
  ceilingCents: number;
  /** the completion cap sent upstream (null where the price is not per token) */
  admittedMaxTokens: number | null;
  attemptCount: number;
  startedAt: Date;
  firstByteAt: Date | null;
  endedAt: Date;
  charge: EndCharge | null;
  returns: EscrowReturn[];
  attempts: AttemptRecord[];
  /** the modality's rows written with the charge (charged items only; its `meter`'s) */
  rows: EndRows;
  /** the pay-per-request payment that funds it (`request_payments`; its charge is booked against it) */
  paymentId: string | null;
}

/**
 * What an ending does to this process's escrow slices, as data: the holds it ends (the buyer's
 * maximum, the attempt in flight's burn; a hold released already stays so), the charge leaving the
 * slices, and every slice the request took into or drew on, each looked at for a give-back. The
 * settlement applies it with the item's commit and undoes the spends and give-backs if that does
 * not commit (`Settlement.commit`).
 */
export interface EscrowPlan {
  readonly release: readonly Hold[];
  readonly spend: ReadonlyArray<{ readonly slice: Slice; readonly amount: bigint }>;
  readonly giveBack: readonly Slice[];
}

/** How a request ends, as `end` is told it. */
export interface EndOf {
  status: EndItem["status"];
  errorCode: string | null;
  /** the attempt in flight that ends with the request, and its record (null: none in flight) */
  attempt: { attempt: Attempt; record: AttemptRecord } | null;
  charge?: EndCharge;
  extra?: EndRows;
}

/**
 * THE end of a request (pure): its `EndItem` — record, attempts, charge — and its `EscrowPlan`. The
 * item's give-backs (`returns`) are what the settlement finds applying the plan.
 */
export function endItem(session: InferenceSession, now: Date, end: EndOf): { item: EndItem; escrow: EscrowPlan } {
  const { trail } = session;
  const inFlight = end.attempt?.attempt ?? null;
  const release: Hold[] = [];
  if (session.buyerHold) release.push(session.buyerHold);
  if (inFlight) release.push(inFlight.offerHold);
  const spend: { slice: Slice; amount: bigint }[] = [];
  if (end.charge && inFlight) {
    if (session.buyerHold) spend.push({ slice: session.buyerHold.slice, amount: end.charge.grossMicroUsdc });
    spend.push({ slice: inFlight.offerHold.slice, amount: end.charge.burnMicroDiem });
  }
  const item: EndItem = {
    requestId: session.requestId,
    supportReference: session.supportReference,
    accountId: session.accountId,
    apiKeyId: session.apiKeyId || null,
    route: session.route,
    modality: session.model.modality,
    model: session.model.id,
    stream: session.stream,
    status: end.status,
    errorCode: end.errorCode,
    ceilingCents: session.effectiveCeilingCents,
    admittedMaxTokens: session.plan.admittedMaxTokens || null,
    attemptCount: trail.tried.length,
    startedAt: session.startedAt,
    firstByteAt: trail.firstByteAt,
    endedAt: now,
    charge: end.charge ?? null,
    returns: [],
    attempts: end.attempt ? [...trail.records, end.attempt.record] : [...trail.records],
    rows: end.extra ?? NO_ROWS,
    paymentId: session.payment?.id ?? null,
  };
  return { item, escrow: { release, spend, giveBack: [...trail.touched] } };
}
