import { describe, expect, test } from "vitest";
import {
  computeBurnMicroDiem,
  countPromptTokens,
  DEFAULT_SIM_MODELS,
  formatMicro,
  parseDecimalToMicro,
  planCompletion,
  type SimTextPricing,
} from "../../../src/local/upstream-sim/index.js";

function pricingOf(id: string): SimTextPricing | undefined {
  const model = DEFAULT_SIM_MODELS.find((m) => m.id === id);
  if (model?.type !== "text") throw new Error(`no text model ${id}`);
  return model.model_spec.pricing;
}

describe("computeBurnMicroDiem", () => {
  test.each([
    {
      label: "plain input+output, exact",
      model: "zai-org-glm-5-1",
      prompt: 1000,
      completion: 1000,
      cached: 0,
      write: 0,
      burn: 6380n,
    },
    { label: "rounds up to 1 micro", model: "qwen3-4b", prompt: 1, completion: 1, cached: 0, write: 0, burn: 1n },
    {
      label: "cache reads at cache_input",
      model: "zai-org-glm-5-1",
      prompt: 1000,
      completion: 10,
      cached: 600,
      write: 0,
      burn: 836n,
    },
    {
      label: "no cache_input → input rate (6.5 → 7)",
      model: "qwen3-4b",
      prompt: 100,
      completion: 10,
      cached: 50,
      write: 0,
      burn: 7n,
    },
    {
      label: "cache writes at cache_write",
      model: "claude-sonnet-4-6",
      prompt: 1000,
      completion: 10,
      cached: 0,
      write: 200,
      burn: 3960n,
    },
    {
      label: "at the threshold: base rates",
      model: "gemini-3-1-pro-preview",
      prompt: 200000,
      completion: 100,
      cached: 0,
      write: 0,
      burn: 501500n,
    },
    {
      label: "above the threshold: extended rates for all",
      model: "gemini-3-1-pro-preview",
      prompt: 200001,
      completion: 100,
      cached: 0,
      write: 0,
      burn: 1002255n,
    },
    {
      label: "no output tokens: not billed",
      model: "zai-org-glm-5-1",
      prompt: 5000,
      completion: 0,
      cached: 0,
      write: 0,
      burn: 0n,
    },
    {
      label: "model without pricing",
      model: "llama-3.2-3b",
      prompt: 5000,
      completion: 50,
      cached: 0,
      write: 0,
      burn: 0n,
    },
  ])("$label", ({ model, prompt, completion, cached, write, burn }) => {
    const usage = {
      prompt_tokens: prompt,
      completion_tokens: completion,
      prompt_tokens_details: { cached_tokens: cached, cache_creation_input_tokens: write },
    };
    expect(computeBurnMicroDiem(pricingOf(model), usage)).toBe(burn);
  });
});

describe("countPromptTokens", () => {
  test.each([
    { label: "no messages", messages: [], tokens: 0 },
    { label: "empty content = overhead only", messages: [{ role: "user", content: "" }], tokens: 4 },
    { label: "4 chars = 1 token", messages: [{ role: "user", content: "abcd" }], tokens: 5 },
    { label: "5 chars round up to 2", messages: [{ role: "user", content: "abcde" }], tokens: 6 },
    {
      label: "text parts count, image parts do not",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "abcdefgh" },
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
          ],
        },
      ],
      tokens: 6,
    },
    {
      label: "tool call arguments count",
      messages: [{ role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: "{}" } }] }],
      tokens: 5,
    },
    {
      label: "several messages add up",
      messages: [
        { role: "system", content: "abcdefgh" },
        { role: "user", content: "abc" },
      ],
      tokens: 4 + 2 + 4 + 1,
    },
  ])("$label", ({ messages, tokens }) => {
    expect(countPromptTokens(messages)).toBe(tokens);
  });
});

describe("planCompletion", () => {
  test.each([
    { label: "short prompt → minimum 8", prompt: 3, max: null, directive: undefined, tokens: 8, finish: "stop" },
    { label: "mid prompt → prompt length", prompt: 30, max: null, directive: undefined, tokens: 30, finish: "stop" },
    { label: "long prompt → capped at 64", prompt: 500, max: null, directive: undefined, tokens: 64, finish: "stop" },
    { label: "max tokens cuts → length", prompt: 30, max: 10, directive: undefined, tokens: 10, finish: "length" },
    { label: "directive exact", prompt: 3, max: null, directive: 120, tokens: 120, finish: "stop" },
    { label: "directive cut by max tokens", prompt: 3, max: 50, directive: 120, tokens: 50, finish: "length" },
    { label: "directive cut by model cap", prompt: 3, max: null, directive: 9000, tokens: 8192, finish: "length" },
  ])("$label", ({ prompt, max, directive, tokens, finish }) => {
    const plan = planCompletion({
      promptTokens: prompt,
      maxTokens: max,
      modelMaxCompletionTokens: 8192,
      directiveTokens: directive,
    });
    expect(plan).toEqual({ tokens, finishReason: finish });
  });
});

describe("default catalog prices are exact micro-units", () => {
  test("every text price parses without loss", () => {
    for (const m of DEFAULT_SIM_MODELS) {
      if (m.type !== "text" || !m.model_spec.pricing) continue;
      const p = m.model_spec.pricing;
      for (const unit of [p.input, p.output, p.cache_input, p.cache_write]) {
        if (!unit) continue;
        expect(unit.diem).toBe(unit.usd);
        expect(formatMicro(parseDecimalToMicro(String(unit.diem)))).toBe(String(unit.diem));
      }
    }
    expect(parseDecimalToMicro("1.54")).toBe(1_540_000n);
    expect(formatMicro(-5n)).toBe("-0.000005");
  });
});
