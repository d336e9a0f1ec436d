import { describe, expect, test } from "vitest";
import type { UpstreamModel } from "../../../src/adapters/upstream/client.js";
import {
  deriveVideoModelType,
  normalizeUpstreamModel,
  priceOf,
  regionRestrictionsOf,
  tierOf,
} from "../../../src/domain/catalog/catalog-normalize.js";

const p = (usd: number) => ({ usd, diem: usd });

function text(spec: Record<string, unknown>, id = "m-text"): UpstreamModel {
  return {
    id,
    type: "text",
    created: 1,
    model_spec: {
      name: "M",
      availableContextTokens: 1000,
      maxCompletionTokens: 100,
      pricing: { input: p(1), output: p(2) },
      capabilities: { supportsVision: false },
      ...spec,
    },
  };
}

describe("priceOf (published {usd, diem} → micro-DIEM)", () => {
  test.each([
    ["1.54 → 1540000", p(1.54), { kind: "ok", micro: 1_540_000n }],
    ["0.286 → 286000", p(0.286), { kind: "ok", micro: 286_000n }],
    ["22.5 → 22500000", p(22.5), { kind: "ok", micro: 22_500_000n }],
    ["diem wins over usd", { usd: 1, diem: 10 }, { kind: "ok", micro: 10_000_000n }],
    ["usd when diem is missing", { usd: 0.5 }, { kind: "ok", micro: 500_000n }],
    ["past 6 decimals rounds up", p(0.0000001), { kind: "ok", micro: 1n }],
    ["absent", undefined, { kind: "absent" }],
    ["negative", p(-1), { kind: "invalid" }],
    ["not a number", { usd: "abc" }, { kind: "invalid" }],
    ["not an object", 3, { kind: "invalid" }],
  ])("%s", (_label, unit, expected) => {
    expect(priceOf(unit)).toEqual(expected);
  });
});

describe("text live rule", () => {
  test.each([
    ["prices and caps published", {}, "live"],
    ["no pricing", { pricing: undefined }, "coming_soon"],
    ["no output price", { pricing: { input: p(1) } }, "coming_soon"],
    ["zero input price", { pricing: { input: p(0), output: p(1) } }, "coming_soon"],
    ["no maxCompletionTokens", { maxCompletionTokens: undefined }, "coming_soon"],
    ["no availableContextTokens", { availableContextTokens: undefined }, "coming_soon"],
    ["offline", { offline: true }, "coming_soon"],
    ["access-restricted beta", { beta: true }, "coming_soon"],
    ["betaModel is callable", { betaModel: true }, "live"],
    ["unreadable extended tier", { pricing: { input: p(1), output: p(2), extended: { input: p(2) } } }, "coming_soon"],
    ["unreadable cache price", { pricing: { input: p(1), output: p(2), cache_input: { usd: "x" } } }, "coming_soon"],
  ])("%s → %s", (_label, spec, status) => {
    const m = normalizeUpstreamModel(text(spec), "text");
    expect(m.status).toBe(status);
    expect(m.pricing === null).toBe(status !== "live");
  });

  test("context_length stands in for availableContextTokens", () => {
    const row = text({ availableContextTokens: undefined });
    row.context_length = 4096;
    const m = normalizeUpstreamModel(row, "text");
    expect(m.status).toBe("live");
    expect(m.contextTokens).toBe(4096);
  });

  test("offline rows keep their rates (for when they return) but publish no pricing", () => {
    const m = normalizeUpstreamModel(text({ offline: true }), "text");
    expect(m.inputMicroPerM).toBe(1_000_000n);
    expect(m.pricing).toBeNull();
    expect(m.offline).toBe(true);
  });
});

describe("image live rule", () => {
  const image = (pricing: unknown, constraints: Record<string, unknown> = {}): UpstreamModel => ({
    id: "m-image",
    type: "image",
    model_spec: { name: "I", pricing, constraints: { promptCharacterLimit: 100, ...constraints } },
  });
  test.each([
    ["flat generation", image({ generation: p(0.01) }), "live", { per_image: 10_000 }],
    [
      "every offered resolution priced",
      image({ resolutions: { "1K": p(0.1), "2K": p(0.2) } }, { resolutions: ["1K", "2K"], defaultResolution: "1K" }),
      "live",
      { per_image_by_resolution: { "1K": 100_000, "2K": 200_000 }, default_resolution: "1K" },
    ],
    [
      "an offered resolution without a price",
      image({ resolutions: { "1K": p(0.1) } }, { resolutions: ["1K", "4K"] }),
      "coming_soon",
      null,
    ],
    [
      "quality model without the quality matrix",
      image({ resolutions: { "1K": p(0.1) } }, { resolutions: ["1K"], qualities: ["low", "high"] }),
      "coming_soon",
      null,
    ],
    [
      "quality model with a complete matrix",
      image(
        { resolutions: { "1K": p(0.3) }, quality: { "1K": { low: p(0.1), high: p(0.3) } } },
        { resolutions: ["1K"], qualities: ["low", "high"], defaultResolution: "1K", defaultQuality: "high" },
      ),
      "live",
      {
        per_image_by_quality: { "1K": { low: 100_000, high: 300_000 } },
        default_resolution: "1K",
        default_quality: "high",
      },
    ],
    ["no pricing", image(undefined), "coming_soon", null],
    ["only upscale prices", image({ upscale: { "2x": p(0.02) } }), "coming_soon", null],
  ])("%s → %s", (_label, row, status, pricing) => {
    const m = normalizeUpstreamModel(row, "image");
    expect(m.status).toBe(status);
    expect(m.pricing).toEqual(pricing);
    // constraints exactly as published
    expect(m.constraints).toEqual((row.model_spec as { constraints: unknown }).constraints);
  });
});

describe("video", () => {
  test.each([
    ["wan-2.6-text-to-video", "text-to-video", false, "text-to-video"],
    ["kling-2.6-pro-image-to-video", "image-to-video", false, "image-to-video"],
    ["vidu-q2-reference-to-video", "image-to-video", false, "reference-to-video"],
    ["kling-o1-video-to-video", "video", true, "video-to-video"],
    ["topaz-video-upscale", "video", true, "video-to-video"],
    ["some-video-model", "video", false, null],
    ["future-model", "audio-to-video", false, null],
    ["no-type", undefined, false, null],
  ])("%s (%s, video_input %s) → %s", (id, upstreamType, videoInput, expected) => {
    expect(deriveVideoModelType(id, upstreamType, videoInput)).toBe(expected);
  });

  const video = (constraints: Record<string, unknown> | undefined, id = "v-text-to-video"): UpstreamModel => ({
    id,
    type: "video",
    model_spec: { name: "V", constraints },
  });

  test("live with durations and a mappable model_type; constraints keep their keys and order", () => {
    const published = { model_type: "video", durations: ["Auto"], aspect_ratios: [], video_input: true };
    const m = normalizeUpstreamModel(video(published, "x-video-to-video"), "video");
    expect(m.status).toBe("live");
    expect(m.constraints).toEqual({ ...published, model_type: "video-to-video" });
    expect(Object.keys(m.constraints ?? {})).toEqual(Object.keys(published));
    expect(m.pricing).toEqual({ type: "per_job_quote", quote_endpoint: "/v1/video/quote" });
  });

  test.each([
    ["no durations", { model_type: "text-to-video" }],
    ["empty durations", { model_type: "text-to-video", durations: [] }],
    ["unmappable model_type", { model_type: "video", durations: ["5s"], video_input: false }],
    ["no constraints", undefined],
  ])("%s → coming_soon", (_label, constraints) => {
    const m = normalizeUpstreamModel(video(constraints), "video");
    expect(m.status).toBe("coming_soon");
    expect(m.pricing).toBeNull();
  });

  test("an unmappable model_type is dropped, never published outside our four values", () => {
    const m = normalizeUpstreamModel(video({ model_type: "video", durations: ["5s"] }), "video");
    expect(m.constraints).toEqual({ durations: ["5s"] });
  });
});

describe("regionRestrictions (issue 39)", () => {
  test("published country codes are carried as published, on every modality; anything else is none", () => {
    expect(normalizeUpstreamModel(text({ regionRestrictions: ["US", "GB"] }), "text").regionRestrictions).toEqual([
      "US",
      "GB",
    ]);
    const video: UpstreamModel = {
      id: "v",
      type: "video",
      model_spec: { regionRestrictions: ["US"], constraints: { model_type: "text-to-video", durations: ["5s"] } },
    };
    expect(normalizeUpstreamModel(video, "video")).toMatchObject({ status: "live", regionRestrictions: ["US"] });
    expect(normalizeUpstreamModel(text({}), "text").regionRestrictions).toBeNull();
    for (const bad of ["US", [1], null, {}]) {
      expect(regionRestrictionsOf({ model_spec: { regionRestrictions: bad } }), JSON.stringify(bad)).toBeNull();
    }
    expect(regionRestrictionsOf(null)).toBeNull();
  });
});

describe("tier heuristic", () => {
  test.each([
    ["output below 1 DIEM/M", "any-model", "text", 999_999n, "small"],
    ["output at 1 DIEM/M", "any-model", "text", 1_000_000n, "frontier"],
    ["≤10B by slug, unpriced", "llama-3.2-3b", "text", null, "small"],
    ["10b by slug", "foo-10b", "text", 5_000_000n, "small"],
    ["70B by slug, priced above", "llama-3.3-70b", "text", 2_800_000n, "frontier"],
    ["480b-a35b", "qwen3-coder-480b-a35b-instruct", "text", 3_000_000n, "frontier"],
    ["no size, unpriced", "mystery", "text", null, "frontier"],
    ["image", "venice-sd35", "image", null, "frontier"],
    ["video", "wan-2.6-text-to-video", "video", null, "frontier"],
  ] as const)("%s → %s", (_label, id, modality, output, tier) => {
    expect(tierOf(id, modality, output)).toBe(tier);
  });
});
