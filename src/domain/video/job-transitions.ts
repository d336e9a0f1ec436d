import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Clock } from "../../lib/clock.js";
import { type HoldMoved, moveHeldShare } from "../ledger/ledger.js";
import type { OutboxTx, WebhookOutbox } from "../webhooks/outbox.js";
import { videoCompletedData } from "../webhooks/payloads.js";
import type { VideoRefunds } from "./job-refunds.js";
import type { VideoJobRow, VideoJobStatus } from "./job-rows.js";
import type { Observation } from "./provider-protocol.js";

/**
 * The state machine of a video job (SPEC "Video job"; docs/decisions.md "Job states"):
 * `rendering` → `delivered` | `completed_no_media` → `refunded` | `expired`. Every move is one
 * conditional UPDATE on the job's current status, so concurrent retrieves, pollers and retried
 * worker jobs move a job once; a move that happened tells its buyer (`videoJobUpdated`). The move to
 * `refunded` carries the money and is `VideoRefunds.refundVideoJob`. The moves to a final state
 * that is not a refund (`delivered`, `expired`) release the supplier's held share to payable in
 * their own transaction, and undoing a delivery puts it back on hold (docs/decisions.md "Payout
 * hold"): a payout never pays a share whose job may still be refunded.
 */

/** A job the provider finished without serving media is refunded this long after (SPEC: within 6 hours). */
export const NO_MEDIA_REFUND_AFTER_MS = 60 * 60_000;

export interface VideoJobTransitionsDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  refunds: VideoRefunds;
  /** `video.completed` is written to the outbox with the job's first completion (never lost, never twice) */
  webhooks?: Pick<WebhookOutbox, "emit" | "dispatch">;
}

/** A job row as a completing write returns it, with its completion time before the write. */
interface CompletedRow {
  account_id: string;
  request_id: string;
  queue_id: string;
  model: string;
  status: string;
  was_completed_at: Date | null;
}

export class VideoJobTransitions {
  constructor(private readonly deps: VideoJobTransitionsDeps) {}

  /**
   * Records what a retrieve or poll saw (status, counts); refunds a failure, or an unfinished job the
   * provider lost; marks a finish without media; expires a finished job whose media is gone. The
   * media itself is not handled here (`claimDelivery`, `markReady`). True when it refunded the job.
   */
  async apply(job: VideoJobRow, seen: Observation): Promise<boolean> {
    const now = this.deps.clock.now();
    if (seen.kind === "failed") {
      return (
        (await this.deps.refunds.refundVideoJob(job.id, {
          reason: seen.reason,
          upstreamRefunded: seen.upstreamRefunded,
        })) !== null
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
        return (
          (await this.deps.refunds.refundVideoJob(job.id, { reason: "provider_lost_job", upstreamRefunded: false })) !==
          null
        );
      }
      await this.expire(job, ["rendering", "completed_no_media"], null);
    }
    return false;
  }

  /**
   * A poll found the media ready: only its expiry is left to watch, so the job is looked at again at
   * `recheckAt` (its buyer fetches it; the body is not read here).
   */
  async markReady(job: Pick<VideoJobRow, "id">, now: Date, recheckAt: Date): Promise<void> {
    const hooks = await this.deps.db.$transaction(async (tx) => {
      const moved = await tx.$queryRaw<CompletedRow[]>`
        UPDATE video_jobs v SET completed_at = COALESCE(v.completed_at, ${now}), upstream_status = 'ready',
               poll_count = v.poll_count + 1, last_polled_at = ${now}, next_poll_at = ${recheckAt}
          FROM (SELECT id, completed_at FROM video_jobs WHERE id = ${job.id}::uuid FOR UPDATE) was
         WHERE v.id = was.id AND v.status IN ('rendering', 'completed_no_media')
        RETURNING v.account_id, v.request_id, v.queue_id, v.model, v.status::text AS status,
                  was.completed_at AS was_completed_at`;
      return this.completed(tx, moved[0], now);
    });
    await this.deps.webhooks?.dispatch(hooks);
  }

  /** `video.completed` for a job completed for the first time by the write that returned `row`. */
  private async completed(tx: OutboxTx, row: CompletedRow | undefined, now: Date): Promise<string[]> {
    if (!row || row.was_completed_at !== null || !this.deps.webhooks) return [];
    return this.deps.webhooks.emit(
      tx,
      row.account_id,
      "video.completed",
      videoCompletedData({ queueId: row.queue_id, model: row.model, state: row.status, completedAt: now }),
    );
  }

  /**
   * A job moves to `expired` (no refund) if it is still in one of `from`; its buyer hears of it.
   * `mediaDeletedAt`: when the buyer had the provider delete the media. True when it moved.
   */
  async expire(job: VideoJobRow, from: VideoJobStatus[], mediaDeletedAt: Date | null): Promise<boolean> {
    const { moved, released } = await this.deps.db.$transaction(async (tx) => {
      const n = await tx.$executeRaw`
        UPDATE video_jobs SET status = 'expired', next_poll_at = NULL,
               media_deleted_at = COALESCE(${mediaDeletedAt}::timestamptz, media_deleted_at)
         WHERE id = ${job.id}::uuid AND status::text = ANY(${from})`;
      if (n !== 1) return { moved: false, released: null };
      // final without a refund: the supplier's share is payable now
      return {
        moved: true,
        released: await moveHeldShare(tx, { requestId: job.requestId, videoJobId: job.id, move: "release" }),
      };
    });
    if (moved) this.publish(job, "expired");
    this.publishEarnings(released);
    return moved;
  }

  /**
   * Claims the media for one caller (→ `delivered`); null when another caller (or a state change) got
   * there first. The claim releases the supplier's held share to payable in its transaction.
   */
  async claimDelivery(job: Pick<VideoJobRow, "id">): Promise<Date | null> {
    const now = this.deps.clock.now();
    const { moved, hooks, released } = await this.deps.db.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<CompletedRow[]>`
        UPDATE video_jobs v SET status = 'delivered', delivered_at = ${now},
               completed_at = COALESCE(v.completed_at, ${now}), refund_due_at = NULL, next_poll_at = NULL
          FROM (SELECT id, completed_at FROM video_jobs WHERE id = ${job.id}::uuid FOR UPDATE) was
         WHERE v.id = was.id AND v.status IN ('rendering', 'completed_no_media')
        RETURNING v.account_id, v.request_id, v.queue_id, v.model, v.status::text AS status,
                  was.completed_at AS was_completed_at`;
      const row = rows[0];
      if (!row) return { moved: false, hooks: [] as string[], released: null };
      return {
        moved: true,
        hooks: await this.completed(tx, row, now),
        released: await moveHeldShare(tx, { requestId: row.request_id, videoJobId: job.id, move: "release" }),
      };
    });
    await this.deps.webhooks?.dispatch(hooks);
    this.publishEarnings(released);
    return moved ? now : null;
  }

  /**
   * The transfer broke before the end: the claim `stamp` is undone, so the buyer can retrieve again,
   * and the share its claim released goes back on hold (the job may still be refunded).
   */
  async undoDelivery(job: VideoJobRow, stamp: Date): Promise<void> {
    const reheld = await this.deps.db.$transaction(async (tx) => {
      const n = await tx.$executeRaw`
        UPDATE video_jobs SET status = ${job.status === "completed_no_media" ? "completed_no_media" : "rendering"}::video_job_status,
               delivered_at = NULL, refund_due_at = ${job.refundDueAt}
         WHERE id = ${job.id}::uuid AND status = 'delivered' AND delivered_at = ${stamp}`;
      if (n !== 1) return null;
      return moveHeldShare(tx, { requestId: job.requestId, videoJobId: job.id, move: "rehold" });
    });
    this.publishEarnings(reheld);
  }

  /** The provider's copy of a delivered job's media was asked to go. */
  async markMediaDeleted(job: Pick<VideoJobRow, "id">): Promise<void> {
    await this.deps.db
      .$executeRaw`UPDATE video_jobs SET media_deleted_at = ${this.deps.clock.now()} WHERE id = ${job.id}::uuid`;
  }

  /** Tells the supplier (any process) its held and payable balances moved. */
  private publishEarnings(moved: HoldMoved | null): void {
    if (!moved) return;
    const at = this.deps.clock.now().toISOString();
    const accountId = moved.supplierAccountId;
    this.deps.bus.publish("earningsChanged", accountId, { accountId, kind: `hold:${moved.clearId}`, at });
    this.deps.bus.publish("balanceChanged", accountId, { accountId, kind: "supplier_payable", at });
  }

  /** Tells the job's buyer (any process) it moved to `status`. */
  publish(job: Pick<VideoJobRow, "accountId" | "queueId">, status: VideoJobStatus): void {
    this.deps.bus.publish("videoJobUpdated", job.accountId, {
      accountId: job.accountId,
      queueId: job.queueId,
      status,
      at: this.deps.clock.now().toISOString(),
    });
  }
}
