import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/**
 * Streamed requests in flight, by support reference. A stream's reference reaches the buyer (in
 * its headers) before the request's record is written (when it ends), so the record is bridged
 * here: put when the stream is admitted, renewed while it runs, dropped once the record has
 * committed, and gone by itself (expiry) if the process dies. Each names the process running it (its
 * gate holder, leased in Redis and renewed by its heartbeat): once that lease has lapsed the stream
 * is not running, and `get` answers none (docs/decisions.md "A stream's reference after its process
 * stopped").
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
  /** the gate holder of the process running it (`GateLeases.id`); none in records made before holders */
  holder?: string;
}

export interface InFlightRegistry {
  put(rec: InFlightRecord, ttlMs: number): Promise<void>;
  renew(supportReference: string, ttlMs: number): Promise<void>;
  drop(supportReference: string): Promise<void>;
  get(supportReference: string): Promise<InFlightRecord | null>;
}

/** 1 when the holder's lease (its score, ms) is live by Redis's clock, as the gate scripts lease it. */
const LIVE = `
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s then return 0 end
local t = redis.call('TIME')
if tonumber(s) >= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then return 1 end
return 0
`;

/**
 * `holder`: this process's gate holder while it is registered (`GateLeases.holder`), written into
 * every record it puts; a record put without one names no process and lives until it expires.
 */
export function createInFlightRegistry(
  redis: RedisClient,
  keys: RedisKeys,
  holder?: () => string | null,
): InFlightRegistry {
  return {
    async put(rec, ttlMs) {
      const h = holder?.();
      const stored = h ? { ...rec, holder: h } : rec;
      await redis.set(keys.inFlightRequest(rec.supportReference), JSON.stringify(stored), "PX", ttlMs);
    },
    async renew(ref, ttlMs) {
      await redis.pexpire(keys.inFlightRequest(ref), ttlMs);
    },
    async drop(ref) {
      await redis.del(keys.inFlightRequest(ref));
    },
    async get(ref) {
      const raw = await redis.get(keys.inFlightRequest(ref));
      if (!raw) return null;
      const rec = JSON.parse(raw) as InFlightRecord;
      // the process running it has stopped: not running, though its record has not expired yet (left
      // to expire: a holder whose heartbeat lapsed and comes back still runs its streams)
      if (rec.holder && Number(await redis.eval(LIVE, 1, keys.gateHolders(), rec.holder)) !== 1) return null;
      return rec;
    },
  };
}
