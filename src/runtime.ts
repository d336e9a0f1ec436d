import { type ChainGateway, createChainGateway } from "./adapters/chain/usdc-gateway.js";
import { createPrisma, type Db, WORKER_TRANSACTION_OPTIONS } from "./adapters/db.js";
import { createFacilitator } from "./adapters/facilitator/index.js";
import type { Facilitator } from "./adapters/facilitator/types.js";
import { PromMetrics } from "./adapters/metrics.js";
import { createEventBus, type EventBus } from "./adapters/pubsub.js";
import { closeQueues, createQueues, type Queues } from "./adapters/queues.js";
import { createReadRouting, primaryOnly, type ReadRouting } from "./adapters/read-replica.js";
import type { RedisClient } from "./adapters/redis/client.js";
import { closeRedis, createRedis, whenReady } from "./adapters/redis/client.js";
import { type RedisKeys, redisKeys } from "./adapters/redis/keys.js";
import { createSql, type Sql } from "./adapters/sql.js";
import { startTracing, type Tracing } from "./adapters/tracing.js";
import { UpstreamClient } from "./adapters/upstream/client.js";
import type { ResolveHost } from "./adapters/webhooks/resolve-host.js";
import type { Config } from "./config.js";
import { CLOSE_DRAIN_MS } from "./domain/inference/pipeline/pipeline.js";
import { type Clock, systemClock } from "./lib/clock.js";
import { createServices, type Services } from "./services.js";

/** The process-wide clients and services; built once by main (or a test harness). */
export interface Runtime {
  config: Config;
  db: Db;
  /** pg pool for the inference pipeline's hot path */
  sql: Sql;
  /** where read-only pages read: DATABASE_URL_READ_REPLICA when set and fresh enough, else `db` */
  reads: ReadRouting;
  redis: { command: RedisClient; publish: RedisClient; subscribe: RedisClient; producer: RedisClient };
  bus: EventBus;
  keys: RedisKeys;
  queues: Queues;
  services: Services;
  /** this process's Prometheus registry (GET /metrics) */
  metrics: PromMetrics;
  clock: Clock;
  chain: ChainGateway;
  /** the treasury side of the chain (payouts); undefined when PAYOUT_PRIVATE_KEY is unset */
  payoutChain: ChainGateway | undefined;
  facilitator: Facilitator;
  upstream: UpstreamClient;
  /** how webhook host names resolve, when not node:dns (tests) */
  resolveHost?: ResolveHost;
  /** OpenTelemetry (adapters/tracing.ts): on when OTEL_EXPORTER_OTLP_ENDPOINT is set */
  tracing: Tracing;
  close(): Promise<void>;
}

export async function createRuntime(
  config: Config,
  opts: { clock?: Clock; onQuery?: (sql: string) => void; resolveHost?: ResolveHost } = {},
): Promise<Runtime> {
  const clock = opts.clock ?? systemClock;
  // first, so everything after it may make spans; nothing is loaded when tracing is off
  const tracing = await startTracing(config.tracing);
  const keys = redisKeys(config.redis.prefix, { cluster: config.redis.cluster });
  const db = createPrisma(config.database.url, { max: config.database.poolSize, onQuery: opts.onQuery });
  const sql = createSql(config.database.url, config.database.poolSize);
  const redis = {
    command: createRedis(config.redis.url, "command"),
    publish: createRedis(config.redis.url, "command"),
    subscribe: createRedis(config.redis.url, "subscriber"),
    producer: createRedis(config.redis.url, "producer"),
  };
  try {
    await Promise.all(Object.values(redis).map((c) => whenReady(c)));
  } catch (e) {
    for (const c of Object.values(redis)) c.disconnect();
    await db.$disconnect();
    await sql.end();
    await tracing.shutdown();
    throw new Error(`REDIS_URL: cannot connect (${(e as Error).message})`);
  }
  const bus = createEventBus({ publishClient: redis.publish, subscribeClient: redis.subscribe, prefix: keys.prefix });
  const queues = createQueues(redis.producer, keys.queuePrefix);
  // the workers read and write the primary alone: a worker-only process opens nothing on the replica
  const reads =
    config.database.readReplicaUrl && config.role !== "worker"
      ? createReadRouting({
          primary: db,
          primaryUrl: config.database.url,
          replicaUrl: config.database.readReplicaUrl,
          maxLagMs: config.database.readReplicaMaxLagMs,
          redis: redis.command,
          prefix: keys.prefix,
          poolSize: config.database.poolSize,
        })
      : primaryOnly(db);
  const chain = createChainGateway({
    rpcUrl: config.chain.rpcUrl,
    chainId: config.chain.id,
    usdcAddress: config.chain.usdcAddress,
  });
  const payoutChain = config.chain.payoutPrivateKey
    ? createChainGateway({
        rpcUrl: config.chain.rpcUrl,
        chainId: config.chain.id,
        usdcAddress: config.chain.usdcAddress,
        privateKey: config.chain.payoutPrivateKey,
      })
    : undefined;
  const upstream = new UpstreamClient({ baseUrl: config.upstream.baseUrl });
  const facilitator = createFacilitator({
    url: config.facilitator.url,
    privateKey: config.facilitator.privateKey,
    rpcUrl: config.chain.rpcUrl,
    chainId: config.chain.id,
    cdpKeyId: config.facilitator.cdpKeyId,
    cdpKeySecret: config.facilitator.cdpKeySecret,
  });
  const metrics = new PromMetrics({
    async escrowHeld() {
      // a slice's part its unfolded clears charged is spent, not held: the fold takes it out of the
      // slice and the balance together, so the figure does not move when a fold runs
      const [r] = await db.$queryRaw<{ b: bigint | null; o: bigint | null }[]>`
        SELECT (SELECT sum(amount_micro_usdc - charged_micro_usdc) FROM buyer_escrows)::bigint AS b,
               (SELECT sum(amount_micro_diem - charged_micro_diem) FROM offer_escrows)::bigint AS o`;
      return { buyerMicroUsdc: BigInt(r?.b ?? 0n), offerMicroDiem: BigInt(r?.o ?? 0n) };
    },
    async escrowHoldersExpired() {
      // the sweeper's own test (releaseExpiredHolders): a lease that ended before now
      return db.escrowHolder.count({ where: { expiresAt: { lt: clock.now() } } });
    },
    async queueDepths() {
      const out: Record<string, number> = {};
      for (const [name, q] of Object.entries(queues)) {
        const c = await q.getJobCounts("waiting", "delayed", "prioritized");
        out[name] = (c.waiting ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0);
      }
      return out;
    },
    async reconciliationBacklog() {
      return db.payment.count({ where: { status: { in: ["settling", "reconciling"] } } });
    },
    async videoJobsOpen() {
      const rows = await db.videoJob.groupBy({
        by: ["status"],
        where: { status: { in: ["rendering", "completed_no_media"] } },
        _count: { _all: true },
      });
      return Object.fromEntries(rows.map((r) => [r.status, r._count._all]));
    },
    async webhookEndpointsDisabled() {
      return db.webhookEndpoint.count({ where: { status: "disabled" } });
    },
    readReplica: reads.replicated
      ? { lagMs: () => reads.lagMs(), maxLagMs: config.database.readReplicaMaxLagMs }
      : undefined,
  });
  const services = createServices({
    metrics,
    config,
    db,
    sql,
    bus,
    keys,
    clock,
    redis: redis.command,
    queues,
    chain,
    payoutChain,
    facilitator,
    upstream,
    resolveHost: opts.resolveHost,
    reads,
  });
  let closed = false;
  return {
    config,
    db,
    sql,
    reads,
    redis,
    bus,
    keys,
    queues,
    services,
    metrics,
    clock,
    chain,
    payoutChain,
    facilitator,
    upstream,
    resolveHost: opts.resolveHost,
    tracing,
    async close() {
      if (closed) return;
      closed = true;
      await services.inference.close(CLOSE_DRAIN_MS).catch(() => undefined);
      await upstream.close().catch(() => undefined);
      await closeQueues(queues).catch(() => undefined);
      await reads.close();
      await db.$disconnect().catch(() => undefined);
      await sql.end().catch(() => undefined);
      // pub/sub clients last (STACK_NOTES gotcha 7)
      await Promise.all([closeRedis(redis.command), closeRedis(redis.producer)]);
      await Promise.all([closeRedis(redis.publish), closeRedis(redis.subscribe)]);
      // last: the spans of everything above are ended; what is left is exported before the process goes
      await tracing.shutdown();
    },
  };
}

/**
 * The workers' own services, over their own Postgres pools (WORKER_DB_POOL_SIZE connections each,
 * patient transaction options): with the API and the workers in one process (`npm start`), a busy
 * API holds every connection of its pools, and a job waiting on them failed with "Unable to start a
 * transaction in the given time". Everything else (Redis, queues, bus, chain,
 * upstream, metrics) is the runtime's. `close()` ends the pools; the runtime's own close is separate.
 */
export function createWorkerServices(rt: Runtime): { services: Services; close(): Promise<void> } {
  const { config } = rt;
  const db = createPrisma(config.database.url, {
    max: config.database.workerPoolSize,
    transactionOptions: WORKER_TRANSACTION_OPTIONS,
  });
  const sql = createSql(config.database.url, config.database.workerPoolSize);
  const services = createServices({
    config,
    db,
    sql,
    bus: rt.bus,
    keys: rt.keys,
    clock: rt.clock,
    redis: rt.redis.command,
    queues: rt.queues,
    chain: rt.chain,
    payoutChain: rt.payoutChain,
    facilitator: rt.facilitator,
    upstream: rt.upstream,
    metrics: rt.metrics,
    resolveHost: rt.resolveHost,
  });
  return {
    services,
    async close() {
      await services.inference.close(CLOSE_DRAIN_MS).catch(() => undefined);
      await db.$disconnect().catch(() => undefined);
      await sql.end().catch(() => undefined);
    },
  };
}
