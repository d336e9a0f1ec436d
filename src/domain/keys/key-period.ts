/**
 * A key's spending period (issue 28; docs/decisions.md "Per-key policy"): periods are on UTC
 * boundaries, so every process agrees on them without a job to roll them over: a UTC day, an ISO
 * week (Monday 00:00 UTC to the next Monday), a calendar month, or `never` (all time, one period).
 * Pure: callers pass the instant (their injected Clock's `now()`).
 */

/** How often a key's limit starts again. */
export type LimitReset = "daily" | "weekly" | "monthly" | "never";

export const LIMIT_RESETS: readonly LimitReset[] = ["daily", "weekly", "monthly", "never"];

/**
 * The period containing an instant: `[start, end)`. `never` is one period without bounds
 * (`start` and `end` null: everything ever counts, nothing resets).
 */
export interface BudgetPeriod {
  start: Date | null;
  end: Date | null;
}

/**
 * THE period function: the period of `reset` that contains `now`, on UTC boundaries. `end` is the
 * next boundary (what a listing shows as `resetsAt`); a request started at `end` exactly belongs to
 * the next period. Used by key listings and by per-key budgets alike, so both count the same spend.
 */
export function budgetPeriod(reset: LimitReset, now: Date): BudgetPeriod {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const d = now.getUTCDate();
  switch (reset) {
    case "daily":
      return { start: utc(y, m, d), end: utc(y, m, d + 1) };
    case "weekly": {
      // getUTCDay: Sunday 0 … Saturday 6; days since Monday: Monday 0 … Sunday 6
      const sinceMonday = (now.getUTCDay() + 6) % 7;
      return { start: utc(y, m, d - sinceMonday), end: utc(y, m, d - sinceMonday + 7) };
    }
    case "monthly":
      return { start: utc(y, m, 1), end: utc(y, m + 1, 1) };
    case "never":
      return { start: null, end: null };
  }
}

/** 00:00 UTC of a day; Date.UTC carries day and month overflow into the next month and year. */
function utc(year: number, month: number, day: number): Date {
  return new Date(Date.UTC(year, month, day));
}

/**
 * What the pipeline enforces of the calling API key's policy (src/domain/keys/key-policy.ts,
 * docs/decisions.md "Key budgets"): its limit's period (the budget held by `KeyBudgets`), its own
 * ceiling and the models it may call.
 */
export interface KeyRules {
  /** the period of the key's spending limit; null when the key has no limit */
  limitReset: LimitReset | null;
  /** the key's own ceiling (30-80), null when it has none */
  maxPriceCents: number | null;
  /** bare model ids the key may call; empty: every model */
  models: readonly string[];
}
