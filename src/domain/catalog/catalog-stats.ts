import { utcDay } from "../../lib/clock.js";
import type { CatalogModality, ModelUsage, StatsWindow } from "./catalog-types.js";

/**
 * Model statistics arithmetic (pure). Shares are fractions of burn (micro-DIEM), computed in
 * bigint and rounded half-up to 4 decimals only at the end; they are not money.
 */

/** Privacy threshold: below either figure in the window, nothing per model is published. */
export const STATS_MIN_CLEARS = 20;
export const STATS_MIN_BUYERS = 3;

const HOUR_MS = 3_600_000;
export const STATS_WINDOW_MS: Readonly<Record<StatsWindow, number>> = {
  "24h": 24 * HOUR_MS,
  "7d": 7 * 24 * HOUR_MS,
  "30d": 30 * 24 * HOUR_MS,
};

/** `?window=` / GraphQL `window:`: the contract's rule (absent → 7d; anything but 24h, 7d or 30d → 400). */
export { parseStatsWindow } from "../../contract/catalog.js";

/** part / total rounded half-up to 4 decimals (0 when total is 0). */
export function shareOf(part: bigint, total: bigint): number {
  if (total <= 0n || part <= 0n) return 0;
  const tenThousandths = (part * 20_000n + total) / (2n * total);
  return Number(tenThousandths) / 10_000;
}

/** Every UTC day (`YYYY-MM-DD`) the interval [from, to] touches, oldest first. */
export function utcDaysBetween(from: Date, to: Date): string[] {
  const days: string[] = [];
  const cursor = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate()));
  const last = utcDay(to);
  for (;;) {
    const d = utcDay(cursor);
    days.push(d);
    if (d >= last) break;
    cursor.setUTCDate(cursor.getUTCDate() + 1);
  }
  return days;
}

export interface ModelBurn {
  model: string;
  modality: CatalogModality;
  burnMicroDiem: bigint;
}

export interface ModelDayBurn {
  model: string;
  day: string;
  burnMicroDiem: bigint;
}

/**
 * Ranks models by burn (most first; ties by id) with their share of the window's total and, per
 * UTC day of the window, their share of that day's total (0 on a day without volume).
 */
export function rankModels(totals: ModelBurn[], perDay: ModelDayBurn[], days: string[]): ModelUsage[] {
  const windowTotal = totals.reduce((a, t) => a + t.burnMicroDiem, 0n);
  const dayTotals = new Map<string, bigint>();
  const modelDay = new Map<string, bigint>();
  for (const r of perDay) {
    dayTotals.set(r.day, (dayTotals.get(r.day) ?? 0n) + r.burnMicroDiem);
    modelDay.set(`${r.model}\u0000${r.day}`, (modelDay.get(`${r.model}\u0000${r.day}`) ?? 0n) + r.burnMicroDiem);
  }
  const ordered = [...totals].sort((a, b) =>
    a.burnMicroDiem === b.burnMicroDiem ? (a.model < b.model ? -1 : 1) : a.burnMicroDiem > b.burnMicroDiem ? -1 : 1,
  );
  return ordered.map((t, i) => ({
    id: t.model,
    modality: t.modality,
    rank: i + 1,
    usageShare: shareOf(t.burnMicroDiem, windowTotal),
    daily: days.map((day) => ({
      day,
      share: shareOf(modelDay.get(`${t.model}\u0000${day}`) ?? 0n, dayTotals.get(day) ?? 0n),
    })),
  }));
}
