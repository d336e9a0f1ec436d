import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";
import { logger } from "../../lib/logger.js";
import { isClusterUrl, parseClusterUrl } from "../../lib/redis-url.js";
import { slotMasterOptions } from "./slot-master.js";

/** One Redis or a Redis Cluster (`REDIS_URL=redis+cluster://…`); the same commands on either. */
export type RedisClient = Redis | Cluster;

export type RedisRole = "command" | "subscriber" | "worker" | "producer";

/**
 * One factory for every Redis connection, configured per role (STACK_NOTES §8, STYLE §9):
 * - worker: blocking BullMQ connections need `maxRetriesPerRequest: null`;
 * - producer: queue producers fail fast instead of buffering while Redis is down;
 * - command / subscriber: ordinary clients (pub/sub needs its own pair). The command client of
 *   one Redis auto-pipelines: commands issued in the same event-loop tick (gate grows and
 *   give-backs, publishes of a batch of settlements) leave in one socket write, the hot path's
 *   dominant cost. On a cluster it does not (createCluster).
 */
export function createRedis(url: string, role: RedisRole): RedisClient {
  return logErrors(createClient(url, role), role);
}

/**
 * A client's connection errors (a node refusing, a retry failing) are logged, not printed by
 * ioredis as an "Unhandled error event" on stderr; the commands that fail say so to their callers.
 */
function logErrors<C extends RedisClient>(client: C, role: string): C {
  client.on("error", (err: Error) => logger.warn({ err, role }, "redis connection error"));
  return client;
}

function createClient(url: string, role: RedisRole): RedisClient {
  if (isClusterUrl(url)) return createCluster(url, role);
  const base = { lazyConnect: false, connectionName: `svc-${role}` };
  switch (role) {
    case "worker":
      return new Redis(url, { ...base, maxRetriesPerRequest: null });
    case "producer":
      return new Redis(url, { ...base, enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    case "subscriber":
      return new Redis(url, { ...base, maxRetriesPerRequest: 2 });
    default:
      return new Redis(url, { ...base, maxRetriesPerRequest: 2, enableAutoPipelining: true });
  }
}

/**
 * The same roles on a Redis Cluster (docs/operations.md "Running on a Redis Cluster"). Per-node
 * options go in `redisOptions`; the cluster client itself retries a command moved by a failover or a
 * resharding (MOVED/ASK, TRYAGAIN, CLUSTERDOWN), refreshing its slot map as it goes.
 */
function createCluster(url: string, role: RedisRole): Cluster {
  const c = parseClusterUrl(url);
  const node: RedisOptions = {
    connectionName: `svc-${role}`,
    username: c.username,
    password: c.password,
    ...(c.tls ? { tls: {} } : {}),
  };
  const base: ClusterOptions = { lazyConnect: false, slotsRefreshTimeout: 2000, retryDelayOnFailover: 200 };
  switch (role) {
    case "worker":
      return new Cluster(c.nodes, { ...base, redisOptions: { ...node, maxRetriesPerRequest: null } });
    case "producer":
      return new Cluster(c.nodes, {
        ...base,
        enableOfflineQueue: false,
        redisOptions: { ...node, maxRetriesPerRequest: 1 },
      });
    case "subscriber":
      return new Cluster(c.nodes, { ...base, redisOptions: { ...node, maxRetriesPerRequest: 2 } });
    default:
      // no auto-pipelining on a cluster: ioredis redirects a pipeline only as a whole, so after a
      // failover the commands of a batch whose slot moved fail with MOVED (or the batch with "All
      // keys in the pipeline should belong to the same slots allocation group") instead of being
      // followed (github.com/redis/ioredis/issues/2075); single commands follow MOVED
      return new Cluster(c.nodes, { ...base, redisOptions: { ...node, maxRetriesPerRequest: 2 } });
  }
}

/** Resolves once the connection is ready (ioredis 5.11: SUBSCRIBE before `ready` breaks the ready check). */
export function whenReady(client: RedisClient, timeoutMs = 5000): Promise<void> {
  if (client.status === "ready") return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`redis not ready after ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const onError = (e: Error) => {
      cleanup();
      reject(e);
    };
    const cleanup = () => {
      clearTimeout(timer);
      client.off("ready", onReady);
      client.off("error", onError);
    };
    client.once("ready", onReady);
    client.once("error", onError);
  });
}

/**
 * A connection for one BullMQ queue's workers (or its `QueueEvents`): blocking commands, so
 * `maxRetriesPerRequest: null`. On one Redis it is the "worker" role's. On a cluster it is a plain
 * connection to the master of the queue's slot (`queueKey`: any key of the queue), found again
 * after a failover (slot-master.ts): BullMQ then runs exactly as on one Redis. An ioredis `Cluster`
 * here wedged after a master was killed: BullMQ disconnects and reconnects its blocking client, and
 * the cluster client's pool then took the old nodes' late ends for the new ones', leaving it
 * `close` with no node and no retry (jobs stalled, `close()` waited forever).
 */
export function createQueueRedis(url: string, queueKey: string): RedisClient {
  if (!isClusterUrl(url)) return createRedis(url, "worker");
  const client = new Redis({
    ...slotMasterOptions({ cluster: parseClusterUrl(url), key: queueKey }),
    lazyConnect: false,
    connectionName: "svc-worker",
    maxRetriesPerRequest: null,
    // a dead master's address refuses at once on a LAN; one that does not answer at all is left soon
    connectTimeout: 2000,
  });
  return logErrors(client, "worker");
}

/** How long a client's `QUIT` may take before it is dropped (`disconnect()`). */
export const REDIS_QUIT_MS = 2000;

/**
 * Closes a client: `QUIT` (replies still on the way arrive), then `disconnect()` when it fails or
 * takes longer than `timeoutMs`: a cluster client's `QUIT` waits on every node's connection, and
 * one to a node that died never answers. Never waits longer than `timeoutMs`.
 */
export async function closeRedis(client: RedisClient, timeoutMs = REDIS_QUIT_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const quit = client.quit().then(
    () => "quit" as const,
    () => "failed" as const,
  );
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), timeoutMs);
  });
  const outcome = await Promise.race([quit, late]);
  clearTimeout(timer);
  if (outcome === "quit") return;
  if (outcome === "late") logger.warn({ timeoutMs }, "a Redis client did not quit in time; dropped");
  client.disconnect();
}
