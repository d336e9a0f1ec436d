import { bigintJson } from "../pubsub.js";
import type { RedisClient } from "./client.js";

/** A small JSON cache in Redis shared by every process (bigints survive the round trip). */
export interface SharedCache {
  get<T>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown, ttlSeconds: number): Promise<void>;
  /** Forgets `keys` (best effort: a cache that cannot answer expires them with their TTL). */
  delete(keys: string[]): Promise<void>;
}

export function createSharedCache(redis: RedisClient): SharedCache {
  return {
    async get<T>(key: string) {
      try {
        const raw = await redis.get(key);
        return raw === null ? undefined : (bigintJson.parse(raw) as T);
      } catch {
        return undefined; // a cache that cannot answer is a miss, never an error
      }
    },
    async set(key, value, ttlSeconds) {
      try {
        await redis.set(key, bigintJson.stringify(value), "EX", ttlSeconds);
      } catch {
        // best effort
      }
    },
    async delete(keys) {
      if (keys.length === 0) return;
      try {
        // one DEL per key: on a Redis Cluster the keys may live in different slots (one multi-key
        // DEL would be refused, CROSSSLOT); the command client pipelines them into one write
        await Promise.all(keys.map((k) => redis.del(k)));
      } catch {
        // best effort
      }
    },
  };
}
