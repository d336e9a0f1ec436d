import { offerPriceCents } from "../../contract/supply.js";
import { DomainError } from "../../lib/errors.js";

/**
 * Price schedules (docs/decisions.md "Standing offers and price schedules"): an offer may
 * carry steps `{fromUtc: "HH:MM", priceCentsPerDollar}` that change its price during the UTC day,
 * e.g. cheaper toward midnight, when its DIEM expires. Pure functions only.
 */

/** One step of a schedule: from `fromUtc` (UTC, "HH:MM") on, the offer's price is `priceCentsPerDollar`. */
export interface PriceStep {
  fromUtc: string;
  priceCentsPerDollar: number;
}

/** What the effective price needs of an offer: its own price and its steps (null: none). */
export interface PricedOffer {
  priceCentsPerDollar: number;
  schedule: readonly PriceStep[] | null;
}

/** At most this many steps (one an hour). */
export const MAX_SCHEDULE_STEPS = 24;

const MINUTE_MS = 60_000;
const DAY_MINUTES = 24 * 60;
const HH_MM = /^([01]\d|2[0-3]):([0-5]\d)$/;

/** Minutes after 00:00 UTC of a valid "HH:MM". */
export function minuteOfDay(hhmm: string): number {
  return Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
}

/** Minutes after 00:00 UTC of `at` (seconds are ignored: a step takes effect at its minute). */
function utcMinuteOf(at: Date): number {
  return at.getUTCHours() * 60 + at.getUTCMinutes();
}

/**
 * THE effective price of an offer at `now`: the price of the step whose `fromUtc` most recently
 * passed today (UTC; a step takes effect at the start of its minute), else the offer's own
 * `priceCentsPerDollar`. Steps are strictly increasing (`parseSchedule`). The SQL readers use
 * `svc_effective_price` (prisma/functions), the same rule, checked against this one.
 */
export function effectivePrice(offer: PricedOffer, now: Date): number {
  const steps = offer.schedule;
  if (!steps || steps.length === 0) return offer.priceCentsPerDollar;
  const minute = utcMinuteOf(now);
  let price = offer.priceCentsPerDollar;
  for (const step of steps) {
    if (minuteOfDay(step.fromUtc) > minute) break;
    price = step.priceCentsPerDollar;
  }
  return price;
}

/**
 * When the effective price may next change after `now`: the next step today, else the next UTC
 * midnight (the schedule starts over; an offer expires then anyway). Null without a schedule.
 */
export function nextPriceChange(schedule: readonly PriceStep[] | null, now: Date): Date | null {
  if (!schedule || schedule.length === 0) return null;
  const dayStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const minute = utcMinuteOf(now);
  const next = schedule.find((s) => minuteOfDay(s.fromUtc) > minute);
  return new Date(dayStart + (next ? minuteOfDay(next.fromUtc) : DAY_MINUTES) * MINUTE_MS);
}

/**
 * A schedule as a supplier sends it (REST `schedule`, GraphQL `schedule`): null (no schedule), or
 * 1-24 steps with `fromUtc` "HH:MM" (UTC) strictly increasing and `priceCentsPerDollar` 1-80, the
 * bounds of the offer's own price. Returns the steps (only their two fields) or throws
 * `invalid_request` naming the offending field, e.g. `schedule.2.fromUtc`.
 */
export function parseSchedule(value: unknown, field = "schedule"): PriceStep[] | null {
  if (value === null) return null;
  if (!Array.isArray(value) || value.length < 1 || value.length > MAX_SCHEDULE_STEPS) {
    throw new DomainError(
      "invalid_request",
      `${field} must be a list of 1-${MAX_SCHEDULE_STEPS} steps {fromUtc, priceCentsPerDollar}, or null for none; nothing was changed.`,
      { field },
    );
  }
  const steps: PriceStep[] = [];
  value.forEach((raw: unknown, i) => {
    const at = `${field}.${i}`;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
      throw new DomainError("invalid_request", `${at} must be an object {fromUtc, priceCentsPerDollar}.`, {
        field: at,
      });
    }
    const step = raw as Record<string, unknown>;
    const fromUtc = step.fromUtc;
    if (typeof fromUtc !== "string" || !HH_MM.test(fromUtc)) {
      throw new DomainError("invalid_request", `${at}.fromUtc must be a UTC time "HH:MM" (00:00-23:59).`, {
        field: `${at}.fromUtc`,
      });
    }
    const previous = steps[i - 1];
    if (previous && minuteOfDay(fromUtc) <= minuteOfDay(previous.fromUtc)) {
      throw new DomainError(
        "invalid_request",
        `${at}.fromUtc must be later than ${field}.${i - 1}.fromUtc (${previous.fromUtc}): steps are in strictly increasing time.`,
        { field: `${at}.fromUtc` },
      );
    }
    // the offer's own price rule, the contract's
    const price = offerPriceCents.safeParse(step.priceCentsPerDollar);
    if (!price.success) {
      throw new DomainError(
        "invalid_request",
        `${at}.priceCentsPerDollar ${price.error.issues[0]?.message ?? "is invalid"}; nothing was changed.`,
        { field: `${at}.priceCentsPerDollar` },
      );
    }
    steps.push({ fromUtc, priceCentsPerDollar: price.data });
  });
  return steps;
}

/** A stored schedule (the `offers.schedule` jsonb, written only through `parseSchedule`). */
export function storedSchedule(json: unknown): PriceStep[] | null {
  if (!Array.isArray(json) || json.length === 0) return null;
  return json.map((s) => {
    const step = s as { fromUtc: string; priceCentsPerDollar: number };
    return { fromUtc: step.fromUtc, priceCentsPerDollar: step.priceCentsPerDollar };
  });
}
