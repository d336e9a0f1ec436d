import { type Job, Worker } from "bullmq";
import { QUEUES } from "../src/adapters/queues.js";
import { closeRedis, createQueueRedis, type RedisClient } from "../src/adapters/redis/client.js";
import { logger } from "../src/lib/logger.js";
import { createWorkerServices, type Runtime } from "../src/runtime.js";
import { confirmationsProcessor, reconciliationProcessor } from "./funding.worker.js";
import { maintenanceProcessor, retentionProcessor } from "./maintenance.worker.js";
import { type Processor, withErrorPolicy, withJobSpan } from "./processor.js";
import { expiryProcessor, payoutsProcessor, syncProcessor } from "./supply.worker.js";
import { videoProcessor } from "./video.worker.js";
import { webhooksProcessor } from "./webhooks.worker.js";

export interface Workers {
  workers: Worker[];
  /**
   * The CATCH_UP jobs this start queued (none without schedules), queued once every worker is
   * ready: what a process that was down missed, run now. Their `finished` says when it is done.
   */
  catchUp: Job[];
  close(): Promise<void>;
}

/** Periodic jobs: upserted on every start (idempotent across processes and restarts). */
const SCHEDULES: { queue: keyof typeof QUEUES; id: string; every: number; job: string }[] = [
  { queue: "maintenance", id: "purge-expired", every: 3600_000, job: "purge-expired" },
  { queue: "maintenance", id: "release-expired-holds", every: 30_000, job: "release-expired-holds" },
  // monthly partitions: this month and the next three exist (start-up makes them too); daily is plenty
  { queue: "maintenance", id: "ensure-partitions", every: 86_400_000, job: "ensure-partitions" },
  // retention (RETENTION_MONTHS; nothing without it): a month is due once a month, the run is cheap
  // when none is, and a blocked month is tried again within hours
  { queue: "retention", id: "retention", every: 6 * 3600_000, job: "retention" },
  { queue: "confirmations", id: "confirm-pending", every: 2_000, job: "confirm-pending" },
  { queue: "reconciliation", id: "scan-chain", every: 60_000, job: "scan-chain" },
  // expiry runs every minute; the service expires what is due exactly once (UTC midnight)
  { queue: "expiry", id: "expire-offers", every: 60_000, job: "expire-offers" },
  // standing offers: posted again within a minute of UTC midnight, once; a key whose balance is not
  // known since midnight waits for a later run (issue 30)
  { queue: "expiry", id: "repost-offers", every: 60_000, job: "repost-offers" },
  // price schedules: a step that took effect moves the ladder and drops the cached capacity, once
  { queue: "expiry", id: "price-steps", every: 60_000, job: "price-steps" },
  { queue: "sync", id: "sync-key-balances", every: 30_000, job: "sync-key-balances" },
  { queue: "sync", id: "sync-catalog", every: 600_000, job: "sync-catalog" },
  { queue: "payouts", id: "daily-payouts", every: 3600_000, job: "daily-payouts" },
  // video: poll rendering jobs, refund failures and finishes without media, expire the undelivered
  { queue: "video", id: "video-sweep", every: 5_000, job: "video-sweep" },
  // webhooks: queue the outbox rows whose delivery job was lost (a crash after the event's commit)
  { queue: "webhooks", id: "webhook-sweep", every: 30_000, job: "sweep" },
];

/**
 * Run once when a worker process starts, besides their schedules: what a process down at midnight
 * (or a step time) missed is caught up at once rather than at the next scheduled run.
 */
const CATCH_UP: { queue: keyof typeof QUEUES; job: string }[] = [
  { queue: "expiry", job: "repost-offers" },
  { queue: "expiry", job: "price-steps" },
  { queue: "maintenance", job: "ensure-partitions" },
  // retention (nothing without RETENTION_MONTHS): a worker's start is the operator's "run it now"
  { queue: "retention", job: "retention" },
];

/**
 * How often a worker process checks that every schedule still exists in Redis. A Redis that
 * restarts empty (no persistence, a failover, a flush) loses the schedulers with everything else;
 * without this check no periodic job (confirmations, the escrow sweeper, video sweeps…) would run
 * again until a worker process restarted.
 */
export const SCHEDULE_CHECK_MS = 10_000;

/**
 * Puts back every schedule missing from Redis. Only missing ones: upserting an existing scheduler
 * would move its next run. Two processes doing it at once upsert the same id (idempotent).
 */
async function ensureSchedules(rt: Runtime): Promise<number> {
  let restored = 0;
  for (const s of SCHEDULES) {
    const queue = rt.queues[QUEUES[s.queue]];
    if (await queue.getJobScheduler(s.id)) continue;
    await queue.upsertJobScheduler(s.id, { every: s.every }, { name: s.job, data: {} });
    restored++;
  }
  return restored;
}

/**
 * How long a worker's `close()` may wait for its running jobs and its connections. A process
 * stops within 25 s of SIGTERM (boot.ts: 15 s for requests in flight, then the workers, then the
 * clients), so the workers get a bounded share of what is left.
 */
export const WORKER_CLOSE_MS = 7_000;

/**
 * Closes a worker, waiting for its running jobs up to `timeoutMs`; then drops its connections. A
 * job cut off is not lost: its lock lapses and another worker's stalled-job check runs it again.
 * BullMQ's `close()` waits for its blocking connection's `end`, which a connection retrying a
 * lost node may never emit; the drop is not waited for either.
 */
async function closeWorker(w: Worker, timeoutMs = WORKER_CLOSE_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), timeoutMs);
  });
  const outcome = await Promise.race([w.close().then(() => "closed" as const), late]).catch(() => "failed" as const);
  clearTimeout(timer);
  if (outcome === "closed") return;
  logger.warn({ queue: w.name, outcome, timeoutMs }, "a worker did not close in time; its connections are dropped");
  const backend = w.getBackend();
  for (const client of [backend.client, backend.blockingClient]) {
    void client?.then((c) => c.disconnect()).catch(() => undefined);
  }
}

/**
 * Starts one BullMQ worker per queue that has a processor. Runs in the API process
 * (`npm run dev`, `npm start`) or alone (`npm run start:worker`). `close()` waits for active jobs.
 * With schedules (the default), the periodic jobs are upserted now and checked every
 * `scheduleCheckMs` (default SCHEDULE_CHECK_MS), so they come back after Redis lost them, and the
 * CATCH_UP jobs are queued once.
 */
export async function startWorkers(
  rt: Runtime,
  opts: { schedules?: boolean; scheduleCheckMs?: number } = {},
): Promise<Workers> {
  // the workers' own Postgres pools: a busy API in the same process cannot starve the jobs (issue 18 finding 7)
  const own = createWorkerServices(rt);
  const services = own.services;
  const processors: Partial<Record<keyof typeof QUEUES, { fn: Processor; concurrency: number }>> = {
    maintenance: { fn: maintenanceProcessor(services), concurrency: 1 },
    retention: { fn: retentionProcessor(services), concurrency: 1 },
    confirmations: { fn: confirmationsProcessor(services), concurrency: 1 },
    reconciliation: { fn: reconciliationProcessor(services), concurrency: 2 },
    expiry: { fn: expiryProcessor(services), concurrency: 1 },
    sync: { fn: syncProcessor(services), concurrency: 2 },
    payouts: { fn: payoutsProcessor(services), concurrency: 1 },
    video: { fn: videoProcessor(services), concurrency: 1 },
    // deliveries wait on receivers (up to the deadline, WEBHOOK_TIMEOUT_MS): many at once, and an
    // account holds at most WEBHOOK_ACCOUNT_IN_FLIGHT of them (domain/webhooks/delivery.ts lanes), so
    // a process's slots are shared by at least 8 accounts whatever their receivers do
    webhooks: { fn: webhooksProcessor(services), concurrency: 16 },
  };
  const connections: RedisClient[] = [];
  const workers: Worker[] = [];
  for (const [queue, p] of Object.entries(processors)) {
    if (!p) continue;
    const name = QUEUES[queue as keyof typeof QUEUES];
    // on a cluster: the master of this queue's slot (BullMQ duplicates it for its own two connections)
    const connection = createQueueRedis(rt.config.redis.url, `${rt.keys.queuePrefix(name)}:${name}`);
    connections.push(connection);
    const w = new Worker(name, withJobSpan(queue, withErrorPolicy(queue, p.fn)), {
      connection,
      prefix: rt.keys.queuePrefix(name),
      concurrency: p.concurrency,
    });
    w.on("error", (err) => logger.warn({ err, queue }, "worker error"));
    workers.push(w);
  }
  let checker: NodeJS.Timeout | undefined;
  if (opts.schedules !== false) {
    for (const s of SCHEDULES) {
      await rt.queues[QUEUES[s.queue]].upsertJobScheduler(s.id, { every: s.every }, { name: s.job, data: {} });
    }
    let checking = false;
    checker = setInterval(() => {
      if (checking) return;
      checking = true;
      ensureSchedules(rt)
        .then((restored) => {
          if (restored > 0) logger.warn({ restored }, "job schedulers were missing from Redis; restored");
        })
        .catch((err: unknown) => logger.warn({ err }, "could not check the job schedulers"))
        .finally(() => {
          checking = false;
        });
    }, opts.scheduleCheckMs ?? SCHEDULE_CHECK_MS);
    checker.unref();
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  // the catch-up once this process's workers are ready (any process's may take it)
  const catchUp: Job[] = [];
  if (opts.schedules !== false) {
    for (const c of CATCH_UP) catchUp.push(await rt.queues[QUEUES[c.queue]].add(c.job, {}));
  }
  // a worker that starts (again) sweeps the outbox at once, schedules or not: deliveries whose job
  // was lost while no worker ran (a crash between an event's commit and its job) go out now
  await rt.queues.webhooks
    .add("sweep", {}, { removeOnComplete: true, removeOnFail: true })
    .catch((err: unknown) => logger.warn({ err }, "could not queue the webhook sweep"));
  return {
    workers,
    catchUp,
    async close() {
      if (checker) clearInterval(checker);
      await Promise.all(workers.map((w) => closeWorker(w)));
      await Promise.all(connections.map((c) => closeRedis(c)));
      await own.close();
    },
  };
}
