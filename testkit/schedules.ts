import fc from "fast-check";
import { MAX_SCHEDULE_STEPS, type PriceStep } from "../src/domain/supply/price-schedule.js";

/** Price schedules (issue 30) as property tests draw them. */

/** "HH:MM" of a minute of the day (0-1439). */
export function hhmm(minute: number): string {
  return `${String(Math.floor(minute / 60)).padStart(2, "0")}:${String(minute % 60).padStart(2, "0")}`;
}

/** A valid schedule: 1-24 distinct minutes of the day, increasing, each with a price 1-80. */
export const scheduleArb: fc.Arbitrary<PriceStep[]> = fc
  .uniqueArray(fc.integer({ min: 0, max: 1439 }), { minLength: 1, maxLength: MAX_SCHEDULE_STEPS })
  .chain((minutes) =>
    fc.tuple(
      fc.constant([...minutes].sort((a, b) => a - b)),
      fc.array(fc.integer({ min: 1, max: 80 }), { minLength: minutes.length, maxLength: minutes.length }),
    ),
  )
  .map(([minutes, prices]) => minutes.map((m, i) => ({ fromUtc: hhmm(m), priceCentsPerDollar: prices[i] as number })));

/** Any instant of a few years, to the millisecond; a third of them on a step's own minute boundary. */
export function instantArb(schedule?: PriceStep[]): fc.Arbitrary<Date> {
  const any = fc.integer({ min: Date.UTC(2026, 0, 1), max: Date.UTC(2029, 0, 1) }).map((ms) => new Date(ms));
  if (!schedule || schedule.length === 0) return any;
  const onStep = fc
    .tuple(
      fc.integer({ min: 0, max: 365 * 3 }),
      fc.constantFrom(...schedule),
      fc.constantFrom(-1, 0, 1, 59_999, 60_000),
    )
    .map(([day, step, offsetMs]) => {
      const [h, m] = step.fromUtc.split(":").map(Number);
      return new Date(Date.UTC(2026, 0, 1 + day, h, m) + offsetMs);
    });
  return fc.oneof(any, any, onStep);
}
