// OpenRouter's request controls (docs/decisions.md "OpenRouter request controls"): the contract's
// parse of `models`, `provider` and `usage` on chat and Responses (the 400 naming each field it
// cannot honour), and THE mapping of `provider.max_price` to a ceiling in cents per dollar, exact.
import { describe, expect, test } from "vitest";
import { parseChatRequest, parseResponsesRequest } from "../../../src/contract/inference.js";
import type { MaxPrice } from "../../../src/contract/request-controls.js";
import { modelsToTry } from "../../../src/domain/inference/pipeline/endpoint.js";
import {
  highestRates,
  maxPriceCeilingCents,
  maxPriceFor,
} from "../../../src/domain/inference/pipeline/request-controls.js";
import { exactDecimal } from "../../../src/lib/decimal.js";
import { DomainError } from "../../../src/lib/errors.js";
import type { TextPricing } from "../../../src/lib/money.js";

const MSGS = [{ role: "user", content: "hi" }];
const chat = (extra: Record<string, unknown>) => ({ model: "qwen3-4b", messages: MSGS, ...extra });

function refusal(f: () => unknown): { message: string; field: unknown } {
  try {
    f();
  } catch (e) {
    if (!(e instanceof DomainError)) throw e;
    expect(e.code).toBe("invalid_request");
    return { message: e.message, field: e.details.field };
  }
  throw new Error("expected a 400");
}

const price = (prompt: unknown, completion: unknown): MaxPrice => ({
  prompt: prompt === null ? null : (exactDecimal(prompt) ?? null),
  completion: completion === null ? null : (exactDecimal(completion) ?? null),
});

/** GLM 5.1's catalog rates in the simulator: 1.54 and 4.84 DIEM per 1M tokens. */
const GLM: TextPricing = { inputMicroPerM: 1_540_000n, outputMicroPerM: 4_840_000n, cacheMicroPerM: 286_000n };

describe("exactDecimal: the text of a number, never float arithmetic", () => {
  test.each([
    [0.7, 7n, 1],
    ["0.70", 70n, 2],
    [1.54, 154n, 2],
    [3, 3n, 0],
    ["12.000001", 12000001n, 6],
    [1e-7, 1n, 7],
    [0.1 + 0.2, 30000000000000004n, 17],
  ])("%s", (v, units, scale) => {
    expect(exactDecimal(v)).toEqual({ units, scale });
  });
  test.each([[-1], ["-1"], ["1e3"], [""], ["abc"], [Number.NaN], [Number.POSITIVE_INFINITY], [1e21], [null], [{}]])(
    "refused: %s",
    (v) => {
      expect(exactDecimal(v)).toBeUndefined();
    },
  );
});

describe("provider.max_price → a ceiling in cents per dollar (exact integers)", () => {
  test("floor(100 × max / rate) for each bound, the lower of the two", () => {
    // prompt: 100 × 0.70 / 1.54 = 45.45… → 45; completion: 100 × 2.42 / 4.84 = 50 exactly
    expect(maxPriceCeilingCents(price(0.7, 2.42), GLM)).toBe(45);
    expect(maxPriceCeilingCents(price(null, 2.42), GLM)).toBe(50);
    expect(maxPriceCeilingCents(price(0.7, null), GLM)).toBe(45);
    // an exact multiple is not rounded down past itself: 100 × 0.616 / 1.54 = 40
    expect(maxPriceCeilingCents(price("0.616", null), GLM)).toBe(40);
    // one micro-dollar less is 39.99… → 39
    expect(maxPriceCeilingCents(price("0.615999", null), GLM)).toBe(39);
    // the float sum 0.1 + 0.2 is read as its text, 0.30000000000000004: 19.48… → 19
    expect(maxPriceCeilingCents(price(0.1 + 0.2, null), GLM)).toBe(19);
  });

  test("zero, huge, and a free rate", () => {
    expect(maxPriceCeilingCents(price(0, null), GLM)).toBe(0);
    expect(maxPriceCeilingCents(price(1000, 1000), GLM)).toBe(100);
    expect(maxPriceCeilingCents(price(null, null), GLM)).toBeNull();
    const freePrompt: TextPricing = { inputMicroPerM: 0n, outputMicroPerM: 4_840_000n };
    expect(maxPriceCeilingCents(price(0, null), freePrompt)).toBeNull();
    expect(maxPriceCeilingCents(price(0, 2.42), freePrompt)).toBe(50);
  });

  test("a long-context tier and a cache-write rate: mapped at the highest rate a token can cost", () => {
    const gemini: TextPricing = {
      inputMicroPerM: 2_500_000n,
      outputMicroPerM: 15_000_000n,
      extended: { thresholdTokens: 200_000, inputMicroPerM: 5_000_000n, outputMicroPerM: 22_500_000n },
    };
    expect(highestRates(gemini)).toEqual({ prompt: 5_000_000n, completion: 22_500_000n });
    // 100 × 2.5 / 5 = 50 (not 100 × 2.5 / 2.5 = 100)
    expect(maxPriceCeilingCents(price(2.5, null), gemini)).toBe(50);
    const sonnet = { inputMicroPerM: 3_600_000n, outputMicroPerM: 18_000_000n, cacheWriteMicroPerM: 4_500_000n };
    expect(highestRates(sonnet).prompt).toBe(4_500_000n);
    expect(maxPriceCeilingCents(price(1.8, null), sonnet)).toBe(40);
  });

  test("what a ceiling needs, back: maxPriceFor rounds up to the micro-dollar", () => {
    expect(maxPriceFor(40, GLM)).toEqual({ prompt: "0.616000", completion: "1.936000" });
    // 1.54 × 0.33 = 0.5082; 4.84 × 0.33 = 1.5972
    expect(maxPriceFor(33, GLM)).toEqual({ prompt: "0.508200", completion: "1.597200" });
    const odd: TextPricing = { inputMicroPerM: 1n, outputMicroPerM: 3n };
    expect(maxPriceFor(33, odd)).toEqual({ prompt: "0.000001", completion: "0.000001" });
    // and it maps back to at least the ceiling it was asked for
    for (const cents of [1, 30, 33, 45, 80]) {
      const need = maxPriceFor(cents, GLM);
      expect(maxPriceCeilingCents(price(need.prompt, need.completion), GLM)).toBeGreaterThanOrEqual(cents);
    }
  });
});

describe("the contract: controls parsed, never forwarded", () => {
  test("models, provider.max_price, sort, usage and route: typed on the request, gone from the body", () => {
    const r = parseChatRequest(
      chat({
        models: ["svc/claude-sonnet-4-6", "qwen3-4b"],
        provider: { max_price: { prompt: 1, completion: "2.5", request: 0, image: 0 }, sort: "price" },
        usage: { include: true },
        route: "fallback",
        temperature: 0.2,
      }),
    );
    expect(r.controls?.models).toEqual(["claude-sonnet-4-6"]);
    expect(r.controls?.maxPrice).toEqual({ prompt: { units: 1n, scale: 0 }, completion: { units: 25n, scale: 1 } });
    expect(Object.keys(r.body).sort()).toEqual(["messages", "model", "temperature"]);
    const plain = parseChatRequest(chat({ temperature: 0.2 }));
    expect(plain.controls).toBeUndefined();
    // only the bounds that act make controls
    expect(parseChatRequest(chat({ provider: { sort: "price" }, usage: { include: false } })).controls).toBeUndefined();
  });

  test("without model, the first of models is the model asked for (chat and Responses)", () => {
    const r = parseChatRequest({ models: ["claude-sonnet-4-6", "qwen3-4b"], messages: MSGS });
    expect(r.model).toBe("claude-sonnet-4-6");
    expect(r.controls?.models).toEqual(["qwen3-4b"]);
    expect(modelsToTry(r)).toEqual(["claude-sonnet-4-6", "qwen3-4b"]);
    const s = parseResponsesRequest({ models: ["qwen3-4b"], input: "hi", provider: { max_price: { prompt: 0.5 } } });
    expect(s.model).toBe("qwen3-4b");
    expect(s.controls?.maxPrice?.prompt).toEqual({ units: 5n, scale: 1 });
    expect(refusal(() => parseChatRequest({ messages: MSGS })).field).toBe("model");
  });

  test("modelsToTry: model first, repeats (svc/ or not) once, at most five distinct (400 naming models)", () => {
    const r = parseChatRequest(chat({ models: ["qwen3-4b", "svc/a", "a", "b", "c"] }));
    expect(r.controls?.models).toEqual(["a", "b", "c"]);
    expect(modelsToTry(r)).toEqual(["qwen3-4b", "a", "b", "c"]);
    expect(modelsToTry(parseChatRequest(chat({})))).toEqual(["qwen3-4b"]);
    expect(modelsToTry(parseChatRequest(chat({ model: "svc/qwen3-4b", models: ["qwen3-4b"] })))).toEqual(["qwen3-4b"]);
    expect(refusal(() => parseChatRequest(chat({ models: ["a", "b", "c", "d", "e"] })))).toEqual({
      message: "models: at most 5 distinct models per request, `model` included.",
      field: "models",
    });
    expect(parseChatRequest({ models: ["a", "b", "c", "d", "e"], messages: MSGS }).controls?.models).toEqual([
      "b",
      "c",
      "d",
      "e",
    ]);
  });

  test.each([
    [{ models: "qwen3-4b" }, "models", "models must be an array of at most 5 model ids."],
    [{ models: ["a", "b", "c", "d", "e", "f"] }, "models", "models must be an array of at most 5 model ids."],
    [{ models: ["a:b"] }, "models.0", "models.0: model suffixes (`model:option=…`) are not accepted."],
    [{ provider: "cheap" }, "provider", "provider must be an object."],
    [
      { provider: { sort: "throughput" } },
      "provider.sort",
      'provider.sort must be "price": the router always clears the cheapest eligible offer first (throughput and latency sorting are not offered).',
    ],
    [{ provider: { order: ["openai"] } }, "provider.order", undefined],
    [{ provider: { only: ["x"] } }, "provider.only", undefined],
    [{ provider: { ignore: ["x"] } }, "provider.ignore", undefined],
    [{ provider: { quantizations: ["fp8"] } }, "provider.quantizations", undefined],
    [{ provider: { allow_fallbacks: false } }, "provider.allow_fallbacks", undefined],
    [{ provider: { require_parameters: true } }, "provider.require_parameters", undefined],
    [{ provider: { data_collection: "deny" } }, "provider.data_collection", undefined],
    [{ provider: { zdr: true } }, "provider.zdr", undefined],
    [{ provider: { enforce_distillable_text: true } }, "provider.enforce_distillable_text", undefined],
    [
      { provider: { preferred_min_throughput: 50 } },
      "provider.preferred_min_throughput",
      "provider.preferred_min_throughput is not supported (provider takes sort, max_price and the fields that ask for what the router does anyway).",
    ],
    [
      { provider: { max_price: { prompt: -1 } } },
      "provider.max_price.prompt",
      "provider.max_price.prompt must be a non-negative number or decimal string (USD per million prompt tokens).",
    ],
    [
      { provider: { max_price: { completion: "1e3" } } },
      "provider.max_price.completion",
      "provider.max_price.completion must be a non-negative number or decimal string (USD per million completion tokens).",
    ],
    [{ provider: { max_price: { image: true } } }, "provider.max_price.image", undefined],
    [
      { provider: { max_price: { prompt: 1, video: 1 } } },
      "provider.max_price",
      "provider.max_price takes prompt, completion, request, image and audio.",
    ],
    [{ usage: { include: "yes" } }, "usage.include", "usage.include must be a boolean."],
    [{ usage: { include: true, detail: 1 } }, "usage", "usage takes only include."],
    [{ route: "cheapest" }, "route", 'route must be "fallback" (OpenRouter\'s name for trying `models` in order).'],
  ])("400 naming the field: %j", (extra, field, message) => {
    for (const parse of [
      () => parseChatRequest(chat(extra)),
      () => parseResponsesRequest({ model: "m", input: "hi", ...extra }),
    ]) {
      const r = refusal(parse);
      expect(r.field).toBe(field);
      expect(r.message.startsWith(field)).toBe(true);
      if (message) expect(r.message).toBe(message);
    }
  });

  test("accepted: what asks for what the router does anyway (OpenRouter's defaults, nulls, empty lists)", () => {
    const r = parseChatRequest(
      chat({
        models: null,
        provider: {
          sort: "price",
          allow_fallbacks: true,
          require_parameters: false,
          data_collection: "allow",
          zdr: false,
          enforce_distillable_text: false,
          order: [],
          only: [],
          ignore: [],
          quantizations: [],
          max_price: { prompt: null, completion: null, request: "0.01", image: 0.002, audio: 1 },
        },
        usage: { include: true },
      }),
    );
    expect(r.controls).toBeUndefined();
    expect(r.body.provider).toBeUndefined();
    expect(parseChatRequest(chat({ provider: null, usage: null, route: null })).controls).toBeUndefined();
  });
});
