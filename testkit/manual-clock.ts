import type { Clock } from "../src/lib/clock.js";

/** Where the pipeline's tests and the money simulation start their clock. */
export const CLOCK_START = new Date("2030-01-15T12:00:00.000Z");

export type ManualClock = Clock & { advance(ms: number): void; set(at: Date): void };

/** A clock that stands still until moved (so cooldowns and expiries are exact). */
export function manualClock(start = CLOCK_START): ManualClock {
  let now = start.getTime();
  return {
    now: () => new Date(now),
    advance(ms: number) {
      now += ms;
    },
    set(at: Date) {
      now = at.getTime();
    },
  };
}
