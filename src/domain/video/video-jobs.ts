import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import { releaseBody, type UpstreamBody, type UpstreamClient } from "../../adapters/upstream/client.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { Metrics } from "../../lib/metrics.js";
import type { WebhookOutbox } from "../webhooks/outbox.js";
import { VideoRefunds } from "./job-refunds.js";
import {
  jobByQueueId,
  jobViews,
  ownedJobView,
  type VideoJobRow,
  type VideoJobStatus,
  type VideoJobView,
} from "./job-rows.js";
import { VideoSweeper } from "./job-sweeper.js";
import { VideoJobTransitions } from "./job-transitions.js";
import { VideoProvider } from "./provider-protocol.js";

/**
 * Video jobs after they are queued (SPEC "Video job" state table, quote rule 6; VENICE_API §6): the
 * buyer's use cases — retrieve (a status while rendering, the mp4 exactly once, then 410), complete
 * (provider media deleted), list and view — and the worker's (`sweep` and its three steps). The
 * lifecycle is split by concern: `job-transitions.ts` (the state machine), `provider-protocol.ts`
 * (asking the provider, reading its answers), `job-refunds.ts` (the refund, exactly once),
 * `job-sweeper.ts` (the worker's sweeps) and `job-rows.ts` (the typed reads of the job's row).
 */

/** A retrieve's JSON answer, as data: the job as it is now and, while rendering, what the provider said. */
export interface VideoJobStatusReport {
  queueId: string;
  model: string;
  status: VideoJobStatus;
  upstreamStatus: string | null;
  failureReason: string | null;
  chargeMicroUsdc: bigint;
  refundDueAt: Date | null;
  /** the provider's answer when it was still rendering (null when it said anything else) */
  progress: { upstreamStatus: string; averageMs: number | null; elapsedMs: number | null } | null;
}

/** What a retrieve answers: a JSON status, or the media (the transport streams it, then says how it went). */
export type RetrieveResult =
  | { kind: "status"; report: VideoJobStatusReport }
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

export interface VideoJobsDeps {
  db: Db;
  upstream: UpstreamClient;
  clock: Clock;
  bus: EventBus;
  /** the plaintext secret of the supplier key the job was queued on (any status; never logged) */
  openKey: (upstreamKeyId: string) => Promise<string>;
  metrics?: Metrics;
  /** `video.completed` and `video.refunded` go to the outbox in the job's transition (never lost, never early) */
  webhooks?: Pick<WebhookOutbox, "emit" | "dispatch">;
}

export class VideoJobs {
  private readonly provider: VideoProvider;
  private readonly refunds: VideoRefunds;
  private readonly transitions: VideoJobTransitions;
  private readonly sweeper: VideoSweeper;

  constructor(private readonly deps: VideoJobsDeps) {
    const { db, clock, bus } = deps;
    this.provider = new VideoProvider({ upstream: deps.upstream, openKey: deps.openKey });
    this.refunds = new VideoRefunds({ db, clock, bus, metrics: deps.metrics, webhooks: deps.webhooks });
    this.transitions = new VideoJobTransitions({ db, clock, bus, refunds: this.refunds, webhooks: deps.webhooks });
    this.sweeper = new VideoSweeper({
      db,
      clock,
      provider: this.provider,
      transitions: this.transitions,
      refunds: this.refunds,
    });
  }

  // ─────────────────────────── buyer ───────────────────────────

  /**
   * `POST /v1/video/retrieve`: 410 for a delivered, refunded or expired job; otherwise the upstream
   * is asked: still rendering → JSON status; the media → claimed for this caller (a concurrent
   * retrieve gets 410) and streamed; failed or rejected → refunded at once, JSON status `failed`;
   * finished without media → JSON `COMPLETED` with the refund's due time. Another buyer's job is 404.
   * `queueId`: the contract's parse of the body (`parseVideoJobRef`).
   */
  async retrieve(accountId: string, queueId: string): Promise<RetrieveResult> {
    const job = await this.owned(accountId, queueId);
    refuseFinished(job);
    const seen = await this.provider.observe(job);
    switch (seen.kind) {
      case "media": {
        const stamp = await this.transitions.claimDelivery(job);
        if (!stamp) {
          releaseBody(seen.body);
          refuseFinished({ ...job, status: "delivered" });
        }
        return {
          kind: "media",
          contentType: seen.contentType,
          contentLength: seen.contentLength,
          body: seen.body,
          delivered: () => this.afterDelivery(job),
          undelivered: () => this.transitions.undoDelivery(job, stamp as Date),
        };
      }
      case "unavailable":
        throw new DomainError("upstream_error", "The upstream could not report on this job right now; poll again.", {
          retryAfterSeconds: 5,
        });
      default: {
        await this.transitions.apply(job, seen);
        const now = await this.owned(accountId, job.queueId);
        if (seen.kind === "gone" && now.status !== "refunded") refuseFinished(now);
        const progress =
          seen.kind === "processing"
            ? { upstreamStatus: seen.upstreamStatus, averageMs: seen.averageMs, elapsedMs: seen.elapsedMs }
            : null;
        return { kind: "status", report: { ...reportOf(now), progress } };
      }
    }
  }

  /**
   * `POST /v1/video/complete`: deletes the provider's media (a rendering job then expires: it can
   * no longer be delivered). 400 after delivery (the media went with it) and for a refunded or
   * expired job; another buyer's job is 404.
   */
  async complete(
    accountId: string,
    queueId: string,
  ): Promise<{ success: true; queueId: string; status: VideoJobStatus }> {
    const job = await this.owned(accountId, queueId);
    if (job.status === "delivered") {
      throw new DomainError("invalid_request", "This job was delivered; its provider media is already deleted.");
    }
    if (job.status === "refunded" || job.status === "expired") {
      throw new DomainError("invalid_request", `This job is ${job.status}; there is no media to delete.`);
    }
    try {
      await this.provider.deleteMedia(job);
    } catch (err) {
      logger.warn({ err, queueId: job.queueId }, "video complete: the upstream did not delete the media");
      throw new DomainError("upstream_error", "The upstream could not delete this job's media right now; retry.", {
        retryAfterSeconds: 5,
      });
    }
    await this.transitions.expire(job, ["rendering", "completed_no_media"], this.deps.clock.now());
    return { success: true, queueId: job.queueId, status: "expired" };
  }

  /** The buyer's jobs, newest first (GraphQL). */
  list(accountId: string, opts: { first: number; status?: VideoJobStatus }): Promise<VideoJobView[]> {
    return jobViews(this.deps.db, accountId, opts);
  }

  /** One of the buyer's jobs by queue id (404 when not theirs). */
  async view(accountId: string, queueId: string): Promise<VideoJobView> {
    const view = await ownedJobView(this.deps.db, accountId, queueId);
    if (!view) throw new DomainError("not_found", "No such video job on this account.");
    return view;
  }

  // ─────────────────────────── worker (job-sweeper.ts) ───────────────────────────

  /** Worker `video`: polls the rendering jobs that are due (`VideoSweeper.pollDue`). */
  pollDue(limit?: number): Promise<{ polled: number; refunded: number }> {
    return this.sweeper.pollDue(limit);
  }

  /** Worker: refunds the finishes without media that are due (`VideoSweeper.refundDue`). */
  refundDue(limit?: number): Promise<{ refunded: number }> {
    return this.sweeper.refundDue(limit);
  }

  /** Worker: expires or refunds the jobs never delivered (`VideoSweeper.expireStale`). */
  expireStale(limit?: number): Promise<{ expired: number; refunded: number }> {
    return this.sweeper.expireStale(limit);
  }

  /** One worker tick: polls, due refunds, expiry (`VideoSweeper.sweep`). */
  sweep(): Promise<{ polled: number; refunded: number; expired: number }> {
    return this.sweeper.sweep();
  }

  // ─────────────────────────── internals ───────────────────────────

  private async owned(accountId: string, queueId: string): Promise<VideoJobRow> {
    const job = await jobByQueueId(this.deps.db, queueId);
    if (!job || job.accountId !== accountId) {
      throw new DomainError("not_found", "No video job with this queue_id on this account.");
    }
    return job;
  }

  /** Every byte reached the buyer: the provider's copy is deleted (best effort; it expires anyway). */
  private async afterDelivery(job: VideoJobRow): Promise<void> {
    this.transitions.publish(job, "delivered");
    await this.provider
      .deleteMedia(job)
      .catch((err: unknown) => logger.warn({ err, queueId: job.queueId }, "media delete failed"));
    await this.transitions.markMediaDeleted(job);
  }
}

/** 410 for a job whose media is gone for good. */
function refuseFinished(job: Pick<VideoJobRow, "status" | "failureReason">): void {
  const why: Partial<Record<VideoJobStatus, string>> = {
    delivered: "This video was already delivered; its media is gone.",
    refunded: `This job was refunded (${job.failureReason ?? "failed"}); no media will come.`,
    expired: "This job expired before it was delivered; its media is gone.",
  };
  const message = why[job.status];
  if (message) throw new DomainError("gone", message, { state: job.status });
}

function reportOf(job: VideoJobRow): Omit<VideoJobStatusReport, "progress"> {
  return {
    queueId: job.queueId,
    model: job.model,
    status: job.status,
    upstreamStatus: job.upstreamStatus,
    failureReason: job.failureReason,
    chargeMicroUsdc: job.chargeMicroUsdc,
    refundDueAt: job.refundDueAt,
  };
}
