import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import {
  releaseBody,
  type UpstreamBody,
  type UpstreamClient,
  type UpstreamFailure,
} from "../../adapters/upstream/client.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { Metrics } from "../../lib/metrics.js";
import { formatDecimal6 } from "../../lib/money.js";
import { refundClear } from "../ledger/ledger.js";

/**
 * Video jobs after they are queued (SPEC "Video job" state table, quote rule 6; VENICE_API §6):
 * retrieve (JSON status while rendering, the mp4 exactly once, then 410), complete (provider media
 * deleted), and what the worker does — poll rendering jobs, refund what the provider failed or
 * finished without media, expire what is never delivered. Every transition is one conditional
 * UPDATE on the job's status, so concurrent retrieves, pollers and retried worker jobs move a job
 * once: the mp4 goes to one caller, a refund happens once (with its ledger journal in the same
 * transaction: `refundVideoJob`).
 */

/** A job the provider finished without serving media is refunded this long after (SPEC: within 6 hours). */
export const NO_MEDIA_REFUND_AFTER_MS = 60 * 60_000;
/** A job not delivered this long after it was queued expires (the provider keeps media ≤ 24 h). */
export const VIDEO_EXPIRE_AFTER_MS = 24 * 60 * 60_000;
/** The worker polls a rendering job this often. */
export const VIDEO_POLL_EVERY_MS = 10_000;
/** A job whose media is ready waits for its buyer; the worker looks at it again this much later. */
export const VIDEO_READY_RECHECK_MS = 5 * 60_000;
/** An upstream retrieve gives up after this long. */
const RETRIEVE_TIMEOUT_MS = 30_000;
const RUNNING = /^(processing|pending|queued|in_progress|running|starting)$/i;
const FAILED = /^(failed|failure|error|cancelled|canceled)$/i;

export type VideoJobStatus = "rendering" | "delivered" | "completed_no_media" | "failed" | "refunded" | "expired";

/** A job as its buyer sees it (REST status body, GraphQL). */
export interface VideoJobView {
  queueId: string;
  model: string;
  status: VideoJobStatus;
  upstreamStatus: string | null;
  quoteMicroDiem: bigint;
  chargeMicroUsdc: bigint;
  supportReference: string;
  clearingPriceCents: number | null;
  createdAt: Date;
  completedAt: Date | null;
  deliveredAt: Date | null;
  refundedAt: Date | null;
  refundDueAt: Date | null;
  failureReason: string | null;
  pollCount: number;
}

/** What a retrieve answers: a JSON status, or the media (the transport streams it, then says how it went). */
export type RetrieveResult =
  | { kind: "status"; body: Record<string, unknown> }
  | {
      kind: "media";
      contentType: string;
      contentLength: number | null;
      body: UpstreamBody;
      /** the buyer received every byte: the provider's media is deleted */
      delivered(): Promise<void>;
      /** the transfer broke: the job is retrievable again */
      undelivered(): Promise<void>;
    };

/** What one upstream retrieve said about a job. */
type Observation =
  | { kind: "processing"; upstreamStatus: string; averageMs: number | null; elapsedMs: number | null }
  | { kind: "media"; contentType: string; contentLength: number | null; body: UpstreamBody }
  | { kind: "completed_no_media"; upstreamStatus: string }
  | { kind: "failed"; reason: string; upstreamRefunded: boolean; upstreamStatus: string }
  | { kind: "gone" }
  | { kind: "unavailable"; detail: string };

interface JobRow {
  id: string;
  accountId: string;
  requestId: string;
  upstreamKeyId: string;
  model: string;
  queueId: string;
  upstreamQueueId: string;
  status: VideoJobStatus;
  upstreamStatus: string | null;
  quoteMicroDiem: bigint;
  upstreamQuoteMicroDiem: bigint;
  chargeMicroUsdc: bigint;
  downloadUrl: string | null;
  pollCount: number;
  createdAt: Date;
  completedAt: Date | null;
  deliveredAt: Date | null;
  refundedAt: Date | null;
  refundDueAt: Date | null;
  failureReason: string | null;
}

export interface VideoJobsDeps {
  db: Db;
  upstream: UpstreamClient;
  clock: Clock;
  bus: EventBus;
  /** the plaintext secret of the supplier key the job was queued on (any status; never logged) */
  openKey: (upstreamKeyId: string) => Promise<string>;
  metrics?: Metrics;
}

export interface VideoRefund {
  queueId: string;
  buyerMicroUsdc: bigint;
  supplierMicroUsdc: bigint;
  platformMicroUsdc: bigint;
  /** DIEM given back to the offer (0 when the upstream kept it, or the offer is gone) */
  offerMicroDiem: bigint;
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function queueIdOf(raw: unknown): string {
  const q = (raw as { queue_id?: unknown } | null)?.queue_id;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new DomainError("invalid_request", "Body must be a JSON object with queue_id.");
  }
  if (typeof q !== "string" || q.length === 0 || q.length > 100) {
    throw new DomainError("invalid_request", "queue_id (the id POST /v1/video/queue returned) is required.", {
      field: "queue_id",
    });
  }
  return q;
}

export class VideoJobs {
  constructor(private readonly deps: VideoJobsDeps) {}

  // ─────────────────────────── buyer routes ───────────────────────────

  /**
   * `POST /v1/video/retrieve`: 410 for a delivered, refunded or expired job; otherwise the upstream
   * is asked: still rendering → JSON status; the media → claimed for this caller (a concurrent
   * retrieve gets 410) and streamed; failed or rejected → refunded at once, JSON status `failed`;
   * finished without media → JSON `COMPLETED` with the refund's due time. Another buyer's job is 404.
   */
  async retrieve(accountId: string, raw: unknown): Promise<RetrieveResult> {
    const job = await this.owned(accountId, queueIdOf(raw));
    this.refuseFinished(job);
    const seen = await this.observe(job);
    switch (seen.kind) {
      case "media": {
        const stamp = await this.claimDelivery(job);
        if (!stamp) {
          releaseBody(seen.body);
          this.refuseFinished({ ...job, status: "delivered" });
        }
        return {
          kind: "media",
          contentType: seen.contentType,
          contentLength: seen.contentLength,
          body: seen.body,
          delivered: () => this.afterDelivery(job),
          undelivered: () => this.undoDelivery(job, stamp as Date),
        };
      }
      case "unavailable":
        throw new DomainError("upstream_error", "The upstream could not report on this job right now; poll again.", {
          retryAfterSeconds: 5,
        });
      default: {
        await this.apply(job, seen);
        const now = await this.owned(accountId, job.queueId);
        if (seen.kind === "gone" && now.status !== "refunded") this.refuseFinished(now);
        return { kind: "status", body: statusBody(now, seen) };
      }
    }
  }

  /**
   * `POST /v1/video/complete`: deletes the provider's media (a rendering job then expires: it can
   * no longer be delivered). 400 after delivery (the media went with it) and for a refunded or
   * expired job; another buyer's job is 404.
   */
  async complete(accountId: string, raw: unknown): Promise<{ success: true; queueId: string; status: VideoJobStatus }> {
    const job = await this.owned(accountId, queueIdOf(raw));
    if (job.status === "delivered") {
      throw new DomainError("invalid_request", "This job was delivered; its provider media is already deleted.");
    }
    if (job.status === "refunded" || job.status === "expired") {
      throw new DomainError("invalid_request", `This job is ${job.status}; there is no media to delete.`);
    }
    try {
      await this.deleteMedia(job);
    } catch (err) {
      logger.warn({ err, queueId: job.queueId }, "video complete: the upstream did not delete the media");
      throw new DomainError("upstream_error", "The upstream could not delete this job's media right now; retry.", {
        retryAfterSeconds: 5,
      });
    }
    await this.expire(job, ["rendering", "completed_no_media"], this.deps.clock.now());
    return { success: true, queueId: job.queueId, status: "expired" };
  }

  /** The buyer's jobs, newest first (GraphQL). */
  async list(accountId: string, opts: { first: number; status?: VideoJobStatus }): Promise<VideoJobView[]> {
    const rows = await this.deps.db.videoJob.findMany({
      where: { accountId, ...(opts.status ? { status: opts.status } : {}) },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      take: opts.first,
      include: { request: { select: { supportReference: true, clearingPriceCents: true } } },
    });
    return rows.map((r) => viewOf(r as unknown as JobRow, r.request));
  }

  /** One of the buyer's jobs by queue id (404 when not theirs). */
  async view(accountId: string, queueId: string): Promise<VideoJobView> {
    const row = await this.deps.db.videoJob.findUnique({
      where: { queueId },
      include: { request: { select: { supportReference: true, clearingPriceCents: true } } },
    });
    if (!row || row.accountId !== accountId) throw new DomainError("not_found", "No such video job on this account.");
    return viewOf(row as unknown as JobRow, row.request);
  }

  // ─────────────────────────── worker ───────────────────────────

  /**
   * Worker `video` (every few seconds): polls the rendering jobs that are due, at most `limit`, each
   * claimed by moving its next poll time first (concurrent sweeps take different jobs). A failure
   * is refunded at once; a render finished without media gets its refund due time; media found
   * waits for its buyer (the body is not read).
   */
  async pollDue(limit = 50): Promise<{ polled: number; refunded: number }> {
    const now = this.deps.clock.now();
    const next = new Date(now.getTime() + VIDEO_POLL_EVERY_MS);
    const due = await this.deps.db.$queryRaw<{ id: string }[]>`
      UPDATE video_jobs SET next_poll_at = ${next}
       WHERE id IN (SELECT id FROM video_jobs
                     WHERE status IN ('rendering', 'completed_no_media')
                       AND (next_poll_at IS NULL OR next_poll_at <= ${now})
                     ORDER BY next_poll_at NULLS FIRST, created_at
                     LIMIT ${limit} FOR UPDATE SKIP LOCKED)
      RETURNING id`;
    let refunded = 0;
    for (const { id } of due) {
      const job = await this.byId(id);
      if (!job || (job.status !== "rendering" && job.status !== "completed_no_media")) continue;
      try {
        const seen = await this.observe(job);
        if (seen.kind === "media") {
          releaseBody(seen.body);
          // ready: only its expiry is left to watch, so it is looked at again much later
          const later = new Date(now.getTime() + VIDEO_READY_RECHECK_MS);
          await this.deps.db.$executeRaw`
            UPDATE video_jobs SET completed_at = COALESCE(completed_at, ${now}), upstream_status = 'ready',
                   poll_count = poll_count + 1, last_polled_at = ${now}, next_poll_at = ${later}
             WHERE id = ${job.id}::uuid AND status IN ('rendering', 'completed_no_media')`;
          continue;
        }
        if (await this.apply(job, seen)) refunded++;
      } catch (err) {
        logger.warn({ err, queueId: job.queueId }, "video poll failed");
      }
    }
    return { polled: due.length, refunded };
  }

  /** Worker: refunds the jobs finished without media whose refund is due (within 6 hours of the finish). */
  async refundDue(limit = 100): Promise<{ refunded: number }> {
    const now = this.deps.clock.now();
    const due = await this.deps.db.videoJob.findMany({
      where: { status: "completed_no_media", refundDueAt: { lte: now } },
      select: { id: true },
      take: limit,
    });
    let refunded = 0;
    for (const { id } of due) {
      if (await this.tryRefund(id, "completed_without_media")) refunded++;
    }
    return { refunded };
  }

  /**
   * Worker: jobs never delivered within VIDEO_EXPIRE_AFTER_MS expire. One the provider finished (its
   * media was there to retrieve) expires as it is; one it never finished is refunded instead (the
   * buyer got nothing for the charge).
   */
  async expireStale(limit = 100): Promise<{ expired: number; refunded: number }> {
    const now = this.deps.clock.now();
    const cutoff = new Date(now.getTime() - VIDEO_EXPIRE_AFTER_MS);
    const stale = await this.deps.db.videoJob.findMany({
      where: { status: { in: ["rendering", "completed_no_media"] }, createdAt: { lte: cutoff } },
      take: limit,
    });
    let expired = 0;
    let refunded = 0;
    for (const job of stale) {
      if (job.completedAt === null || job.status === "completed_no_media") {
        if (await this.tryRefund(job.id, "never_finished")) refunded++;
        continue;
      }
      // only a rendering job: one that turned finished-without-media meanwhile is owed its refund
      if (await this.expire(job as unknown as JobRow, ["rendering"], null)) {
        expired++;
        await this.deleteMedia(job as unknown as JobRow).catch(() => undefined);
      }
    }
    return { expired, refunded };
  }

  /** One worker tick: polls, due refunds, expiry. */
  async sweep(): Promise<{ polled: number; refunded: number; expired: number }> {
    const polled = await this.pollDue();
    const due = await this.refundDue();
    const stale = await this.expireStale();
    return {
      polled: polled.polled,
      refunded: polled.refunded + due.refunded + stale.refunded,
      expired: stale.expired,
    };
  }

  // ─────────────────────────── the refund ───────────────────────────

  /**
   * THE refund of a video job, exactly once: the job is claimed by a conditional UPDATE (rendering
   * or finished-without-media → refunded) and its clear refunded (`refundClear`: the buyer made
   * whole, the supplier's credit and the fee reversed, journal `refund:<clearId>`) in the same
   * transaction; concurrent or repeated calls (pollers, retried jobs, a crash before the commit)
   * find the job claimed, or redo the whole, and return null. The offer gets its DIEM back only when
   * the upstream refunded its key (a live offer of the same UTC day, within its quantity; a depleted
   * one comes back to life only while its key has no other live offer). Lock order as everywhere:
   * the buyer's account, the offer, the key, the supplier's account.
   */
  async refundVideoJob(jobId: string, why: { reason: string; upstreamRefunded: boolean }): Promise<VideoRefund | null> {
    const now = this.deps.clock.now();
    const out = await this.deps.db.$transaction(async (tx) => {
      const claimed = await tx.$queryRaw<
        { request_id: string; account_id: string; queue_id: string; upstream_key_id: string; upstream_quote: bigint }[]
      >`
        UPDATE video_jobs SET status = 'refunded', refunded_at = ${now}, failure_reason = ${why.reason},
               upstream_refunded = ${why.upstreamRefunded}, next_poll_at = NULL, refund_due_at = NULL
         WHERE id = ${jobId}::uuid AND status IN ('rendering', 'completed_no_media')
        RETURNING request_id, account_id, queue_id, upstream_key_id, upstream_quote_micro_diem AS upstream_quote`;
      const job = claimed[0];
      if (!job) return null;
      const clear = await tx.$queryRaw<{ id: string; offer_id: string; burn: bigint }[]>`
        SELECT id, offer_id, burn_micro_diem AS burn FROM clears WHERE request_id = ${job.request_id}::uuid`;
      const c = clear[0];
      if (!c) throw new Error(`video job ${jobId} has no clear`);
      // lock order: buyer, offer, key (refundClear then takes the buyer again and the supplier)
      await tx.$executeRaw`SELECT 1 FROM accounts WHERE id = ${job.account_id}::uuid FOR NO KEY UPDATE`;
      let offerMicroDiem = 0n;
      if (why.upstreamRefunded) {
        const burn = BigInt(c.burn);
        const back = await tx.$executeRaw`
          UPDATE offers o
             SET remaining_micro_diem = o.remaining_micro_diem + ${burn},
                 status = CASE WHEN o.status = 'depleted' THEN 'active'::offer_status ELSE o.status END,
                 ended_at = CASE WHEN o.status = 'depleted' THEN NULL ELSE o.ended_at END,
                 updated_at = ${now}
           WHERE o.id = ${c.offer_id}::uuid AND o.expires_at > ${now}
             AND o.remaining_micro_diem + ${burn} <= o.quantity_micro_diem
             AND (o.status IN ('active', 'paused')
                  OR (o.status = 'depleted' AND NOT EXISTS (
                        SELECT 1 FROM offers x WHERE x.upstream_key_id = o.upstream_key_id AND x.id <> o.id
                           AND x.status IN ('active', 'paused'))))`;
        if (back === 1) offerMicroDiem = burn;
        await tx.$executeRaw`
          UPDATE upstream_keys SET last_balance_micro_diem = last_balance_micro_diem + ${BigInt(job.upstream_quote)}
           WHERE id = ${job.upstream_key_id}::uuid AND last_balance_micro_diem IS NOT NULL`;
      }
      const r = await refundClear(tx, { clearId: c.id, at: now });
      if (!r) throw new Error(`video job ${jobId}: its clear was already refunded`);
      return { job, r, offerMicroDiem };
    });
    if (!out) return null;
    this.deps.metrics?.videoRefund(why.reason);
    const at = now.toISOString();
    this.deps.bus.publish("videoJobUpdated", out.job.account_id, {
      accountId: out.job.account_id,
      queueId: out.job.queue_id,
      status: "refunded",
      at,
    });
    this.deps.bus.publish("balanceChanged", out.r.buyerAccountId, {
      accountId: out.r.buyerAccountId,
      kind: "refund",
      at,
    });
    if (out.offerMicroDiem > 0n) this.deps.bus.publish("routingChanged", { kind: "supply_changed" });
    return {
      queueId: out.job.queue_id,
      buyerMicroUsdc: out.r.buyerMicroUsdc,
      supplierMicroUsdc: out.r.supplierMicroUsdc,
      platformMicroUsdc: out.r.platformMicroUsdc,
      offerMicroDiem: out.offerMicroDiem,
    };
  }

  // ─────────────────────────── internals ───────────────────────────

  private async owned(accountId: string, queueId: string): Promise<JobRow> {
    const job = await this.deps.db.videoJob.findUnique({ where: { queueId } });
    if (!job || job.accountId !== accountId) {
      throw new DomainError("not_found", "No video job with this queue_id on this account.");
    }
    return job as unknown as JobRow;
  }

  private async byId(id: string): Promise<JobRow | null> {
    return (await this.deps.db.videoJob.findUnique({ where: { id } })) as unknown as JobRow | null;
  }

  /** 410 for a job whose media is gone for good. */
  private refuseFinished(job: Pick<JobRow, "status" | "failureReason">): void {
    const why: Partial<Record<VideoJobStatus, string>> = {
      delivered: "This video was already delivered; its media is gone.",
      refunded: `This job was refunded (${job.failureReason ?? "failed"}); no media will come.`,
      expired: "This job expired before it was delivered; its media is gone.",
    };
    const message = why[job.status];
    if (message) throw new DomainError("gone", message, { state: job.status });
  }

  /** Asks the upstream about a job, on the key that queued it. */
  private async observe(job: JobRow): Promise<Observation> {
    let secret: string;
    try {
      secret = await this.deps.openKey(job.upstreamKeyId);
    } catch (err) {
      return { kind: "unavailable", detail: `key: ${(err as Error).message}` };
    }
    const res = await this.deps.upstream.post(
      "/video/retrieve",
      secret,
      { model: job.model, queue_id: job.upstreamQueueId, delete_media_on_completion: false },
      { signal: AbortSignal.timeout(RETRIEVE_TIMEOUT_MS) },
    );
    if (!res.ok) return failureObservation(res.failure);
    const type = String(res.value.headers["content-type"] ?? "").toLowerCase();
    if (type.startsWith("video/") || type.startsWith("application/octet-stream")) {
      const len = Number(res.value.headers["content-length"]);
      return {
        kind: "media",
        contentType: type.startsWith("video/") ? type.split(";")[0] || "video/mp4" : "video/mp4",
        contentLength: Number.isFinite(len) && len >= 0 ? len : null,
        body: res.value.body,
      };
    }
    let json: Record<string, unknown>;
    try {
      json = (await res.value.body.json()) as Record<string, unknown>;
    } catch {
      return { kind: "unavailable", detail: "unreadable retrieve answer" };
    }
    const status = String(json?.status ?? "");
    if (RUNNING.test(status)) {
      return {
        kind: "processing",
        upstreamStatus: status,
        averageMs: num(json.average_execution_time),
        elapsedMs: num(json.execution_duration),
      };
    }
    if (FAILED.test(status)) {
      const text = JSON.stringify(json);
      return {
        kind: "failed",
        reason: "provider_failed",
        upstreamRefunded: json.credits_refunded === true || /refunded/i.test(text),
        upstreamStatus: status,
      };
    }
    if (/^completed$/i.test(status)) {
      if (job.downloadUrl) return this.download(job.downloadUrl);
      return { kind: "completed_no_media", upstreamStatus: status };
    }
    return { kind: "unavailable", detail: `unknown status ${status.slice(0, 40)}` };
  }

  /** Private models: the media behind the queue answer's download_url (unauthenticated GET). */
  private async download(url: string): Promise<Observation> {
    const r = await this.deps.upstream.getMedia(url, AbortSignal.timeout(RETRIEVE_TIMEOUT_MS));
    if (!r.ok) return r.failure.status === 404 ? { kind: "gone" } : failureObservation(r.failure);
    const len = Number(r.value.headers["content-length"]);
    return {
      kind: "media",
      contentType: "video/mp4",
      contentLength: Number.isFinite(len) && len >= 0 ? len : null,
      body: r.value.body,
    };
  }

  /** Records what a poll saw (status, counts); refunds a failure; marks a finish without media. */
  private async apply(job: JobRow, seen: Observation): Promise<boolean> {
    const now = this.deps.clock.now();
    if (seen.kind === "failed") {
      return (
        (await this.refundVideoJob(job.id, { reason: seen.reason, upstreamRefunded: seen.upstreamRefunded })) !== null
      );
    }
    if (seen.kind === "processing") {
      await this.deps.db.$executeRaw`
        UPDATE video_jobs SET upstream_status = ${seen.upstreamStatus}, poll_count = poll_count + 1, last_polled_at = ${now}
         WHERE id = ${job.id}::uuid AND status IN ('rendering', 'completed_no_media')`;
      return false;
    }
    if (seen.kind === "completed_no_media") {
      const due = new Date(now.getTime() + NO_MEDIA_REFUND_AFTER_MS);
      const n = await this.deps.db.$executeRaw`
        UPDATE video_jobs SET status = 'completed_no_media', upstream_status = ${seen.upstreamStatus},
               completed_at = COALESCE(completed_at, ${now}), refund_due_at = COALESCE(refund_due_at, ${due}),
               poll_count = poll_count + 1, last_polled_at = ${now}
         WHERE id = ${job.id}::uuid AND status IN ('rendering', 'completed_no_media')`;
      if (n === 1 && job.status === "rendering") this.publish(job, "completed_no_media");
      return false;
    }
    if (seen.kind === "gone") {
      // the provider no longer has it: a finished job's media expired; an unfinished one never came
      if (job.completedAt === null) {
        return (await this.refundVideoJob(job.id, { reason: "provider_lost_job", upstreamRefunded: false })) !== null;
      }
      await this.expire(job, ["rendering", "completed_no_media"], null);
    }
    return false;
  }

  /**
   * A job moves to `expired` (no refund) if it is still in one of `from`; its buyer hears of it.
   * `mediaDeletedAt`: when the buyer had the provider delete the media. True when it moved.
   */
  private async expire(job: JobRow, from: VideoJobStatus[], mediaDeletedAt: Date | null): Promise<boolean> {
    const n = await this.deps.db.$executeRaw`
      UPDATE video_jobs SET status = 'expired', next_poll_at = NULL,
             media_deleted_at = COALESCE(${mediaDeletedAt}::timestamptz, media_deleted_at)
       WHERE id = ${job.id}::uuid AND status::text = ANY(${from})`;
    if (n === 1) this.publish(job, "expired");
    return n === 1;
  }

  /** The worker's refund of one job: a failure is logged and retried next tick, never holding up the others. */
  private async tryRefund(jobId: string, reason: string): Promise<boolean> {
    try {
      return (await this.refundVideoJob(jobId, { reason, upstreamRefunded: false })) !== null;
    } catch (err) {
      logger.warn({ err, jobId }, "video refund failed");
      return false;
    }
  }

  /** Claims the media for one caller; null when another caller (or a state change) got there first. */
  private async claimDelivery(job: JobRow): Promise<Date | null> {
    const now = this.deps.clock.now();
    const n = await this.deps.db.$executeRaw`
      UPDATE video_jobs SET status = 'delivered', delivered_at = ${now}, completed_at = COALESCE(completed_at, ${now}),
             refund_due_at = NULL, next_poll_at = NULL
       WHERE id = ${job.id}::uuid AND status IN ('rendering', 'completed_no_media')`;
    return n === 1 ? now : null;
  }

  /** Every byte reached the buyer: the provider's copy is deleted (best effort; it expires anyway). */
  private async afterDelivery(job: JobRow): Promise<void> {
    this.publish(job, "delivered");
    await this.deleteMedia(job).catch((err: unknown) =>
      logger.warn({ err, queueId: job.queueId }, "media delete failed"),
    );
    await this.deps.db
      .$executeRaw`UPDATE video_jobs SET media_deleted_at = ${this.deps.clock.now()} WHERE id = ${job.id}::uuid`;
  }

  /** The transfer broke before the end: the claim is undone, so the buyer can retrieve again. */
  private async undoDelivery(job: JobRow, stamp: Date): Promise<void> {
    await this.deps.db.$executeRaw`
      UPDATE video_jobs SET status = ${job.status === "completed_no_media" ? "completed_no_media" : "rendering"}::video_job_status,
             delivered_at = NULL, refund_due_at = ${job.refundDueAt}
       WHERE id = ${job.id}::uuid AND status = 'delivered' AND delivered_at = ${stamp}`;
  }

  private async deleteMedia(job: JobRow): Promise<void> {
    const secret = await this.deps.openKey(job.upstreamKeyId);
    const r = await this.deps.upstream.postJson(
      "/video/complete",
      secret,
      { model: job.model, queue_id: job.upstreamQueueId },
      { timeoutMs: RETRIEVE_TIMEOUT_MS },
    );
    // 404: already gone; anything else is logged by the caller
    if (!r.ok && r.failure.status !== 404) throw new Error(`complete: ${r.failure.kind} ${r.failure.status ?? ""}`);
  }

  private publish(job: Pick<JobRow, "accountId" | "queueId">, status: VideoJobStatus): void {
    this.deps.bus.publish("videoJobUpdated", job.accountId, {
      accountId: job.accountId,
      queueId: job.queueId,
      status,
      at: this.deps.clock.now().toISOString(),
    });
  }
}

function failureObservation(f: UpstreamFailure): Observation {
  if (f.status === 404) return { kind: "gone" };
  if (f.status === 422) {
    const err = (f.body as { error?: { type?: unknown; credits_refunded?: unknown } } | undefined)?.error;
    return {
      kind: "failed",
      reason: err?.type === "provider_content_policy" ? "content_policy" : "provider_rejected",
      upstreamRefunded: err?.credits_refunded === true,
      upstreamStatus: "422",
    };
  }
  return { kind: "unavailable", detail: `${f.kind}${f.status ? ` ${f.status}` : ""}` };
}

function viewOf(
  r: JobRow,
  request: { supportReference: string; clearingPriceCents: number | null } | null,
): VideoJobView {
  return {
    queueId: r.queueId,
    model: r.model,
    status: r.status,
    upstreamStatus: r.upstreamStatus,
    quoteMicroDiem: r.quoteMicroDiem,
    chargeMicroUsdc: r.chargeMicroUsdc,
    supportReference: request?.supportReference ?? "",
    clearingPriceCents: request?.clearingPriceCents ?? null,
    createdAt: r.createdAt,
    completedAt: r.completedAt,
    deliveredAt: r.deliveredAt,
    refundedAt: r.refundedAt,
    refundDueAt: r.refundDueAt,
    failureReason: r.failureReason,
    pollCount: r.pollCount,
  };
}

/**
 * The JSON status body of a retrieve (SPEC: branch on content type): the upstream's `status` as it
 * said it (`PROCESSING`, `COMPLETED`, `failed`), the job's `state` here, and the refund when there is one.
 */
function statusBody(job: JobRow, seen: Observation): Record<string, unknown> {
  const base: Record<string, unknown> = { queue_id: job.queueId, model: job.model, state: job.status };
  if (seen.kind === "processing") {
    return {
      ...base,
      status: "PROCESSING",
      upstream_status: seen.upstreamStatus,
      average_execution_time: seen.averageMs,
      execution_duration: seen.elapsedMs,
    };
  }
  if (job.status === "refunded") {
    return {
      ...base,
      status: "failed",
      refunded: true,
      reason: job.failureReason,
      refunded_usdc: formatDecimal6(job.chargeMicroUsdc),
    };
  }
  if (job.status === "completed_no_media") {
    return {
      ...base,
      status: "COMPLETED",
      media: false,
      refund_due_at: job.refundDueAt?.toISOString() ?? null,
      message: "The provider finished without serving media; the charge will be refunded automatically.",
    };
  }
  return { ...base, status: job.upstreamStatus ?? "PROCESSING" };
}
