import { describe, expect, test } from "vitest";
import { parseImageRequest, parseOpenAiImageRequest } from "../../../src/contract/inference.js";
import {
  imageModality,
  imagePricer,
  openAiImageModality,
} from "../../../src/domain/inference/modalities/image/image.js";
import { flatJobPricer } from "../../../src/domain/inference/pipeline/admission.js";
import type { InferenceSession, RoutableModel } from "../../../src/domain/inference/pipeline/session.js";
import { NO_ROWS } from "../../../src/domain/inference/settlement/end-item.js";
import { DomainError } from "../../../src/lib/errors.js";

const model = (over: Partial<RoutableModel>): RoutableModel => ({
  id: "m",
  modality: "image",
  status: "live",
  tier: "frontier",
  pricing: { inputMicroPerM: 0n, outputMicroPerM: 0n },
  imagePricing: null,
  constraints: null,
  maxCompletionTokens: null,
  ...over,
});
const FLAT = model({
  imagePricing: {
    perImageMicro: 10_000n,
    byResolutionMicro: null,
    byQualityMicro: null,
    defaultResolution: null,
    defaultQuality: null,
  },
  constraints: { widthHeightDivisor: 16 },
});
const BY_QUALITY = model({
  imagePricing: {
    perImageMicro: null,
    byResolutionMicro: { "1K": 260_000n },
    byQualityMicro: { "1K": { low: 20_000n, high: 260_000n }, "4K": { low: 70_000n, high: 830_000n } },
    defaultResolution: "1K",
    defaultQuality: "high",
  },
  constraints: { resolutions: ["1K", "4K"], qualities: ["low", "high"], aspectRatios: ["1:1", "3:2", "2:3"] },
});
const STARTED = new Date("2026-11-24T12:00:00.500Z");
const session = (m: RoutableModel) => ({ model: m, startedAt: STARTED }) as unknown as InferenceSession;

describe("image price rules: one flat job price, the maximum and the actual burn alike", () => {
  test("unit at the chosen (or default) resolution and quality × variants; 402 when the job exceeds the balance", () => {
    const p = imagePricer(
      parseImageRequest({ model: "m", prompt: "x", resolution: "4K", quality: "low", variants: 4 }),
      BY_QUALITY,
    );
    expect(p.plan(50, 10n ** 12n)).toEqual({
      promptEstimate: 0,
      admittedMaxTokens: 0,
      maxBurnMicroDiem: 280_000n,
      maxChargeMicroUsdc: 140_000n,
    });
    expect(p.burn({ promptTokens: 0, completionTokens: 0 })).toBe(280_000n);
    expect(p.plan(50, 140_000n)?.maxChargeMicroUsdc).toBe(140_000n);
    // short of the ceiling's price: planned at the highest price the balance covers (clears only at or below it)
    expect(p.plan(50, 139_999n)).toEqual({
      promptEstimate: 0,
      admittedMaxTokens: 0,
      maxBurnMicroDiem: 280_000n,
      maxChargeMicroUsdc: 137_200n,
      priceCapCents: 49,
    });
    expect(p.plan(50, 2_800n)?.priceCapCents).toBe(1);
    expect(p.plan(50, 2_799n)).toBeUndefined();
    // defaults: 1K high
    expect(
      imagePricer(parseImageRequest({ model: "m", prompt: "x" }), BY_QUALITY).burn({
        promptTokens: 0,
        completionTokens: 0,
      }),
    ).toBe(260_000n);
    expect(
      imagePricer(parseImageRequest({ model: "m", prompt: "x", n: 3 }), FLAT).burn({
        promptTokens: 0,
        completionTokens: 0,
      }),
    ).toBe(30_000n);
  });

  test("a resolution or quality the row does not offer is a 400 naming the field", () => {
    const field = (fn: () => unknown) => {
      try {
        fn();
        return "ok";
      } catch (e) {
        return e instanceof DomainError ? `${e.code} ${String(e.details.field)}` : "other";
      }
    };
    expect(field(() => imagePricer(parseImageRequest({ model: "m", prompt: "x", resolution: "2K" }), BY_QUALITY))).toBe(
      "invalid_request resolution",
    );
    expect(
      field(() => imagePricer(parseImageRequest({ model: "m", prompt: "x", quality: "medium" }), BY_QUALITY)),
    ).toBe("invalid_request quality");
    expect(field(() => imagePricer(parseImageRequest({ model: "m", prompt: "x", resolution: "1K" }), FLAT))).toBe(
      "invalid_request resolution",
    );
  });
});

describe("upstream bodies", () => {
  test("native: every other field forwarded unchanged, format WebP by default, n as variants, web search refused", () => {
    const req = parseImageRequest({ model: "m", prompt: "x", n: 2, seed: 7, hide_watermark: true, style_preset: "3D" });
    expect(imageModality.upstreamBody(req, session(FLAT), false)).toEqual({
      model: "m",
      prompt: "x",
      seed: 7,
      hide_watermark: true,
      style_preset: "3D",
      variants: 2,
      format: "webp",
    });
    expect(() => parseImageRequest({ model: "m", prompt: "x", enable_web_search: "auto" })).toThrow(DomainError);
  });

  test("OpenAI: size → nearest aspect ratio (or pixels fitted to 1280 and the divisor), n → variants, PNG by default", () => {
    const wide = parseOpenAiImageRequest({
      model: "m",
      prompt: "x",
      n: 2,
      size: "1536x1024",
      moderation: "low",
      quality: "low",
    });
    expect(openAiImageModality.upstreamBody(wide, session(BY_QUALITY), false)).toEqual({
      model: "m",
      prompt: "x",
      variants: 2,
      format: "png",
      safe_mode: false,
      quality: "low",
      aspect_ratio: "3:2",
    });
    const tall = parseOpenAiImageRequest({ model: "m", prompt: "x", size: "1024x1792", quality: "hd", style: "vivid" });
    expect(openAiImageModality.upstreamBody(tall, session(FLAT), false)).toEqual({
      model: "m",
      prompt: "x",
      variants: 1,
      format: "png",
      width: 720,
      height: 1280,
    });
    const answer = openAiImageModality.answer(
      { images: ["QUJD"] },
      parseOpenAiImageRequest({ model: "m", prompt: "x", response_format: "url", output_format: "jpeg" }),
      session(FLAT),
      {
        costMicroUsdc: 1n,
        clearingPriceCents: 50,
        burnMicroDiem: 2n,
        balanceRemainingMicroUsdc: 0n,
        supportReference: "ref",
        requestId: "req",
      },
      { pricer: flatJobPricer(2n), rows: NO_ROWS },
    );
    expect(answer.data).toEqual([{ url: "data:image/jpeg;base64,QUJD" }]);
    // `created`: when the request started, on the service's clock (unix seconds)
    expect(answer.created).toBe(Math.floor(STARTED.getTime() / 1000));
  });
});
