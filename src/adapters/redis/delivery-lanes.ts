import { randomUUID } from "node:crypto";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/**
 * Webhook delivery lanes, shared by every worker process through Redis (docs/decisions.md "Webhook
 * delivery that cannot be held open"): at most one attempt in flight per endpoint and at
 * most `perAccount` per account. A lease is a token with a TTL (an attempt's longest possible
 * duration and a margin), so a process that dies mid-attempt frees its lanes when the TTL lapses;
 * release is compare-and-delete, so a lapsed lease never frees a later holder's lane.
 */
export interface DeliveryLease {
  accountId: string;
  endpointId: string;
  token: string;
}

export interface DeliveryLanes {
  /** A lease on the endpoint's lane and one of the account's, or null when either is full. */
  take(accountId: string, endpointId: string, ttlMs: number): Promise<DeliveryLease | null>;
  release(lease: DeliveryLease): Promise<void>;
  /** The endpoints of `accountId` with an attempt in flight now. */
  busyEndpoints(accountId: string): Promise<string[]>;
}

// KEYS[1] the account's lane (zset token → expiry ms), KEYS[2] the endpoint's (token, PX)
// ARGV: token, ttl ms, the account's limit. 1 taken, 0 full. Expired account tokens go first.
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
redis.call('SET', KEYS[2], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1
`;

// KEYS[1] the account's lane, KEYS[2] the endpoint's; ARGV[1] the token: only the holder's own
const RELEASE = `
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1
`;

// KEYS[1] the account's lane: its live tokens
const LIVE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`;

type LaneRedis = RedisClient & {
  laneTake(account: string, endpoint: string, token: string, ttlMs: number, limit: number): Promise<number>;
  laneRelease(account: string, endpoint: string, token: string): Promise<number>;
  laneLive(account: string): Promise<string[]>;
};

/** A token names its endpoint (`<endpoint id>/<random>`), so the account's lane says which are busy. */
const endpointOf = (token: string) => token.slice(0, token.indexOf("/"));

export function createDeliveryLanes(redis: RedisClient, keys: RedisKeys, perAccount: number): DeliveryLanes {
  const r = redis as LaneRedis;
  if (typeof r.laneTake !== "function") {
    redis.defineCommand("laneTake", { numberOfKeys: 2, lua: TAKE });
    redis.defineCommand("laneRelease", { numberOfKeys: 2, lua: RELEASE });
    redis.defineCommand("laneLive", { numberOfKeys: 1, lua: LIVE });
  }
  return {
    async take(accountId, endpointId, ttlMs) {
      const token = `${endpointId}/${randomUUID()}`;
      const taken = await r.laneTake(
        keys.webhookAccountLane(accountId),
        keys.webhookEndpointLane(accountId, endpointId),
        token,
        Math.ceil(ttlMs),
        perAccount,
      );
      return taken === 1 ? { accountId, endpointId, token } : null;
    },
    async release(lease) {
      await r.laneRelease(
        keys.webhookAccountLane(lease.accountId),
        keys.webhookEndpointLane(lease.accountId, lease.endpointId),
        lease.token,
      );
    },
    async busyEndpoints(accountId) {
      return [...new Set((await r.laneLive(keys.webhookAccountLane(accountId))).map(endpointOf))];
    },
  };
}
