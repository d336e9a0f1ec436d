import { describe, expect, test } from "vitest";
import { usageOf } from "../../../src/domain/inference/usage.js";

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

  test("a bad cached count is ignored, not trusted", () => {
    expect(
      usageOf({ prompt_tokens: 8, completion_tokens: 1, prompt_tokens_details: { cached_tokens: -5 } })?.cachedTokens,
    ).toBe(0);
  });
});
