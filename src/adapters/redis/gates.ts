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

export interface Gate {
  /** Takes a slot for `leaseId` when fewer than `limit` live leases exist. */
  tryAcquire(key: string, leaseId: string, limit: number, ttlMs: number): Promise<boolean>;
  /** Extends a held lease (long streams). */
  renew(key: string, leaseId: string, ttlMs: number): Promise<boolean>;
  release(key: string, leaseId: string): Promise<void>;
  /** Live leases right now. */
  count(key: string): Promise<number>;
}

type ScriptRedis = Redis & {
  gateAcquire(key: string, now: number, limit: number, lease: string, expiry: number): Promise<number>;
  gateRenew(key: string, lease: string, expiry: number): Promise<number>;
};

export function createGate(redis: Redis): Gate {
  const r = redis as ScriptRedis;
  if (typeof r.gateAcquire !== "function") {
    redis.defineCommand("gateAcquire", { numberOfKeys: 1, lua: ACQUIRE });
    redis.defineCommand("gateRenew", { numberOfKeys: 1, lua: RENEW });
  }
  return {
    async tryAcquire(key, leaseId, limit, ttlMs) {
      const now = Date.now();
      return (await r.gateAcquire(key, now, limit, leaseId, now + ttlMs)) === 1;
    },
    async renew(key, leaseId, ttlMs) {
      return (await r.gateRenew(key, leaseId, Date.now() + ttlMs)) === 1;
    },
    async release(key, leaseId) {
      await redis.zrem(key, leaseId);
    },
    async count(key) {
      await redis.zremrangebyscore(key, "-inf", Date.now());
      return redis.zcard(key);
    },
  };
}
