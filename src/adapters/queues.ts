import { type JobsOptions, Queue } from "bullmq";
import { type TraceCarrier, traceCarrier } from "../lib/tracing.js";
import type { RedisClient } from "./redis/client.js";

/**
 * Every BullMQ queue, declared once with its job names and payloads. Producers fail fast
 * (connection with enableOfflineQueue: false); jobs carry deterministic ids where the event has a
 * natural key, and completed jobs are trimmed.
 */
export const QUEUES = {
  maintenance: "maintenance",
  confirmations: "confirmations",
  reconciliation: "reconciliation",
  expiry: "expiry",
  sync: "sync",
  video: "video",
  payouts: "payouts",
  webhooks: "webhooks",
  /** retirement of old month partitions: long (an export), so never ahead of the maintenance queue's sweeps */
  retention: "retention",
} as const;

export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];

export interface JobPayloads {
  maintenance: { "purge-expired": Record<string, never>; "ensure-partitions": Record<string, never> };
  retention: { retention: Record<string, never> };
  reconciliation: {
    "reconcile-payment": { paymentId: string };
    "reconcile-request-payment": { paymentId: string };
    "scan-chain": Record<string, never>;
  };
  confirmations: { "confirm-pending": Record<string, never> };
  webhooks: { deliver: { eventId: string; attempt: number }; sweep: Record<string, never> };
}

export const DEFAULT_JOB_OPTIONS = {
  removeOnComplete: 1000,
  removeOnFail: 5000,
  attempts: 5,
  backoff: { type: "exponential", delay: 1000 },
} as const;

export type Queues = Record<QueueName, Queue>;

/** Where a job's data carries the trace that added it (W3C `traceparent`/`tracestate`). */
export const JOB_TRACE_FIELD = "_trace";

/** The trace a job was added in, for its worker's CONSUMER span (undefined: none, e.g. a scheduler's run). */
export function jobTrace(data: unknown): TraceCarrier | undefined {
  const carrier = data && typeof data === "object" ? (data as Record<string, unknown>)[JOB_TRACE_FIELD] : undefined;
  return carrier && typeof carrier === "object" ? (carrier as TraceCarrier) : undefined;
}

/**
 * A queue whose jobs continue the trace that added them (docs/operations.md "Traces"): with tracing
 * on and a span active, `add` puts the trace context into the job's data (`JOB_TRACE_FIELD`); the
 * worker's processor starts its CONSUMER span there (workers/processor.ts). Off, the data is
 * unchanged. Schedulers' jobs carry none: each run is a trace of its own.
 */
class TracedQueue extends Queue {
  override add(name: string, data: unknown, opts?: JobsOptions) {
    const carrier = traceCarrier();
    const traced = carrier && data && typeof data === "object" ? { ...data, [JOB_TRACE_FIELD]: carrier } : data;
    return super.add(name, traced, opts);
  }
}

/** `prefixOf(queue)`: its BullMQ prefix (RedisKeys.queuePrefix: hash-tagged per queue on a cluster). */
export function createQueues(connection: RedisClient, prefixOf: (queue: QueueName) => string): Queues {
  const entries = Object.values(QUEUES).map(
    (name) =>
      [
        name,
        new TracedQueue(name, { connection, prefix: prefixOf(name), defaultJobOptions: DEFAULT_JOB_OPTIONS }),
      ] as const,
  );
  return Object.fromEntries(entries) as Queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((q) => q.close()));
}

/**
 * Producer used by the funding service: one job per payment, deduplicated by the payment id.
 * Throws when Redis refuses (the caller reports `reconciling: false`).
 */
export function reconciliationProducer(queues: Queues) {
  return {
    async enqueue(paymentId: string): Promise<void> {
      await queues.reconciliation.add(
        "reconcile-payment",
        { paymentId },
        { jobId: `reconcile-${paymentId}`, attempts: 20, backoff: { type: "exponential", delay: 2000 } },
      );
    },
  };
}

/**
 * Producer used by pay-per-request settles: one job per payment whose settle's outcome is
 * unknown, deduplicated by the payment id; retried with backoff until the chain decides.
 */
export function requestPaymentReconciliationProducer(queues: Queues) {
  return {
    async enqueue(paymentId: string): Promise<void> {
      await queues.reconciliation.add(
        "reconcile-request-payment",
        { paymentId },
        { jobId: `reconcile-rp-${paymentId}`, attempts: 20, backoff: { type: "exponential", delay: 2000 } },
      );
    },
  };
}

/**
 * Producer of webhook deliveries: one job per attempt of an outbox row (`wh-<event id>-<attempt>`,
 * so the sweeper re-adding a lost one never doubles a job waiting or running). The row is the
 * truth (status, attempts, next attempt); a job only says "try attempt N now" (or after `delayMs`),
 * so it is never retried by BullMQ itself and leaves Redis once it ran. A lane's hand-off (`turn`,
 * the released lease's token) is a job of its own (`wh-<event id>-<attempt>-<turn>`): the row's own
 * job may still be finishing, and a doubled attempt job does nothing (the row says so).
 */
export function webhookProducer(queues: Queues) {
  return {
    async enqueue(eventId: string, attempt: number, delayMs: number, turn?: string): Promise<void> {
      await queues.webhooks.add(
        "deliver",
        { eventId, attempt },
        {
          jobId: turn === undefined ? `wh-${eventId}-${attempt}` : `wh-${eventId}-${attempt}-${turn}`,
          delay: Math.max(0, delayMs),
          attempts: 1,
          removeOnComplete: true,
          removeOnFail: true,
        },
      );
    },
  };
}
