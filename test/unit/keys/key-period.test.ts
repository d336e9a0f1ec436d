import { describe, expect, test } from "vitest";
import { budgetPeriod, type LimitReset } from "../../../src/domain/keys/key-period.js";
import { keyUsage } from "../../../src/domain/keys/key-policy.js";

const at = (iso: string) => new Date(iso);
const iso = (d: Date | null) => d?.toISOString() ?? null;

describe("budgetPeriod: UTC boundaries (start inclusive, end exclusive)", () => {
  test.each<{ label: string; reset: LimitReset; now: string; start: string | null; end: string | null }>([
    {
      label: "daily: mid-day",
      reset: "daily",
      now: "2026-03-10T15:42:07.123Z",
      start: "2026-03-10T00:00:00.000Z",
      end: "2026-03-11T00:00:00.000Z",
    },
    {
      label: "daily: exactly midnight starts the new day",
      reset: "daily",
      now: "2026-03-11T00:00:00.000Z",
      start: "2026-03-11T00:00:00.000Z",
      end: "2026-03-12T00:00:00.000Z",
    },
    {
      label: "daily: the last millisecond of a day",
      reset: "daily",
      now: "2026-03-10T23:59:59.999Z",
      start: "2026-03-10T00:00:00.000Z",
      end: "2026-03-11T00:00:00.000Z",
    },
    {
      label: "daily: 31 December rolls into the next year",
      reset: "daily",
      now: "2026-12-31T23:00:00.000Z",
      start: "2026-12-31T00:00:00.000Z",
      end: "2027-01-01T00:00:00.000Z",
    },
    {
      label: "daily: leap day",
      reset: "daily",
      now: "2028-02-29T12:00:00.000Z",
      start: "2028-02-29T00:00:00.000Z",
      end: "2028-03-01T00:00:00.000Z",
    },
    {
      label: "weekly: a Monday is the first day of its week",
      reset: "weekly",
      now: "2026-03-09T00:00:00.000Z",
      start: "2026-03-09T00:00:00.000Z",
      end: "2026-03-16T00:00:00.000Z",
    },
    {
      label: "weekly: a Wednesday",
      reset: "weekly",
      now: "2026-03-11T08:00:00.000Z",
      start: "2026-03-09T00:00:00.000Z",
      end: "2026-03-16T00:00:00.000Z",
    },
    {
      label: "weekly: Sunday's last millisecond is still the same week",
      reset: "weekly",
      now: "2026-03-15T23:59:59.999Z",
      start: "2026-03-09T00:00:00.000Z",
      end: "2026-03-16T00:00:00.000Z",
    },
    {
      label: "weekly: Sunday → Monday starts the next week",
      reset: "weekly",
      now: "2026-03-16T00:00:00.000Z",
      start: "2026-03-16T00:00:00.000Z",
      end: "2026-03-23T00:00:00.000Z",
    },
    {
      label: "weekly: a week across a month and a year end",
      reset: "weekly",
      now: "2027-01-01T10:00:00.000Z",
      start: "2026-12-28T00:00:00.000Z",
      end: "2027-01-04T00:00:00.000Z",
    },
    {
      label: "weekly: across the leap day",
      reset: "weekly",
      now: "2028-03-01T00:00:00.000Z",
      start: "2028-02-28T00:00:00.000Z",
      end: "2028-03-06T00:00:00.000Z",
    },
    {
      label: "monthly: a 31-day month's last millisecond",
      reset: "monthly",
      now: "2026-01-31T23:59:59.999Z",
      start: "2026-01-01T00:00:00.000Z",
      end: "2026-02-01T00:00:00.000Z",
    },
    {
      label: "monthly: February of a common year",
      reset: "monthly",
      now: "2026-02-28T23:59:59.999Z",
      start: "2026-02-01T00:00:00.000Z",
      end: "2026-03-01T00:00:00.000Z",
    },
    {
      label: "monthly: February of a leap year ends after the 29th",
      reset: "monthly",
      now: "2028-02-29T23:59:59.999Z",
      start: "2028-02-01T00:00:00.000Z",
      end: "2028-03-01T00:00:00.000Z",
    },
    {
      label: "monthly: the 1st at midnight starts the month",
      reset: "monthly",
      now: "2026-04-01T00:00:00.000Z",
      start: "2026-04-01T00:00:00.000Z",
      end: "2026-05-01T00:00:00.000Z",
    },
    {
      label: "monthly: December rolls into January",
      reset: "monthly",
      now: "2026-12-15T00:00:00.000Z",
      start: "2026-12-01T00:00:00.000Z",
      end: "2027-01-01T00:00:00.000Z",
    },
    {
      label: "never: one period without bounds",
      reset: "never",
      now: "2026-03-10T15:00:00.000Z",
      start: null,
      end: null,
    },
  ])("$label", ({ reset, now, start, end }) => {
    const p = budgetPeriod(reset, at(now));
    expect({ start: iso(p.start), end: iso(p.end) }).toEqual({ start, end });
  });

  test("a UTC boundary whatever the host's time zone: the period of 23:30 UTC on a Sunday is that week", () => {
    // 2026-03-15 is a Sunday; in UTC+2 it is already Monday 01:30 locally
    const p = budgetPeriod("weekly", at("2026-03-15T23:30:00.000Z"));
    expect(iso(p.start)).toBe("2026-03-09T00:00:00.000Z");
  });
});

describe("keyUsage: remaining floored at 0, resetsAt the period end", () => {
  const now = at("2026-03-11T08:00:00.000Z");
  test.each([
    {
      label: "no limit: remaining and resetsAt null",
      limit: null,
      reset: "daily" as LimitReset,
      spent: 5n,
      remaining: null,
      resetsAt: null,
    },
    {
      label: "daily limit, partly spent",
      limit: 1_000_000n,
      reset: "daily" as LimitReset,
      spent: 250_001n,
      remaining: 749_999n,
      resetsAt: "2026-03-12T00:00:00.000Z",
    },
    {
      label: "spent exactly the limit",
      limit: 1_000_000n,
      reset: "weekly" as LimitReset,
      spent: 1_000_000n,
      remaining: 0n,
      resetsAt: "2026-03-16T00:00:00.000Z",
    },
    {
      label: "spent past the limit: remaining 0, not negative",
      limit: 1_000_000n,
      reset: "monthly" as LimitReset,
      spent: 1_000_007n,
      remaining: 0n,
      resetsAt: "2026-04-01T00:00:00.000Z",
    },
    {
      label: "a limit that never resets",
      limit: 2_000_000n,
      reset: "never" as LimitReset,
      spent: 1n,
      remaining: 1_999_999n,
      resetsAt: null,
    },
  ])("$label", ({ limit, reset, spent, remaining, resetsAt }) => {
    const u = keyUsage({ limitMicroUsdc: limit, limitReset: reset }, spent, now);
    expect({ spent: u.spentMicroUsdc, remaining: u.remainingMicroUsdc, resetsAt: iso(u.resetsAt) }).toEqual({
      spent,
      remaining,
      resetsAt,
    });
  });
});
