import type { Redis } from "ioredis";
import { bigintJson } from "../pubsub.js";

/** A small JSON cache in Redis shared by every process (bigints survive the round trip). */
export interface SharedCache {
  get<T>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown, ttlSeconds: number): Promise<void>;
}

export function createSharedCache(redis: Redis): SharedCache {
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
  };
}
