/**
 * A key's spending period (docs/decisions.md "Per-key policy"): periods are on UTC
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
 * What the pipeline enforces of the calling API key's policy and of its ancestors' (a
 * child's spend counts against them; src/domain/keys/key-chain.ts, docs/decisions.md "Key budgets"): whether a budget holds its
 * requests (its own limit or an ancestor's: `KeyBudgets`), its effective ceiling, the models it may
 * call (that it may call models at all is its `inference` scope, checked by the routes).
 */
export interface KeyRules {
  /** the key or one of its ancestors has a spending limit: every request is held against them */
  budgeted: boolean;
  /** the key's effective ceiling (30-80: the lowest of its own and its ancestors'), null when none */
  maxPriceCents: number | null;
  /** bare model ids the key may call (its own list within its ancestors'); empty: every model */
  models: readonly string[];
}

/** Every reset's period at one instant: what a budget hold sends (`svc_key_reserve`). */
export function budgetPeriods(now: Date): Record<LimitReset, BudgetPeriod> {
  return {
    daily: budgetPeriod("daily", now),
    weekly: budgetPeriod("weekly", now),
    monthly: budgetPeriod("monthly", now),
    never: budgetPeriod("never", now),
  };
}
