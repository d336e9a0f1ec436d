import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/**
 * Streamed requests in flight, by support reference. A stream's reference reaches the buyer (in
 * its headers) before the request's record is written (when it ends), so the record is bridged
 * here: put when the stream is admitted, renewed while it runs, dropped once the record has
 * committed, and gone by itself (expiry) if the process dies.
 */
export interface InFlightRecord {
  requestId: string;
  supportReference: string;
  accountId: string;
  /** the calling key (a reader holding only `inference` sees its own key's requests) */
  apiKeyId?: string;
  route: string;
  model: string;
  stream: boolean;
  maxPriceCents: number;
  /** ISO time */
  startedAt: string;
}

export interface InFlightRegistry {
  put(rec: InFlightRecord, ttlMs: number): Promise<void>;
  renew(supportReference: string, ttlMs: number): Promise<void>;
  drop(supportReference: string): Promise<void>;
  get(supportReference: string): Promise<InFlightRecord | null>;
}

export function createInFlightRegistry(redis: RedisClient, keys: RedisKeys): InFlightRegistry {
  return {
    async put(rec, ttlMs) {
      await redis.set(keys.inFlightRequest(rec.supportReference), JSON.stringify(rec), "PX", ttlMs);
    },
    async renew(ref, ttlMs) {
      await redis.pexpire(keys.inFlightRequest(ref), ttlMs);
    },
    async drop(ref) {
      await redis.del(keys.inFlightRequest(ref));
    },
    async get(ref) {
      const raw = await redis.get(keys.inFlightRequest(ref));
      return raw ? (JSON.parse(raw) as InFlightRecord) : null;
    },
  };
}
