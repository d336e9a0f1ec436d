import { Redis } from "ioredis";

export type RedisRole = "command" | "subscriber" | "worker" | "producer";

/**
 * One factory for every Redis connection, configured per role (STACK_NOTES §8, STYLE §9):
 * - worker: blocking BullMQ connections need `maxRetriesPerRequest: null`;
 * - producer: queue producers fail fast instead of buffering while Redis is down;
 * - command / subscriber: ordinary clients (pub/sub needs its own pair). The command client
 *   auto-pipelines: commands issued in the same event-loop tick (gate grows and give-backs, publishes
 *   of a batch of settlements) leave in one socket write, the hot path's dominant cost.
 */
export function createRedis(url: string, role: RedisRole): Redis {
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

/** Resolves once the connection is ready (ioredis 5.11: SUBSCRIBE before `ready` breaks the ready check). */
export function whenReady(client: Redis, timeoutMs = 5000): Promise<void> {
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

export async function closeRedis(client: Redis): Promise<void> {
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
}
