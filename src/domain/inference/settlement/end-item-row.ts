import type { AttemptRecord, Modality, RouteKind } from "../pipeline/session.js";
import type { EndItem, EndVideoJob } from "./end-item.js";

/**
 * An `EndItem` as Postgres reads it: the fields of the SQL composite type `svc_end_item`, one each
 * (`svc_end_batch` reads the JSON into it by name; test/integration/inference/settlement-contract.test.ts
 * fails if the two disagree), bigints as decimal strings. Only the settlement's store builds it, at
 * the commit.
 */
export interface EndItemRow {
  request: string;
  support: string;
  account: string;
  api_key: string | null;
  route: RouteKind;
  modality: Modality;
  model: string;
  stream: boolean;
  status: EndItem["status"];
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
  returns: EscrowReturnRow[];
  attempts: AttemptRecord[];
  video: VideoJobRow | null;
  payment: string | null;
}

/** A queued video job as `svc_end_items` reads it (`i.video->>'…'`) into `video_jobs`. */
export interface VideoJobRow {
  id: string;
  queue_id: string;
  upstream_queue_id: string;
  upstream_quote: string;
  body: Record<string, unknown>;
  download_url: string | null;
}

/** A give-back as `svc_end_items` reads it. */
export type EscrowReturnRow = { holder: string; amount: string } & ({ account: string } | { offer: string });

const NO_RETURNS: EscrowReturnRow[] = [];

/** The SQL row of an ended request (see `EndItemRow`). */
export function endItemRow(i: EndItem): EndItemRow {
  const c = i.charge;
  return {
    request: i.requestId,
    support: i.supportReference,
    account: i.accountId,
    api_key: i.apiKeyId,
    route: i.route,
    modality: i.modality,
    model: i.model,
    stream: i.stream,
    status: i.status,
    error_code: i.errorCode,
    ceiling: i.ceilingCents,
    admitted: i.admittedMaxTokens,
    attempt_count: i.attemptCount,
    started: i.startedAt.toISOString(),
    first_byte: i.firstByteAt?.toISOString() ?? null,
    now: i.endedAt.toISOString(),
    offer: c ? c.offerId : null,
    key: c ? c.upstreamKeyId : null,
    supplier: c ? c.supplierAccountId : null,
    price: c ? c.priceCentsPerDollar : null,
    burn: c ? c.burnMicroDiem.toString() : null,
    gross: c ? c.grossMicroUsdc.toString() : null,
    fee: c ? c.feeMicroUsdc.toString() : null,
    share: c ? c.supplierMicroUsdc.toString() : null,
    clear: c ? c.clearId : null,
    prompt: c ? c.promptTokens : null,
    completion: c ? c.completionTokens : null,
    cached: c ? c.cachedTokens : null,
    cache_write: c ? c.cacheWriteTokens : null,
    buyer_holder: c ? c.buyerHolder : null,
    offer_holder: c ? c.offerHolder : null,
    returns:
      i.returns.length === 0
        ? NO_RETURNS
        : i.returns.map((r) =>
            "accountId" in r
              ? { holder: r.holder, account: r.accountId, amount: r.amountMicroUsdc.toString() }
              : { holder: r.holder, offer: r.offerId, amount: r.amountMicroDiem.toString() },
          ),
    attempts: recordedAttempts(i),
    video: i.rows.videoJob ? videoJobRow(i.rows.videoJob) : null,
    payment: i.paymentId,
  };
}

const NO_ATTEMPTS: AttemptRecord[] = [];

/**
 * The attempts a request's record stores (`inference_requests.attempts`): none when it was charged
 * on its one attempt and that attempt succeeded at its clear's key, offer and price (the clear is
 * that attempt; the view `inference_request_attempts` reads it back, its start as the request's),
 * every one otherwise. The lone successful attempt is most requests, and its JSON was the largest
 * part of the append (docs/decisions.md "A lone successful attempt is its clear").
 */
export function recordedAttempts(i: EndItem): AttemptRecord[] {
  const c = i.charge;
  const a = i.attempts[0];
  if (
    c &&
    a &&
    i.attempts.length === 1 &&
    i.attemptCount === 1 &&
    a.ordinal === 1 &&
    a.outcome === "succeeded" &&
    a.key === c.upstreamKeyId &&
    a.offer === c.offerId &&
    a.price === c.priceCentsPerDollar &&
    a.status === null &&
    a.detail === null &&
    a.ended === i.endedAt.toISOString()
  )
    return NO_ATTEMPTS;
  return i.attempts;
}

function videoJobRow(j: EndVideoJob): VideoJobRow {
  return {
    id: j.id,
    queue_id: j.queueId,
    upstream_queue_id: j.upstreamQueueId,
    upstream_quote: j.upstreamQuoteMicroDiem.toString(),
    body: j.body,
    download_url: j.downloadUrl,
  };
}

/** A batch of ended requests as the `svc_end_batch` functions take it (`$1::jsonb`). */
export function endItemsJson(items: readonly EndItem[]): string {
  return JSON.stringify(items.map(endItemRow));
}
