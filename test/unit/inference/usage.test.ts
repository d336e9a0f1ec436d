import { describe, expect, test } from "vitest";
import { burnedOnKey } from "../../../src/adapters/upstream/answer-facts.js";
import { reportedDiemBalance } from "../../../src/adapters/upstream/client.js";
import type { Usage } from "../../../src/domain/inference/pipeline/session.js";
import { billIncomplete, usageOf } from "../../../src/domain/inference/settlement/usage.js";

describe("usageOf: the upstream's usage, the only basis of a charge", () => {
  test("reads both shapes, with cached tokens", () => {
    expect(usageOf({ prompt_tokens: 12, completion_tokens: 30, prompt_tokens_details: { cached_tokens: 4 } })).toEqual({
      promptTokens: 12,
      completionTokens: 30,
      cachedTokens: 4,
    });
    expect(usageOf({ input_tokens: 7, output_tokens: 9, input_tokens_details: { cached_tokens: 2 } })).toEqual({
      promptTokens: 7,
      completionTokens: 9,
      cachedTokens: 2,
    });
    expect(usageOf({ prompt_tokens: 5, completion_tokens: 0 })).toEqual({
      promptTokens: 5,
      completionTokens: 0,
      cachedTokens: 0,
    });
  });

  test("cached tokens never exceed the prompt; fractions are floored", () => {
    expect(usageOf({ prompt_tokens: 3, completion_tokens: 2.9, prompt_tokens_details: { cached_tokens: 10 } })).toEqual(
      {
        promptTokens: 3,
        completionTokens: 2,
        cachedTokens: 3,
      },
    );
  });

  test.each([
    ["missing", undefined],
    ["not an object", "12"],
    ["no completion count", { prompt_tokens: 3 }],
    ["negative", { prompt_tokens: 3, completion_tokens: -1 }],
    ["not finite", { prompt_tokens: Number.NaN, completion_tokens: 4 }],
    ["infinite", { prompt_tokens: 1, completion_tokens: Number.POSITIVE_INFINITY }],
    ["a string count", { prompt_tokens: "3", completion_tokens: 4 }],
  ])("%s → no usage (the answer falls forward instead of being charged)", (_name, u) => {
    expect(usageOf(u)).toBeUndefined();
  });

  test("reads cache writes (cache_creation_input_tokens), at most what the cache reads leave of the prompt", () => {
    expect(
      usageOf({
        prompt_tokens: 100,
        completion_tokens: 5,
        prompt_tokens_details: { cached_tokens: 30, cache_creation_input_tokens: 50 },
      }),
    ).toEqual({ promptTokens: 100, completionTokens: 5, cachedTokens: 30, cacheWriteTokens: 50 });
    expect(
      usageOf({
        input_tokens: 10,
        output_tokens: 1,
        input_tokens_details: { cached_tokens: 4, cache_creation_input_tokens: 9 },
      }),
    ).toEqual({ promptTokens: 10, completionTokens: 1, cachedTokens: 4, cacheWriteTokens: 6 });
    for (const bad of [-1, "7", null, Number.NaN]) {
      expect(
        usageOf({ prompt_tokens: 8, completion_tokens: 1, prompt_tokens_details: { cache_creation_input_tokens: bad } })
          ?.cacheWriteTokens,
      ).toBeUndefined();
    }
  });

  test("a bad cached count is ignored, not trusted", () => {
    expect(
      usageOf({ prompt_tokens: 8, completion_tokens: 1, prompt_tokens_details: { cached_tokens: -5 } })?.cachedTokens,
    ).toBe(0);
  });
});

describe("billIncomplete: a stream without usage, every cap in one place (Chat SSE 6)", () => {
  // 1 micro-DIEM per prompt token, 10 per completion token
  const burnOf = (u: Usage) => BigInt(u.promptTokens) + 10n * BigInt(u.completionTokens);
  const plan = { promptEstimate: 50, admittedMaxTokens: 20, maxBurnMicroDiem: 250n };
  const shown = { approxPromptTokens: 40, relayedChars: 400 }; // 100 completion tokens before the cap
  const bill = (reportedMicroDiem: bigint | null, knownMicroDiem: bigint | null, othersInFlightMicroDiem = 0n) =>
    billIncomplete(plan, burnOf, shown, { reportedMicroDiem, knownMicroDiem, othersInFlightMicroDiem });

  test.each([
    ["no balance known: the max_tokens cap alone", null, null, 0n, 240n],
    ["a balance above the estimate changes nothing", 1_000n, 1_000n, 0n, 240n],
    ["the reported balance, not the (stale) known one", 100n, 1_000_000n, 0n, 100n],
    ["the reported balance less the others in flight", 100n, 1_000_000n, 30n, 70n],
    ["no header: the last known balance less the others in flight", null, 90n, 30n, 60n],
    ["others in flight may burn it all: nothing", 100n, 1_000n, 150n, 0n],
    ["a reported zero is a balance, not a missing header", 0n, 1_000n, 0n, 0n],
  ] as const)("%s", (_name, reported, known, others, burn) => {
    const r = bill(reported, known, others);
    expect(r.usage).toEqual({ promptTokens: 40, completionTokens: 20 });
    expect(r.burnMicroDiem).toBe(burn);
  });

  test("the prompt is capped at the admission's estimate, the burn at the admitted maximum", () => {
    const r = billIncomplete(
      { promptEstimate: 30, admittedMaxTokens: 100, maxBurnMicroDiem: 250n },
      burnOf,
      { approxPromptTokens: 40, relayedChars: 400 },
      { reportedMicroDiem: null, knownMicroDiem: null, othersInFlightMicroDiem: 0n },
    );
    expect(r.usage).toEqual({ promptTokens: 30, completionTokens: 100 });
    expect(r.burnMicroDiem).toBe(250n);
  });
});

describe("reportedDiemBalance: the upstream's pre-call balance header", () => {
  test.each([
    ["a decimal", { "x-venice-balance-diem": "30.847123" }, 30_847_123n],
    ["a negative balance is nothing left", { "x-venice-balance-diem": "-0.25" }, 0n],
    ["absent (an account without DIEM)", { "x-venice-balance-usd": "5.00" }, null],
    ["empty", { "x-venice-balance-diem": "" }, null],
    ["not a decimal", { "x-venice-balance-diem": "n/a" }, null],
  ] as const)("%s", (_name, headers, micro) => {
    expect(reportedDiemBalance(headers)).toBe(micro);
  });
});

describe("burnedOnKey: what the provider took from the key for a flagged answer", () => {
  test("the reported balance before the call less the balance after, never below 0; unknown → null", () => {
    expect(burnedOnKey(5_000_000n, 4_990_000n)).toBe(10_000n);
    expect(burnedOnKey(5_000_000n, 5_000_000n)).toBe(0n);
    // topped up in between: nothing shown to be burned
    expect(burnedOnKey(5_000_000n, 6_000_000n)).toBe(0n);
    expect(burnedOnKey(null, 4_990_000n)).toBeNull();
    expect(burnedOnKey(5_000_000n, null)).toBeNull();
  });
});
