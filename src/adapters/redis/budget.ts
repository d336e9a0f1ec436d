import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/**
 * A per-caller spending budget shared by every process through Redis: at most `perWindow` points per
 * fixed window of `windowSeconds`, per subject (an account, or an IP address). GraphQL spends an
 * operation's cost on it (graphql/limits.ts); `POST /v1/webhooks/{id}/test` spends one point per
 * call (WebhookService.sendTest). A spend that crosses the budget is refused and stays counted, so a
 * caller hammering past its budget stays refused until the window turns.
 */
export interface CostBudget {
  spend(
    subject: string,
    points: number,
    now: Date,
  ): Promise<{ ok: true; spent: number } | { ok: false; retryAfterSeconds: number }>;
}

/** A fixed-window budget whose window key for a subject is `keyOf(subject, windowStart)`. */
function windowBudget(
  redis: RedisClient,
  keyOf: (subject: string, windowStart: number) => string,
  perWindow: number,
  windowSeconds: number,
): CostBudget {
  return {
    async spend(subject, points, now) {
      const nowS = Math.floor(now.getTime() / 1000);
      const windowStart = nowS - (nowS % windowSeconds);
      const key = keyOf(subject, windowStart);
      const [[, spent]] = (await redis
        .multi()
        .incrby(key, Math.max(1, Math.ceil(points)))
        .expire(key, windowSeconds * 2)
        .exec()) as [[null, number], unknown];
      if (spent <= perWindow) return { ok: true, spent };
      return { ok: false, retryAfterSeconds: Math.max(1, windowStart + windowSeconds - nowS) };
    },
  };
}

export function createGraphqlCostBudget(
  redis: RedisClient,
  keys: RedisKeys,
  perWindow: number,
  windowSeconds = 60,
): CostBudget {
  return windowBudget(redis, keys.graphqlCost, perWindow, windowSeconds);
}

/** Test events per account (the subject is the account id): `perMinute` a minute. */
export function createWebhookTestBudget(redis: RedisClient, keys: RedisKeys, perMinute: number): CostBudget {
  return windowBudget(redis, keys.webhookTests, perMinute, 60);
}
