import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import type { Metrics } from "../../lib/metrics.js";
import { refundClear } from "../ledger/ledger.js";
import { foldVideoClearOf } from "../ledger/live-figures.js";
import type { WebhookOutbox } from "../webhooks/outbox.js";
import { videoRefundedData } from "../webhooks/payloads.js";

/**
 * The refund of a video job (SPEC "Video job": a failure refunded at once, a finish without media
 * within 6 hours, a job never finished when it expires): the buyer made whole, the supplier's credit
 * and the fee reversed, and the offer's DIEM given back when the upstream refunded its key, exactly
 * once however many pollers, retrieves and retried worker jobs ask.
 */

export interface VideoRefund {
  queueId: string;
  buyerMicroUsdc: bigint;
  supplierMicroUsdc: bigint;
  platformMicroUsdc: bigint;
  /** DIEM given back to the offer (0 when the upstream kept it, or the offer is gone) */
  offerMicroDiem: bigint;
}

export interface VideoRefundsDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  metrics?: Metrics;
  /** `video.refunded` is written to the outbox in the refund's transaction (never lost, never early) */
  webhooks?: Pick<WebhookOutbox, "emit" | "dispatch">;
}

export class VideoRefunds {
  constructor(private readonly deps: VideoRefundsDeps) {}

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
        {
          request_id: string;
          account_id: string;
          queue_id: string;
          model: string;
          upstream_key_id: string;
          upstream_quote: bigint;
        }[]
      >`
        UPDATE video_jobs SET status = 'refunded', refunded_at = ${now}, failure_reason = ${why.reason},
               upstream_refunded = ${why.upstreamRefunded}, next_poll_at = NULL, refund_due_at = NULL
         WHERE id = ${jobId}::uuid AND status IN ('rendering', 'completed_no_media')
        RETURNING request_id, account_id, queue_id, model, upstream_key_id, upstream_quote_micro_diem AS upstream_quote`;
      const job = claimed[0];
      if (!job) return null;
      // the charge's holder folds it first (before any account is locked: the fold's lock order)
      await foldVideoClearOf(tx, job.request_id);
      const clear = await tx.$queryRaw<{ id: string; offer_id: string; burn: bigint }[]>`
        SELECT id, offer_id, burn_micro_diem AS burn FROM clears
         WHERE request_id = ${job.request_id}::uuid AND modality = 'video'`;
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
      // the refunded charge no longer counts toward the key's budget (its request's start day)
      await tx.$executeRaw`
        UPDATE api_key_spend s SET spent_micro_usdc = GREATEST(s.spent_micro_usdc - ${r.buyerMicroUsdc}, 0)
          FROM inference_requests q
         WHERE q.id = ${job.request_id}::uuid AND s.api_key_id = q.api_key_id
           AND s.day = (q.started_at AT TIME ZONE 'UTC')::date`;
      const hooks =
        (await this.deps.webhooks?.emit(
          tx,
          job.account_id,
          "video.refunded",
          videoRefundedData({
            queueId: job.queue_id,
            model: job.model,
            reason: why.reason,
            refundedMicroUsdc: r.buyerMicroUsdc,
            refundedAt: now,
          }),
        )) ?? [];
      return { job, r, offerMicroDiem, hooks };
    });
    if (!out) return null;
    await this.deps.webhooks?.dispatch(out.hooks);
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

  /** The worker's refund of one job: a failure is logged and retried next tick, never holding up the others. */
  async tryRefund(jobId: string, reason: string): Promise<boolean> {
    try {
      return (await this.refundVideoJob(jobId, { reason, upstreamRefunded: false })) !== null;
    } catch (err) {
      logger.warn({ err, jobId }, "video refund failed");
      return false;
    }
  }
}
