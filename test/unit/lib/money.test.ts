import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  burnMicroDiem,
  computeCharge,
  formatDecimal6,
  grossMicroUsdc,
  MoneyError,
  mulDivCeil,
  mulDivFloor,
  parseDecimal6,
  splitGross,
  upstreamDecimalToMicro,
  worstBurnMicroDiem,
} from "../../../src/lib/money.js";

describe("computeCharge: labelled edge cases (floor gross, floor fee, supplier = remainder)", () => {
  test.each([
    { label: "zero burn", burn: 0n, price: 50, bps: 1000, gross: 0n, fee: 0n, supplier: 0n },
    {
      label: "1 DIEM at 50c",
      burn: 1_000_000n,
      price: 50,
      bps: 1000,
      gross: 500_000n,
      fee: 50_000n,
      supplier: 450_000n,
    },
    { label: "1 micro-DIEM at 80c floors to 0", burn: 1n, price: 80, bps: 1000, gross: 0n, fee: 0n, supplier: 0n },
    { label: "2 micro-DIEM at 50c is exactly 1", burn: 2n, price: 50, bps: 1000, gross: 1n, fee: 0n, supplier: 1n },
    { label: "fee remainder goes to supplier", burn: 19n, price: 100, bps: 1000, gross: 19n, fee: 1n, supplier: 18n },
    {
      label: "odd burn at 33c",
      burn: 1_234_567n,
      price: 33,
      bps: 1000,
      gross: 407_407n,
      fee: 40_740n,
      supplier: 366_667n,
    },
    { label: "zero fee", burn: 1_000_000n, price: 30, bps: 0, gross: 300_000n, fee: 0n, supplier: 300_000n },
    { label: "full fee", burn: 1_000_000n, price: 30, bps: 10_000, gross: 300_000n, fee: 300_000n, supplier: 0n },
    { label: "1 cent price", burn: 99n, price: 1, bps: 1000, gross: 0n, fee: 0n, supplier: 0n },
    {
      label: "large burn (1000 DIEM at 80c)",
      burn: 1_000_000_000n,
      price: 80,
      bps: 1000,
      gross: 800_000_000n,
      fee: 80_000_000n,
      supplier: 720_000_000n,
    },
  ])("$label", ({ burn, price, bps, gross, fee, supplier }) => {
    const c = computeCharge(burn, price, bps);
    expect(c.grossMicroUsdc).toBe(gross);
    expect(c.feeMicroUsdc).toBe(fee);
    expect(c.supplierMicroUsdc).toBe(supplier);
  });

  test("rejects a negative burn and an out-of-range price or fee", () => {
    expect(() => computeCharge(-1n, 50, 1000)).toThrow(MoneyError);
    expect(() => computeCharge(1n, 101, 1000)).toThrow(MoneyError);
    expect(() => computeCharge(1n, 1.5, 1000)).toThrow(MoneyError);
    expect(() => computeCharge(1n, 50, 10_001)).toThrow(MoneyError);
  });
});

describe("computeCharge: properties", () => {
  const burn = fc.bigInt({ min: 0n, max: 10n ** 15n });
  const price = fc.integer({ min: 1, max: 80 });
  const bps = fc.integer({ min: 0, max: 10_000 });

  test("fee + supplier share = gross exactly", () => {
    fc.assert(
      fc.property(burn, price, bps, (b, p, f) => {
        const c = computeCharge(b, p, f);
        return c.feeMicroUsdc + c.supplierMicroUsdc === c.grossMicroUsdc;
      }),
      { numRuns: 2000 },
    );
  });

  test("charge never exceeds burn × ceiling (for any clearing price at or below the ceiling)", () => {
    fc.assert(
      fc.property(burn, price, fc.integer({ min: 30, max: 80 }), (b, p, ceiling) => {
        fc.pre(p <= ceiling);
        const c = computeCharge(b, p, 1000);
        // exact comparison in integers: gross × 100 ≤ burn × ceiling
        return c.grossMicroUsdc * 100n <= b * BigInt(ceiling);
      }),
      { numRuns: 2000 },
    );
  });

  test("no negative results, and the charge is within one micro-USDC of the exact product", () => {
    fc.assert(
      fc.property(burn, price, bps, (b, p, f) => {
        const c = computeCharge(b, p, f);
        const exactTimes100 = b * BigInt(p);
        return (
          c.grossMicroUsdc >= 0n &&
          c.feeMicroUsdc >= 0n &&
          c.supplierMicroUsdc >= 0n &&
          exactTimes100 - c.grossMicroUsdc * 100n < 100n
        );
      }),
      { numRuns: 2000 },
    );
  });

  test("a cheaper clearing price never costs more", () => {
    fc.assert(
      fc.property(burn, price, price, (b, p1, p2) => {
        const [lo, hi] = p1 <= p2 ? [p1, p2] : [p2, p1];
        return grossMicroUsdc(b, lo) <= grossMicroUsdc(b, hi);
      }),
    );
  });

  test("splitGross agrees with computeCharge", () => {
    fc.assert(
      fc.property(burn, price, bps, (b, p, f) => {
        const c = computeCharge(b, p, f);
        const s = splitGross(c.grossMicroUsdc, f);
        return s.feeMicroUsdc === c.feeMicroUsdc && s.supplierMicroUsdc === c.supplierMicroUsdc;
      }),
    );
  });
});

describe("mulDiv rounding", () => {
  test.each([
    { label: "exact", a: 10n, b: 10n, d: 4n, floor: 25n, ceil: 25n },
    { label: "fraction", a: 10n, b: 1n, d: 3n, floor: 3n, ceil: 4n },
    { label: "zero", a: 0n, b: 5n, d: 7n, floor: 0n, ceil: 0n },
  ])("$label", ({ a, b, d, floor, ceil }) => {
    expect(mulDivFloor(a, b, d)).toBe(floor);
    expect(mulDivCeil(a, b, d)).toBe(ceil);
  });
  test("rejects a zero divisor and negative operands", () => {
    expect(() => mulDivFloor(1n, 1n, 0n)).toThrow(MoneyError);
    expect(() => mulDivCeil(-1n, 1n, 1n)).toThrow(MoneyError);
  });
});

describe("burnMicroDiem (usage × per-million rates, rounded up)", () => {
  const glm = { inputMicroPerM: 1_540_000n, outputMicroPerM: 4_840_000n, cacheMicroPerM: 286_000n };
  test.each([
    { label: "no tokens", usage: { promptTokens: 0, completionTokens: 0 }, burn: 0n },
    // 612 × 1.54 + 146 × 4.84 = 942.48 + 706.64 = 1649.12 micro → 1650
    { label: "doc example rounds up", usage: { promptTokens: 612, completionTokens: 146 }, burn: 1650n },
    // (1000 − 400) × 1.54 + 400 × 0.286 = 924 + 114.4 → 1039
    {
      label: "cached tokens at the cache rate",
      usage: { promptTokens: 1000, completionTokens: 0, cachedTokens: 400 },
      burn: 1039n,
    },
    { label: "one million output tokens", usage: { promptTokens: 0, completionTokens: 1_000_000 }, burn: 4_840_000n },
  ])("$label", ({ usage, burn }) => {
    expect(burnMicroDiem(glm, usage)).toBe(burn);
  });

  test("missing cache rate bills cached tokens at the input rate", () => {
    const p = { inputMicroPerM: 1_000_000n, outputMicroPerM: 2_000_000n };
    expect(burnMicroDiem(p, { promptTokens: 10, completionTokens: 0, cachedTokens: 10 })).toBe(10n);
  });

  test("extended tier applies to the whole request above the threshold", () => {
    const p = {
      inputMicroPerM: 2_500_000n,
      outputMicroPerM: 15_000_000n,
      extended: { thresholdTokens: 200_000, inputMicroPerM: 5_000_000n, outputMicroPerM: 22_500_000n },
    };
    expect(burnMicroDiem(p, { promptTokens: 200_000, completionTokens: 0 })).toBe(500_000n);
    expect(burnMicroDiem(p, { promptTokens: 200_001, completionTokens: 0 })).toBe(1_000_005n);
  });

  test("rejects fractional or negative token counts and cached > prompt", () => {
    expect(() => burnMicroDiem(glm, { promptTokens: 1.5, completionTokens: 0 })).toThrow(MoneyError);
    expect(() => burnMicroDiem(glm, { promptTokens: -1, completionTokens: 0 })).toThrow(MoneyError);
    expect(() => burnMicroDiem(glm, { promptTokens: 1, completionTokens: 0, cachedTokens: 2 })).toThrow(MoneyError);
  });

  test("cache writes bill at the cache-write rate; without one, at the input rate", () => {
    const sonnet = { ...glm, cacheWriteMicroPerM: 1_925_000n };
    // (1000 − 400 − 300) × 1.54 + 400 × 0.286 + 300 × 1.925 = 462 + 114.4 + 577.5 = 1153.9 → 1154
    const usage = { promptTokens: 1000, completionTokens: 0, cachedTokens: 400, cacheWriteTokens: 300 };
    expect(burnMicroDiem(sonnet, usage)).toBe(1154n);
    // no cache-write rate: the 300 writes cost what 300 uncached tokens cost (1039 as above)
    expect(burnMicroDiem(glm, usage)).toBe(1039n);
    expect(() =>
      burnMicroDiem(glm, { promptTokens: 10, completionTokens: 0, cachedTokens: 6, cacheWriteTokens: 5 }),
    ).toThrow(MoneyError);
  });

  test("the extended tier's cache-write rate applies above its threshold", () => {
    const p = {
      inputMicroPerM: 1_000_000n,
      outputMicroPerM: 1_000_000n,
      cacheWriteMicroPerM: 2_000_000n,
      extended: {
        thresholdTokens: 10,
        inputMicroPerM: 3_000_000n,
        outputMicroPerM: 3_000_000n,
        cacheWriteMicroPerM: 7_000_000n,
      },
    };
    expect(burnMicroDiem(p, { promptTokens: 10, completionTokens: 0, cacheWriteTokens: 10 })).toBe(20n);
    expect(burnMicroDiem(p, { promptTokens: 11, completionTokens: 0, cacheWriteTokens: 10 })).toBe(73n);
  });

  test("property: the worst burn of a prompt bounds every split into uncached, cache reads and cache writes", () => {
    const rate = fc.bigInt({ min: 0n, max: 20_000_000n });
    fc.assert(
      fc.property(
        rate,
        rate,
        fc.option(rate, { nil: null }),
        fc.option(rate, { nil: null }),
        fc.nat(100_000),
        fc.nat(10_000),
        fc.nat(100_000),
        fc.nat(100_000),
        (input, output, cache, write, prompt, completion, a, b) => {
          const p = {
            inputMicroPerM: input,
            outputMicroPerM: output,
            cacheMicroPerM: cache,
            cacheWriteMicroPerM: write,
          };
          const cachedTokens = prompt === 0 ? 0 : a % (prompt + 1);
          const cacheWriteTokens = prompt - cachedTokens === 0 ? 0 : b % (prompt - cachedTokens + 1);
          const worst = worstBurnMicroDiem(p, { promptTokens: prompt, completionTokens: completion });
          const burn = burnMicroDiem(p, {
            promptTokens: prompt,
            completionTokens: completion,
            cachedTokens,
            cacheWriteTokens,
          });
          return burn <= worst;
        },
      ),
    );
  });

  test("the worst burn is the plain burn when no cache rate is above the input rate", () => {
    expect(worstBurnMicroDiem(glm, { promptTokens: 1000, completionTokens: 50 })).toBe(
      burnMicroDiem(glm, { promptTokens: 1000, completionTokens: 50 }),
    );
    const sonnet = { inputMicroPerM: 3_600_000n, outputMicroPerM: 18_000_000n, cacheWriteMicroPerM: 4_500_000n };
    expect(worstBurnMicroDiem(sonnet, { promptTokens: 1000, completionTokens: 0 })).toBe(4500n);
  });

  test("property: burn is monotone in tokens and never below the exact cost", () => {
    fc.assert(
      fc.property(fc.nat(10_000_000), fc.nat(10_000_000), fc.nat(1000), (p, c, extra) => {
        const b1 = burnMicroDiem(glm, { promptTokens: p, completionTokens: c });
        const b2 = burnMicroDiem(glm, { promptTokens: p + extra, completionTokens: c + extra });
        const exact = BigInt(p) * glm.inputMicroPerM + BigInt(c) * glm.outputMicroPerM;
        return (
          b2 >= b1 && b1 * 1_000_000n >= exact && (b1 - 1n) * 1_000_000n < exact + (exact === 0n ? 1_000_000n : 0n)
        );
      }),
    );
  });
});

describe("decimal strings", () => {
  test.each([
    { label: "zero", micro: 0n, text: "0.000000" },
    { label: "one micro", micro: 1n, text: "0.000001" },
    { label: "whole", micro: 5_000_000n, text: "5.000000" },
    { label: "negative", micro: -1_500_000n, text: "-1.500000" },
    { label: "large", micro: 123_456_789_012_345n, text: "123456789.012345" },
  ])("format $label", ({ micro, text }) => {
    expect(formatDecimal6(micro)).toBe(text);
  });

  test.each([
    { text: "1", micro: 1_000_000n },
    { text: "1.5", micro: 1_500_000n },
    { text: "0.000001", micro: 1n },
    { text: "10.000000", micro: 10_000_000n },
    { text: "1.0000001", micro: undefined },
    { text: "-1", micro: undefined },
    { text: "1e6", micro: undefined },
    { text: "abc", micro: undefined },
    { text: "", micro: undefined },
    { text: ".5", micro: undefined },
  ])("parse $text", ({ text, micro }) => {
    expect(parseDecimal6(text)).toBe(micro);
  });

  test("property: parse(format(x)) = x", () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 10n ** 20n }), (x) => parseDecimal6(formatDecimal6(x)) === x));
  });

  test.each([
    { label: "price", value: 1.54, micro: 1_540_000n },
    { label: "sub-micro rounds up", value: 0.0000001, micro: 1n },
    { label: "exponent form", value: 1.5e-7, micro: 1n },
    { label: "string", value: "30.8471", micro: 30_847_100n },
    { label: "integer", value: 15, micro: 15_000_000n },
    { label: "negative truncates toward zero", value: -0.0000015, micro: -1n },
  ])("upstream decimal $label", ({ value, micro }) => {
    expect(upstreamDecimalToMicro(value)).toBe(micro);
  });
});
