import type { Redis } from "ioredis";

/**
 * In-flight gates shared by every process: a sorted set of leases per gated thing (a buyer API key,
 * a supplier upstream key, a wallet's image slot), scored by expiry. Acquiring drops expired leases
 * first, so a process that dies mid-request frees its slots when their leases expire; releasing
 * removes the lease at once. One Lua script per operation: atomic across processes.
 */
const ACQUIRE = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local lease = ARGV[3]
local expiry = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) >= limit then return 0 end
redis.call('ZADD', key, expiry, lease)
redis.call('PEXPIREAT', key, expiry + 1000)
return 1
`;

const RENEW = `
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
  redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[2]) + 1000)
  return 1
end
return 0
`;

// Two gates in one call: the first (a buyer's API key) decides alone; the second (a supplier key)
// is taken only if the first was. Returns 0 (first full: nothing taken), 1 (first taken, second
// full) or 2 (both taken).
const ACQUIRE_PAIR = `
local now = tonumber(ARGV[1])
local expiry = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], expiry, ARGV[4])
redis.call('PEXPIREAT', KEYS[1], expiry + 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return 1 end
redis.call('ZADD', KEYS[2], expiry, ARGV[6])
redis.call('PEXPIREAT', KEYS[2], expiry + 1000)
return 2
`;

// Releases one lease per key (KEYS[i] ↔ ARGV[i]) in one call.
const RELEASE_MANY = `
for i, key in ipairs(KEYS) do redis.call('ZREM', key, ARGV[i]) end
return #KEYS
`;

export interface GateSlot {
  key: string;
  leaseId: string;
}

export interface Gate {
  /**
   * Takes a slot of `first` and, only if that succeeded, of `second`, atomically: 0 when `first`
   * is full (nothing taken), 1 when only `first` was taken, 2 when both were.
   */
  tryAcquirePair(
    first: GateSlot & { limit: number },
    second: GateSlot & { limit: number },
    ttlMs: number,
  ): Promise<0 | 1 | 2>;
  /** Releases several leases in one round trip. */
  releaseMany(slots: GateSlot[]): Promise<void>;
  /** Takes a slot for `leaseId` when fewer than `limit` live leases exist. */
  tryAcquire(key: string, leaseId: string, limit: number, ttlMs: number): Promise<boolean>;
  /** Extends a held lease (long streams). */
  renew(key: string, leaseId: string, ttlMs: number): Promise<boolean>;
  /** Live leases right now. */
  count(key: string): Promise<number>;
}

type ScriptRedis = Redis & {
  gateAcquire(key: string, now: number, limit: number, lease: string, expiry: number): Promise<number>;
  gateRenew(key: string, lease: string, expiry: number): Promise<number>;
  gateAcquirePair(
    first: string,
    second: string,
    now: number,
    expiry: number,
    firstLimit: number,
    firstLease: string,
    secondLimit: number,
    secondLease: string,
  ): Promise<number>;
  gateReleaseMany(numberOfKeys: number, ...keysThenLeases: string[]): Promise<number>;
};

export function createGate(redis: Redis): Gate {
  const r = redis as ScriptRedis;
  if (typeof r.gateAcquire !== "function") {
    redis.defineCommand("gateAcquire", { numberOfKeys: 1, lua: ACQUIRE });
    redis.defineCommand("gateRenew", { numberOfKeys: 1, lua: RENEW });
    redis.defineCommand("gateAcquirePair", { numberOfKeys: 2, lua: ACQUIRE_PAIR });
    redis.defineCommand("gateReleaseMany", { lua: RELEASE_MANY });
  }
  return {
    async tryAcquire(key, leaseId, limit, ttlMs) {
      const now = Date.now();
      return (await r.gateAcquire(key, now, limit, leaseId, now + ttlMs)) === 1;
    },
    async tryAcquirePair(first, second, ttlMs) {
      const now = Date.now();
      const out = await r.gateAcquirePair(
        first.key,
        second.key,
        now,
        now + ttlMs,
        first.limit,
        first.leaseId,
        second.limit,
        second.leaseId,
      );
      return (out === 2 ? 2 : out === 1 ? 1 : 0) as 0 | 1 | 2;
    },
    async releaseMany(slots) {
      if (slots.length === 0) return;
      await r.gateReleaseMany(slots.length, ...slots.map((x) => x.key), ...slots.map((x) => x.leaseId));
    },
    async renew(key, leaseId, ttlMs) {
      return (await r.gateRenew(key, leaseId, Date.now() + ttlMs)) === 1;
    },
    async count(key) {
      await redis.zremrangebyscore(key, "-inf", Date.now());
      return redis.zcard(key);
    },
  };
}
