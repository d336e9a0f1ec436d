import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/** An unread board goes by itself after this long (a reader that died, answers that came late). */
const BOARD_TTL_MS = 10_000;

/**
 * Where router processes answer one question about one buyer: how much of the slice they hold of
 * the buyer's balance do their requests in flight use (micro-USDC)? One hash per question (holder →
 * amount): the asker reads it until every holder it expects has answered, then drops it.
 */
export interface EscrowUsageBoard {
  answer(query: string, holder: string, usedMicroUsdc: bigint): Promise<void>;
  read(query: string): Promise<Map<string, bigint>>;
  drop(query: string): Promise<void>;
}

export function createEscrowUsageBoard(redis: RedisClient, keys: RedisKeys): EscrowUsageBoard {
  return {
    async answer(query, holder, used) {
      const key = keys.escrowUsage(query);
      await redis.multi().hset(key, holder, used.toString()).pexpire(key, BOARD_TTL_MS).exec();
    },
    async read(query) {
      const raw = await redis.hgetall(keys.escrowUsage(query));
      return new Map(Object.entries(raw).map(([holder, used]) => [holder, BigInt(used)]));
    },
    async drop(query) {
      await redis.del(keys.escrowUsage(query));
    },
  };
}
