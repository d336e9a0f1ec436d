import type { AttemptRecord, InferenceSession, Modality, RouteKind, Usage } from "./session.js";
import { effectiveCeiling } from "./session.js";
import type { IncompleteStream } from "./usage.js";

/**
 * Request endings: THE contract between the pipeline and Postgres. Each ended request is one
 * `EndItem` (the SQL composite type `svc_end_item`, one field each; a test fails if the two
 * disagree), and endings are group-committed by `svc_end_batch` (`SettlementStore.commit`, batched
 * in `ending.ts`): for each item, in one transaction with the others of its batch, the request and
 * attempt records, and for a charge the buyer debit, the supplier credit and the platform fee
 * (ledger, double entry), the offer's remaining DIEM and the clear; plus what the request's escrow
 * slices give back.
 */

/** An escrow give-back: part of a holder's slice of a buyer (account) or an offer goes back. */
export type EscrowReturn = { holder: string; amount: string } & ({ account: string } | { offer: string });

/**
 * How a request ends with its attempt's answer (the pipeline's one ending, see `InferencePipeline.run`):
 * `settled` on the usage the upstream reported (with `extra` rows the modality writes in the same
 * transaction), `incomplete` — a stream that ended without its usage, billed on what the buyer was
 * shown (`billIncomplete`) —, `flagged` — answered, the provider flagged it (`reason`, e.g. a content
 * violation) and burned `burnMicroDiem` on the key for it (`burnedOnKey`): charged that, never above
 * the admitted maximum, `reason` recorded as the error code — or `uncharged`: answered, but the
 * provider did not charge for it (nothing charged, no clear; `reason` recorded as the error code). A
 * request that ends without an answer is aborted (`InferencePipeline.abort`).
 */
export type Ending =
  | { kind: "settled"; usage: Usage; extra?: EndRows }
  | { kind: "incomplete"; stream: IncompleteStream }
  | { kind: "flagged"; reason: string; burnMicroDiem: bigint }
  | { kind: "uncharged"; reason: string };

/**
 * Rows a modality writes with its charge, in the ending's transaction: the settlement's one hook
 * (`endItem` maps each onto its `svc_end_item` field; the SQL writes the table).
 */
export type EndRows = { table: "video_jobs"; row: EndVideo };

/**
 * A queued video job, written with its charge in the same transaction (`video_jobs`): our queue id,
 * the upstream's, the upstream quote (micro-DIEM, decimal string), the body as queued and, for private
 * models, where the upstream will serve the media.
 */
export interface EndVideo {
  id: string;
  queue_id: string;
  upstream_queue_id: string;
  upstream_quote: string;
  body: Record<string, unknown>;
  download_url: string | null;
}

/** One ended request (fields of the SQL type `svc_end_item`; bigints as decimal strings). */
export interface EndItem {
  request: string;
  support: string;
  account: string;
  /** null for a request paid per request (no key) */
  api_key: string | null;
  route: RouteKind;
  modality: Modality;
  model: string;
  stream: boolean;
  status: "succeeded" | "incomplete" | "failed";
  error_code: string | null;
  ceiling: number;
  admitted: number | null;
  attempt_count: number;
  started: string;
  first_byte: string | null;
  now: string;
  offer: string | null;
  key: string | null;
  supplier: string | null;
  price: number | null;
  burn: string | null;
  gross: string | null;
  fee: string | null;
  share: string | null;
  clear: string | null;
  prompt: number | null;
  completion: number | null;
  cached: number | null;
  /** cache-write tokens (`inference_requests.cache_write_tokens`) */
  cache_write: number | null;
  buyer_holder: string | null;
  offer_holder: string | null;
  returns: EscrowReturn[];
  attempts: AttemptRecord[];
  /** a queued video job (charged items only; from `EndRows`) */
  video: EndVideo | null;
  /** the pay-per-request payment that funds it (`request_payments`; its charge is booked against it) */
  payment: string | null;
}

/** The charge part of an item (null fields for a request that ends without one). */
export type EndCharge = Pick<
  EndItem,
  | "offer"
  | "key"
  | "supplier"
  | "price"
  | "burn"
  | "gross"
  | "fee"
  | "share"
  | "clear"
  | "prompt"
  | "completion"
  | "cached"
  | "cache_write"
  | "buyer_holder"
  | "offer_holder"
>;

const NO_CHARGE: EndCharge = {
  offer: null,
  key: null,
  supplier: null,
  price: null,
  burn: null,
  gross: null,
  fee: null,
  share: null,
  clear: null,
  prompt: null,
  completion: null,
  cached: null,
  cache_write: null,
  buyer_holder: null,
  offer_holder: null,
};

/**
 * The ending of a request as one item: its record, its attempts, its charge (when given) and the
 * give-backs of every slice it touched (none for an idle slice that lingers). Its admitted maximum leaves the buyer's slice and the
 * give-backs leave the slices now; `undo` puts the give-backs back if the item does not commit.
 */
export function endItem(
  session: InferenceSession,
  now: Date,
  /** an idle slice stays with the process (see `Slice.giveBack`, `EscrowGiveBack`) */
  lingering: boolean,
  end: { status: EndItem["status"]; error_code: string | null; charge?: EndCharge; extra?: EndRows },
): { item: EndItem; undo: () => void } {
  if (session.buyerSlice) {
    session.buyerSlice.release(session.plan.maxChargeMicroUsdc);
    session.buyerSlice = null;
  }
  const returns: EscrowReturn[] = [];
  const touched = [...session.touched];
  const undo: Array<() => void> = [
    () => {
      for (const t of touched) session.touched.add(t);
    },
  ];
  const nowMs = performance.now();
  for (const slice of touched) {
    const back = slice.giveBack(lingering, nowMs);
    if (back > 0n) {
      returns.push(
        slice.kind === "buyer"
          ? { holder: slice.holder, account: slice.id, amount: back.toString() }
          : { holder: slice.holder, offer: slice.id, amount: back.toString() },
      );
      undo.push(() => slice.restore(back));
    }
  }
  session.touched.clear();
  const item: EndItem = {
    request: session.requestId,
    support: session.supportReference,
    account: session.accountId,
    api_key: session.apiKeyId || null,
    route: session.route,
    modality: session.model.modality,
    model: session.model.id,
    stream: session.stream,
    status: end.status,
    error_code: end.error_code,
    ceiling: effectiveCeiling(session),
    admitted: session.plan.admittedMaxTokens || null,
    attempt_count: session.tried.length,
    started: session.startedAt.toISOString(),
    first_byte: session.firstByteAt?.toISOString() ?? null,
    now: now.toISOString(),
    ...(end.charge ?? NO_CHARGE),
    returns,
    attempts: session.attempts,
    // the one place the extra rows meet the item's shape
    video: end.extra?.table === "video_jobs" ? end.extra.row : null,
    payment: session.payment?.id ?? null,
  };
  return {
    item,
    undo: () => {
      for (const u of undo) u();
    },
  };
}
