import type { RedisClient } from "./client.js";

/**
 * The Lua scripts of the leased gates (gate-leases.ts), each atomic in Redis, and the client with
 * them defined as commands.
 */

// KEYS[1] the gate (hash holder → slots), KEYS[2] the holders (zset holder → lease expiry, ms)
// ARGV: holder, want, limit, gate key ttl. Returns {granted, others' slots} or {-1, 0} when the
// caller's own lease has lapsed (it must register again first).
export const GROW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mine = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not mine or tonumber(mine) < now then return {-1, 0} end
local others = 0
local own = 0
local f = redis.call('HGETALL', KEYS[1])
for i = 1, #f, 2 do
  local h = f[i]
  if h == ARGV[1] then
    own = tonumber(f[i + 1])
  else
    local s = redis.call('ZSCORE', KEYS[2], h)
    if s and tonumber(s) >= now then others = others + tonumber(f[i + 1]) else redis.call('HDEL', KEYS[1], h) end
  end
end
local grant = math.min(tonumber(ARGV[2]), tonumber(ARGV[3]) - others - own)
if grant < 1 then return {0, others} end
redis.call('HINCRBY', KEYS[1], ARGV[1], grant)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
return {grant, others}
`;

// KEYS: gates; ARGV[1] holder, ARGV[i + 1] slots given back to KEYS[i]
export const SHRINK = `
for i, k in ipairs(KEYS) do
  local n = redis.call('HINCRBY', k, ARGV[1], -tonumber(ARGV[i + 1]))
  if n <= 0 then redis.call('HDEL', k, ARGV[1]) end
end
return #KEYS
`;

// KEYS[1] the holders; ARGV holder, ttl. Renews (or starts) the lease; returns 1 when it was live,
// 0 when it had lapsed or never existed. Holders dead for ten leases are forgotten.
export const BEAT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 10 * ttl)
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if s and tonumber(s) >= now then return 1 end
return 0
`;

// KEYS: gates; ARGV[1] holder, ARGV[i + 1] the slots it holds in KEYS[i] (after a lapse)
export const ASSERT = `
for i, k in ipairs(KEYS) do
  redis.call('HSET', k, ARGV[1], ARGV[i + 1])
  redis.call('PEXPIRE', k, tonumber(ARGV[#ARGV]))
end
return #KEYS
`;

export type ScriptRedis = RedisClient & {
  gateGrow(
    gate: string,
    holders: string,
    holder: string,
    want: number,
    limit: number,
    ttl: number,
  ): Promise<[number, number]>;
  gateShrink(numberOfKeys: number, ...keysThenArgs: Array<string | number>): Promise<number>;
  gateBeat(holders: string, holder: string, ttl: number): Promise<number>;
  gateAssert(numberOfKeys: number, ...keysThenArgs: Array<string | number>): Promise<number>;
};
