import { describe, expect, test } from "vitest";
import {
  BALANCE_SHARE_DIVISOR,
  DEFAULT_MAX_COMPLETION_TOKENS,
  estimatePromptTokens,
  MIN_ADMITTED_TOKENS,
  maxChargeFor,
  planAdmission,
  RESERVE_FLOOR_TOKENS,
  textPricer,
} from "../../../src/domain/inference/pipeline/admission.js";
import type { TextPricing } from "../../../src/lib/money.js";

// 1 DIEM per 1M input tokens, 3 DIEM per 1M output tokens (micro-DIEM per 1M tokens)
const PRICING: TextPricing = { inputMicroPerM: 1_000_000n, outputMicroPerM: 3_000_000n };
const base = {
  pricing: PRICING,
  promptEstimate: 1_000,
  requestedMaxTokens: 500 as number | undefined,
  modelMaxCompletionTokens: null as number | null,
  ceilingCents: 50,
};

describe("estimatePromptTokens", () => {
  test("bytes / 3, rounded up, plus 16 per message (at least one)", () => {
    expect(estimatePromptTokens("abc", 0)).toBe(1 + 16);
    expect(estimatePromptTokens("abcd", 2)).toBe(2 + 32);
    // non-strings are measured as their JSON: [1] is 3 bytes
    expect(estimatePromptTokens([1], 1)).toBe(1 + 16);
    // UTF-8 bytes, not characters: "é" is two bytes
    expect(estimatePromptTokens("ééé", 1)).toBe(2 + 16);
  });
});

describe("maxChargeFor", () => {
  test("the maximum burn bought at the ceiling, rounded down to the micro-USDC", () => {
    expect(maxChargeFor(1_000_000n, 50)).toBe(500_000n);
    expect(maxChargeFor(3n, 50)).toBe(1n); // 1.5 → 1
    expect(maxChargeFor(0n, 80)).toBe(0n);
  });
});

describe("planAdmission", () => {
  test("an unconstrained buyer gets what they asked, and the maximum is burn(prompt, cap) at the ceiling", () => {
    const p = planAdmission({ ...base, availableMicroUsdc: 10n ** 12n });
    // burn = 1000 × 1 + 500 × 3 = 2500 micro-DIEM; charge at 50¢ = 1250 micro-USDC
    expect(p).toEqual({
      promptEstimate: 1_000,
      admittedMaxTokens: 500,
      maxBurnMicroDiem: 2_500n,
      maxChargeMicroUsdc: 1_250n,
    });
  });

  test("the cap is the smallest of the request, the model's cap and the default", () => {
    expect(
      planAdmission({ ...base, modelMaxCompletionTokens: 200, availableMicroUsdc: 10n ** 12n })?.admittedMaxTokens,
    ).toBe(200);
    expect(
      planAdmission({ ...base, requestedMaxTokens: undefined, availableMicroUsdc: 10n ** 12n })?.admittedMaxTokens,
    ).toBe(DEFAULT_MAX_COMPLETION_TOKENS);
  });

  test("a short balance lowers the cap to the largest affordable one: exactly affordable admits, one micro short does not", () => {
    // 300 tokens: burn 1000 + 900 = 1900 → 950 micro-USDC at 50¢
    const exact = planAdmission({ ...base, availableMicroUsdc: 950n });
    expect(exact?.admittedMaxTokens).toBe(300);
    expect(exact?.maxChargeMicroUsdc).toBe(950n);
    // 949: 300 tokens cost 950; 299 tokens: burn 1897 → 948 (floor of 948.5)
    const short = planAdmission({ ...base, availableMicroUsdc: 949n });
    expect(short?.admittedMaxTokens).toBe(299);
    expect(short?.maxChargeMicroUsdc).toBeLessThanOrEqual(949n);
  });

  test("below MIN_ADMITTED_TOKENS affordable tokens the request is refused", () => {
    // 16 tokens: burn 1000 + 48 = 1048 → 524; 15 tokens: 1045 → 522
    expect(planAdmission({ ...base, availableMicroUsdc: 524n })?.admittedMaxTokens).toBe(MIN_ADMITTED_TOKENS);
    expect(planAdmission({ ...base, availableMicroUsdc: 523n })).toBeUndefined();
    // a buyer who asked for fewer than 16 gets them when affordable
    expect(planAdmission({ ...base, requestedMaxTokens: 4, availableMicroUsdc: 506n })?.admittedMaxTokens).toBe(4);
  });

  test("the maximum charge never exceeds the available balance, whatever the balance", () => {
    for (const available of [524n, 600n, 777n, 949n, 1_000n, 1_249n, 1_250n, 5_000n]) {
      const p = planAdmission({ ...base, availableMicroUsdc: available });
      expect(p, String(available)).toBeDefined();
      expect(p?.maxChargeMicroUsdc).toBeLessThanOrEqual(available);
    }
  });
});

describe("planAdmission: an unbounded request reserves a share of a short balance (issue 18 finding 5)", () => {
  const unbounded = { ...base, requestedMaxTokens: undefined, modelMaxCompletionTokens: 100_000 };

  test("a balance short of the model's full cap: the cap is sized to 1/8 of it, not the whole balance", () => {
    // the full cap would cost burn(1000 + 300000) = 301000 → 150500 at 50¢; the balance is 100000
    const p = planAdmission({ ...unbounded, availableMicroUsdc: 100_000n });
    // 1/8 of 100000 = 12500 → burn ≤ 25000 → (25000 − 1000) / 3 = 8000 tokens
    expect(p).toMatchObject({ admittedMaxTokens: 8_000, maxChargeMicroUsdc: 12_500n });
    expect(p?.maxChargeMicroUsdc).toBeLessThanOrEqual(100_000n / BALANCE_SHARE_DIVISOR);
  });

  test("a share smaller than a useful completion: RESERVE_FLOOR_TOKENS' worth when affordable", () => {
    // 1024 tokens cost burn(1000 + 3072) = 4072 → 2036; 1/8 of 8000 is only 1000
    const p = planAdmission({ ...unbounded, availableMicroUsdc: 8_000n });
    expect(p?.admittedMaxTokens).toBe(RESERVE_FLOOR_TOKENS);
    expect(p?.maxChargeMicroUsdc).toBe(2_036n);
  });

  test("eight concurrent unbounded requests all fit a balance that covers each many times over", () => {
    let available = 4_920_000n;
    for (let i = 0; i < 8; i++) {
      const p = planAdmission({ ...unbounded, ceilingCents: 80, availableMicroUsdc: available });
      expect(p, `request ${i + 1}`).toBeDefined();
      available -= p?.maxChargeMicroUsdc ?? 0n;
    }
    expect(available).toBeGreaterThan(0n);
  });

  test("the maximum charge never exceeds the available balance, and never 402 while 16 tokens are affordable", () => {
    for (let available = 524n; available < 400_000n; available = (available * 7n) / 5n) {
      const p = planAdmission({ ...unbounded, availableMicroUsdc: available });
      expect(p, String(available)).toBeDefined();
      expect(p?.maxChargeMicroUsdc).toBeLessThanOrEqual(available);
      expect(p?.admittedMaxTokens).toBeGreaterThanOrEqual(MIN_ADMITTED_TOKENS);
    }
    expect(planAdmission({ ...unbounded, availableMicroUsdc: 523n })).toBeUndefined();
  });
});

describe("textPricer", () => {
  test("plans with the catalog's rates and burns the usage at the same rates", () => {
    const pricer = textPricer({ pricing: PRICING, maxCompletionTokens: 100 }, 1_000, 500);
    expect(pricer.plan(50, 10n ** 12n)?.admittedMaxTokens).toBe(100);
    expect(pricer.burn({ promptTokens: 10, completionTokens: 2 })).toBe(16n);
    // rounded up to the whole micro-DIEM
    expect(
      textPricer({ pricing: { inputMicroPerM: 1n, outputMicroPerM: 1n }, maxCompletionTokens: null }, 1, 1).burn({
        promptTokens: 1,
        completionTokens: 0,
      }),
    ).toBe(1n);
  });
});
