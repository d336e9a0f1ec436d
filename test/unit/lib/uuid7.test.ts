import { describe, expect, test } from "vitest";
import { newestReadBound } from "../../../src/lib/partitions.js";
import { uuidV7, uuidV7Time } from "../../../src/lib/uuid7.js";

describe("uuidV7: a support reference whose time is the request's start", () => {
  test.each([
    { label: "now", at: new Date() },
    { label: "the epoch", at: new Date(0) },
    { label: "a month's first millisecond", at: new Date("2026-12-01T00:00:00.000Z") },
    { label: "a month's last millisecond", at: new Date("2026-11-30T23:59:59.999Z") },
    { label: "the last 48-bit millisecond", at: new Date(0xffff_ffff_ffff) },
  ])("$label: version 7, variant 10, and its time back to the millisecond", ({ at }) => {
    const id = uuidV7(at);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(uuidV7Time(id)?.getTime()).toBe(at.getTime());
  });

  test("the random bits are where they belong; two at one instant differ; they sort by time", () => {
    const at = new Date("2026-11-28T21:00:00.123Z");
    expect(uuidV7(at).replaceAll("-", "").slice(0, 12)).toBe(at.getTime().toString(16).padStart(12, "0"));
    expect(uuidV7(at, Buffer.alloc(10, 0)).slice(14)).toBe("7000-8000-000000000000");
    expect(uuidV7(at, Buffer.alloc(10, 0xff)).slice(14)).toBe("7fff-bfff-ffffffffffff");
    expect(uuidV7(at)).not.toBe(uuidV7(at));
    const earlier = uuidV7(new Date(at.getTime() - 1));
    expect(earlier < uuidV7(at)).toBe(true);
  });

  test("any other uuid has no time (a v4 reference made before v7 ones); a bad time is refused", () => {
    expect(uuidV7Time("0b0f70a5-6885-4de0-9140-318de6bdf0c3")).toBeNull();
    expect(uuidV7Time("01a16e11-157f-7f4c-1be8-e84965edaad5")).toBeNull(); // variant not 10
    expect(uuidV7Time("not a uuid")).toBeNull();
    expect(() => uuidV7(new Date(-1))).toThrow(RangeError);
    expect(() => uuidV7(new Date(Number.NaN))).toThrow(RangeError);
  });
});

describe("newestReadBound: what a newest-first read of a partitioned table is bounded by", () => {
  const now = new Date("2026-11-28T21:00:00.000Z");
  test.each([
    { label: "no cursor: now and a day", cursor: undefined, want: "2026-11-29T21:00:00.000Z" },
    { label: "a cursor: its time", cursor: new Date("2026-10-01T00:00:00.000Z"), want: "2026-10-01T00:00:00.000Z" },
    {
      label: "a cursor beyond a day ahead: now and a day",
      cursor: new Date("2027-01-01T00:00:00.000Z"),
      want: "2026-11-29T21:00:00.000Z",
    },
  ])("$label", ({ cursor, want }) => {
    expect(newestReadBound(now, cursor).toISOString()).toBe(want);
  });
});
