import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  effectivePrice,
  minuteOfDay,
  nextPriceChange,
  type PriceStep,
  parseSchedule,
  storedSchedule,
} from "../../../src/domain/supply/price-schedule.js";
import { isDomainError } from "../../../src/lib/errors.js";
import { hhmm, instantArb, scheduleArb } from "../../../testkit/schedules.js";

const at = (hhmmss: string, day = "2026-12-01") => new Date(`${day}T${hhmmss}Z`);

const withInstant = scheduleArb.chain((s) => fc.tuple(fc.constant(s), instantArb(s)));

function refusal(fn: () => unknown): { field: unknown; message: string } {
  try {
    fn();
  } catch (e) {
    if (isDomainError(e) && e.code === "invalid_request") return { field: e.details.field, message: e.message };
    throw e;
  }
  throw new Error("not refused");
}

describe("effectivePrice", () => {
  const offer = {
    priceCentsPerDollar: 60,
    schedule: [
      { fromUtc: "18:00", priceCentsPerDollar: 45 },
      { fromUtc: "21:30", priceCentsPerDollar: 30 },
      { fromUtc: "23:00", priceCentsPerDollar: 15 },
    ],
  };

  test("the step that most recently passed today, else the offer's own price", () => {
    expect(effectivePrice(offer, at("00:00:00"))).toBe(60);
    expect(effectivePrice(offer, at("17:59:59.999"))).toBe(60);
    expect(effectivePrice(offer, at("18:00:00"))).toBe(45);
    expect(effectivePrice(offer, at("21:29:59"))).toBe(45);
    expect(effectivePrice(offer, at("21:30:00"))).toBe(30);
    expect(effectivePrice(offer, at("23:00:00"))).toBe(15);
    expect(effectivePrice(offer, at("23:59:59.999"))).toBe(15);
  });

  test("no schedule, or an empty one: the offer's price all day", () => {
    expect(effectivePrice({ priceCentsPerDollar: 42, schedule: null }, at("12:00:00"))).toBe(42);
    expect(effectivePrice({ priceCentsPerDollar: 42, schedule: [] }, at("12:00:00"))).toBe(42);
  });

  test("a step at 00:00 is in effect from midnight; the day is UTC whatever the offset of the instant", () => {
    const o = { priceCentsPerDollar: 70, schedule: [{ fromUtc: "00:00", priceCentsPerDollar: 50 }] };
    expect(effectivePrice(o, at("00:00:00"))).toBe(50);
    // 23:30 in UTC-5 is 04:30 UTC the next day
    expect(effectivePrice(offer, new Date("2026-12-01T23:30:00-05:00"))).toBe(60);
  });

  test("property: equal to a direct reading of the rule (the last step at or before the minute)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 80 }), withInstant, (price, [schedule, now]) => {
        const minute = now.getUTCHours() * 60 + now.getUTCMinutes();
        const passed = schedule.filter((s) => minuteOfDay(s.fromUtc) <= minute);
        const expected = passed.length > 0 ? (passed[passed.length - 1] as PriceStep).priceCentsPerDollar : price;
        expect(effectivePrice({ priceCentsPerDollar: price, schedule }, now)).toBe(expected);
      }),
      { numRuns: 2_000 },
    );
  });

  test("property: constant between now and nextPriceChange, which is a step time or the next midnight", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 80 }), withInstant, (price, [schedule, now]) => {
        const o = { priceCentsPerDollar: price, schedule };
        const next = nextPriceChange(schedule, now);
        if (!next) throw new Error("a schedule has a next change");
        expect(next.getTime()).toBeGreaterThan(now.getTime());
        const nextMidnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
        expect(next.getTime()).toBeLessThanOrEqual(nextMidnight);
        expect(next.getTime() % 60_000).toBe(0);
        // the price just before the change is the price now
        expect(effectivePrice(o, new Date(next.getTime() - 1))).toBe(effectivePrice(o, now));
        if (next.getTime() < nextMidnight) {
          expect(schedule.map((s) => s.fromUtc)).toContain(hhmm((next.getTime() % 86_400_000) / 60_000));
        }
      }),
      { numRuns: 2_000 },
    );
    expect(nextPriceChange(null, at("12:00:00"))).toBeNull();
  });
});

describe("parseSchedule", () => {
  test("accepts 1-24 increasing steps, keeps only their two fields; null is no schedule", () => {
    expect(
      parseSchedule([
        { fromUtc: "18:00", priceCentsPerDollar: 45, note: "dropped" },
        { fromUtc: "23:59", priceCentsPerDollar: 1 },
      ]),
    ).toEqual([
      { fromUtc: "18:00", priceCentsPerDollar: 45 },
      { fromUtc: "23:59", priceCentsPerDollar: 1 },
    ]);
    expect(parseSchedule(null)).toBeNull();
    const full = Array.from({ length: 24 }, (_, h) => ({ fromUtc: hhmm(h * 60), priceCentsPerDollar: 80 - h }));
    expect(parseSchedule(full)).toHaveLength(24);
  });

  test("property: every generated schedule parses to itself and reads back from storage unchanged", () => {
    fc.assert(
      fc.property(scheduleArb, (s) => {
        expect(parseSchedule(s)).toEqual(s);
        expect(storedSchedule(JSON.parse(JSON.stringify(s)))).toEqual(s);
      }),
    );
  });

  test.each([
    ["not a list", "18:00", "schedule"],
    ["empty", [], "schedule"],
    [
      "25 steps",
      Array.from({ length: 25 }, (_, i) => ({ fromUtc: hhmm(i * 50), priceCentsPerDollar: 10 })),
      "schedule",
    ],
    ["a step that is not an object", [{ fromUtc: "01:00", priceCentsPerDollar: 10 }, 5], "schedule.1"],
    ["no fromUtc", [{ priceCentsPerDollar: 10 }], "schedule.0.fromUtc"],
    ["hour 24", [{ fromUtc: "24:00", priceCentsPerDollar: 10 }], "schedule.0.fromUtc"],
    ["one-digit hour", [{ fromUtc: "9:00", priceCentsPerDollar: 10 }], "schedule.0.fromUtc"],
    ["seconds", [{ fromUtc: "09:00:00", priceCentsPerDollar: 10 }], "schedule.0.fromUtc"],
    ["minute 60", [{ fromUtc: "09:60", priceCentsPerDollar: 10 }], "schedule.0.fromUtc"],
    [
      "a time not later than the one before",
      [
        { fromUtc: "09:00", priceCentsPerDollar: 50 },
        { fromUtc: "12:00", priceCentsPerDollar: 40 },
        { fromUtc: "12:00", priceCentsPerDollar: 30 },
      ],
      "schedule.2.fromUtc",
    ],
    [
      "a time before the one before",
      [
        { fromUtc: "09:00", priceCentsPerDollar: 50 },
        { fromUtc: "08:59", priceCentsPerDollar: 40 },
      ],
      "schedule.1.fromUtc",
    ],
    ["price 0", [{ fromUtc: "09:00", priceCentsPerDollar: 0 }], "schedule.0.priceCentsPerDollar"],
    ["price 81", [{ fromUtc: "09:00", priceCentsPerDollar: 81 }], "schedule.0.priceCentsPerDollar"],
    ["a fractional price", [{ fromUtc: "09:00", priceCentsPerDollar: 40.5 }], "schedule.0.priceCentsPerDollar"],
    ["a price as a string", [{ fromUtc: "09:00", priceCentsPerDollar: "40" }], "schedule.0.priceCentsPerDollar"],
  ])("refuses %s, naming the field", (_name, value, field) => {
    const r = refusal(() => parseSchedule(value));
    expect(r.field).toBe(field);
    expect(r.message.startsWith(field)).toBe(true);
  });
});
