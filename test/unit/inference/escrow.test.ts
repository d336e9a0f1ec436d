import { describe, expect, test } from "vitest";
import {
  MAX_TOPUP_UNITS,
  Slice,
  TOPUP_RESET_MS,
  TOPUP_SPEED_MS,
  TOPUP_UNITS,
} from "../../../src/domain/inference/escrow/escrow.js";

const slice = () => new Slice("holder-1", "buyer", "account-1");

describe("Slice: its state moves only through its methods", () => {
  test("grant adds to total; admit and release move used; free is total − used", () => {
    const s = slice();
    s.grant(1_000n);
    s.admit(300n);
    s.admit(200n);
    expect([s.total, s.used, s.free]).toEqual([1_000n, 500n, 500n]);
    s.release(300n);
    expect([s.total, s.used, s.free]).toEqual([1_000n, 200n, 800n]);
  });

  test("admitting more than is free throws and changes nothing (a slice is never overdrawn)", () => {
    const s = slice();
    s.grant(100n);
    s.admit(60n);
    expect(() => s.admit(41n)).toThrow(RangeError);
    expect([s.total, s.used]).toEqual([100n, 60n]);
    s.admit(40n);
    expect(s.free).toBe(0n);
  });

  test("spend takes a charge out of total; restore puts it back when the ending does not commit", () => {
    const s = slice();
    s.grant(1_000n);
    s.admit(400n);
    s.release(400n);
    s.spend(250n);
    expect(s.total).toBe(750n);
    s.restore(250n);
    expect(s.total).toBe(1_000n);
  });

  test("giveBack returns everything once nothing is in flight, and total is deducted at once", () => {
    const s = slice();
    s.grant(1_000n);
    s.admit(100n);
    s.release(100n);
    expect(s.giveBack()).toBe(1_000n);
    expect([s.total, s.used, s.giveBack()]).toEqual([0n, 0n, 0n]);
  });

  test("a lingering ending keeps an idle slice; takeIdle gives it all back once idle for the linger period", () => {
    const s = slice();
    s.grant(1_000n);
    s.admit(100n);
    s.release(100n);
    s.spend(40n); // the charge left with the ending
    expect(s.giveBack(true, 5_000)).toBe(0n);
    expect([s.total, s.used]).toEqual([960n, 0n]);
    expect(s.takeIdle(5_999, 1_000)).toBe(0n); // not idle long enough
    expect(s.takeIdle(6_000, 1_000)).toBe(960n);
    expect([s.total, s.takeIdle(9_000, 1_000)]).toEqual([0n, 0n]);
  });

  test("takeIdle leaves a slice in use or being topped up, and a new admission restarts the linger", () => {
    const s = slice();
    s.grant(500n);
    s.admit(100n);
    expect(s.takeIdle(10_000, 0)).toBe(0n); // in use
    s.release(100n);
    expect(s.giveBack(true, 1_000)).toBe(0n);
    s.admit(50n); // the next request: busy again
    expect(s.takeIdle(3_000, 1_000)).toBe(0n);
    s.release(50n);
    expect(s.giveBack(true, 3_000)).toBe(0n);
    s.taking = Promise.resolve();
    expect(s.takeIdle(9_000, 1_000)).toBe(0n); // a top-up under way
    s.taking = null;
    expect(s.takeIdle(9_000, 1_000)).toBe(500n);
  });

  test("an idle slice with no recorded ending starts its linger when first seen; restore holds it again", () => {
    const s = slice();
    s.grant(300n);
    expect(s.takeIdle(1_000, 500)).toBe(0n); // first seen idle now
    expect(s.takeIdle(1_500, 500)).toBe(300n);
    s.restore(300n); // the give-back did not commit
    expect(s.total).toBe(300n);
    expect(s.takeIdle(1_600, 500)).toBe(0n); // lingers again from now
    expect(s.takeIdle(2_100, 500)).toBe(300n);
  });

  test("while busy it keeps twice the larger of its in-flight need and its top-up size", () => {
    const s = slice();
    expect(s.want(10n, 100_000)).toBe(10n * TOPUP_UNITS); // unit 10, 8 units → asks for 80
    s.grant(1_000n);
    s.admit(10n);
    // keep = max(used 10, unit × units 80) = 80; free 990 > 160 → give back 990 − 80
    expect(s.giveBack()).toBe(910n);
    expect([s.total, s.used, s.free]).toEqual([90n, 10n, 80n]);
    // free 80 ≤ 2 × keep: nothing more goes back
    expect(s.giveBack()).toBe(0n);
  });

  test("want: the need, or the top-up size (doubling while top-ups come fast, reset after a quiet spell), or what is in use", () => {
    const s = slice();
    expect(s.want(5n, 100_000)).toBe(5n * TOPUP_UNITS);
    expect(s.want(5n, 100_000 + TOPUP_SPEED_MS - 1)).toBe(5n * TOPUP_UNITS * 2n);
    expect(s.want(5n, 100_000 + 2 * (TOPUP_SPEED_MS - 1))).toBe(5n * TOPUP_UNITS * 4n);
    // a larger need raises the unit
    expect(s.want(7n, 200_000 + TOPUP_RESET_MS)).toBe(7n * TOPUP_UNITS);
    // doubling stops at MAX_TOPUP_UNITS
    let asked = 0n;
    for (let i = 1; i <= 20; i++) asked = s.want(7n, 300_000 + i);
    expect(asked).toBe(7n * MAX_TOPUP_UNITS);
    // a need above the top-up size is asked in full
    expect(s.want(7n * MAX_TOPUP_UNITS * 3n, 300_021)).toBe(7n * MAX_TOPUP_UNITS * 3n * MAX_TOPUP_UNITS);
  });
});
