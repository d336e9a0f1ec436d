import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/**
 * A fixed-window counter shared by every process through Redis (the signup fuse): at most `max`
 * takes per `windowSeconds`. Returns the seconds until the window resets when it is spent.
 */
export interface Fuse {
  take(now: Date): Promise<{ ok: true } | { ok: false; retryAfterSeconds: number }>;
}

export function createSignupFuse(redis: RedisClient, keys: RedisKeys, max: number, windowSeconds: number): Fuse {
  return {
    async take(now) {
      const nowS = Math.floor(now.getTime() / 1000);
      const windowStart = nowS - (nowS % windowSeconds);
      const key = keys.signupFuse(windowStart);
      const [[, count]] = (await redis
        .multi()
        .incr(key)
        .expire(key, windowSeconds * 2)
        .exec()) as [[null, number], unknown];
      if (count <= max) return { ok: true };
      return { ok: false, retryAfterSeconds: Math.max(1, windowStart + windowSeconds - nowS) };
    },
  };
}
