import type { Db } from "../../adapters/db.js";
import { releaseBody } from "../../adapters/upstream/client.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import type { VideoRefunds } from "./job-refunds.js";
import { jobById, staleJobs } from "./job-rows.js";
import type { VideoJobTransitions } from "./job-transitions.js";
import type { VideoProvider } from "./provider-protocol.js";

/**
 * What the `video` worker does each tick (SPEC "Video job"; VENICE_API §6): poll the rendering jobs
 * that are due, refund what the provider failed or finished without media, expire what is never
 * delivered. Each job is moved by `VideoJobTransitions` / `VideoRefunds` (one conditional UPDATE),
 * so a concurrent or retried sweep never moves or refunds a job twice.
 */

/** A job not delivered this long after it was queued expires (the provider keeps media ≤ 24 h). */
export const VIDEO_EXPIRE_AFTER_MS = 24 * 60 * 60_000;
/** The worker polls a rendering job this often. */
export const VIDEO_POLL_EVERY_MS = 10_000;
/** A job whose media is ready waits for its buyer; the worker looks at it again this much later. */
export const VIDEO_READY_RECHECK_MS = 5 * 60_000;

export interface VideoSweeperDeps {
  db: Db;
  clock: Clock;
  provider: VideoProvider;
  transitions: VideoJobTransitions;
  refunds: VideoRefunds;
}

export class VideoSweeper {
  constructor(private readonly deps: VideoSweeperDeps) {}

  /**
   * Polls the rendering jobs that are due, at most `limit`, each claimed by moving its next poll time
   * first (concurrent sweeps take different jobs). A failure is refunded at once; a render finished
   * without media gets its refund due time; media found waits for its buyer (the body is not read).
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
      const job = await jobById(this.deps.db, id);
      if (!job || (job.status !== "rendering" && job.status !== "completed_no_media")) continue;
      try {
        const seen = await this.deps.provider.observe(job);
        if (seen.kind === "media") {
          releaseBody(seen.body);
          await this.deps.transitions.markReady(job, now, new Date(now.getTime() + VIDEO_READY_RECHECK_MS));
          continue;
        }
        if (await this.deps.transitions.apply(job, seen)) refunded++;
      } catch (err) {
        logger.warn({ err, queueId: job.queueId }, "video poll failed");
      }
    }
    return { polled: due.length, refunded };
  }

  /** Refunds the jobs finished without media whose refund is due (within 6 hours of the finish). */
  async refundDue(limit = 100): Promise<{ refunded: number }> {
    const now = this.deps.clock.now();
    const due = await this.deps.db.videoJob.findMany({
      where: { status: "completed_no_media", refundDueAt: { lte: now } },
      select: { id: true },
      take: limit,
    });
    let refunded = 0;
    for (const { id } of due) {
      if (await this.deps.refunds.tryRefund(id, "completed_without_media")) refunded++;
    }
    return { refunded };
  }

  /**
   * Jobs never delivered within VIDEO_EXPIRE_AFTER_MS expire. One the provider finished (its media
   * was there to retrieve) expires as it is; one it never finished is refunded instead (the buyer got
   * nothing for the charge).
   */
  async expireStale(limit = 100): Promise<{ expired: number; refunded: number }> {
    const now = this.deps.clock.now();
    const cutoff = new Date(now.getTime() - VIDEO_EXPIRE_AFTER_MS);
    const stale = await staleJobs(this.deps.db, cutoff, limit);
    let expired = 0;
    let refunded = 0;
    for (const job of stale) {
      if (job.completedAt === null || job.status === "completed_no_media") {
        if (await this.deps.refunds.tryRefund(job.id, "never_finished")) refunded++;
        continue;
      }
      // only a rendering job: one that turned finished-without-media meanwhile is owed its refund
      if (await this.deps.transitions.expire(job, ["rendering"], null)) {
        expired++;
        await this.deps.provider.deleteMedia(job).catch(() => undefined);
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
}
