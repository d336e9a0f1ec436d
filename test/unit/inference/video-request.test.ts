import { describe, expect, test } from "vitest";
import { parseVideoRequest } from "../../../src/contract/inference.js";
import { checkVideoRequest } from "../../../src/domain/inference/modalities/video/video-request.js";
import { DomainError } from "../../../src/lib/errors.js";

// The body parsed by the contract (its shape: types, a non-blank prompt), then checked against the
// row by the domain (what only the row decides). Constraints as the catalog publishes them (model_type derived to our four values)
const ROWS = {
  t2v: {
    id: "wan-2.6-text-to-video",
    constraints: {
      model_type: "text-to-video",
      aspect_ratios: ["16:9", "9:16", "1:1"],
      resolutions: ["1080p", "720p"],
      durations: ["5s", "10s", "15s"],
      audio: true,
      audio_configurable: true,
    },
  },
  i2v: {
    id: "kling-2.6-pro-image-to-video",
    constraints: {
      model_type: "image-to-video",
      aspect_ratios: [],
      resolutions: [],
      durations: ["5s", "10s"],
      audio: true,
      audio_configurable: true,
    },
  },
  r2v: {
    id: "vidu-q2-reference-to-video",
    constraints: {
      model_type: "reference-to-video",
      aspect_ratios: ["16:9"],
      resolutions: ["720p", "1080p"],
      durations: ["5s", "8s"],
      audio: false,
      audio_configurable: false,
      prompt_character_limit: 10,
    },
  },
  v2v: {
    id: "kling-o1-video-to-video",
    constraints: {
      model_type: "video-to-video",
      aspect_ratios: [],
      resolutions: [],
      durations: ["Auto"],
      audio: false,
      audio_configurable: false,
    },
  },
};

function outcome(row: keyof typeof ROWS, body: Record<string, unknown>): string {
  try {
    checkVideoRequest(parseVideoRequest({ model: ROWS[row].id, ...body }), ROWS[row]);
    return "ok";
  } catch (e) {
    if (e instanceof DomainError) return `${e.status} ${String(e.details.field)}`;
    throw e;
  }
}

describe("a video request against its row's constraints", () => {
  test.each([
    ["t2v", { prompt: "a fox", duration: "5s" }, "ok"],
    ["t2v", { prompt: "a fox", duration: "10s", resolution: "720p", aspect_ratio: "9:16", audio: false }, "ok"],
    ["t2v", { prompt: "a fox" }, "400 duration"],
    ["t2v", { prompt: "a fox", duration: "7s" }, "400 duration"],
    ["t2v", { prompt: "a fox", duration: "5s", resolution: "4k" }, "400 resolution"],
    ["t2v", { prompt: "a fox", duration: "5s", aspect_ratio: "21:9" }, "400 aspect_ratio"],
    ["t2v", { prompt: "a fox", duration: "5s", audio: "yes" }, "400 audio"],
    ["t2v", { duration: "5s" }, "400 prompt"],
    ["t2v", { prompt: "  ", duration: "5s" }, "400 prompt"],
    ["i2v", { prompt: "a fox", duration: "5s" }, "400 image_url"],
    ["i2v", { prompt: "a fox", duration: "5s", image_url: "ftp://x" }, "400 image_url"],
    ["i2v", { prompt: "a fox", duration: "5s", image_url: "https://x/y.png" }, "ok"],
    [
      "i2v",
      { prompt: "a fox", duration: "5s", image_url: "data:image/png;base64,AAAA", resolution: "720p" },
      "400 resolution",
    ],
    [
      "i2v",
      { prompt: "a fox", duration: "5s", image_url: "https://x/y.png", aspect_ratio: "16:9" },
      "400 aspect_ratio",
    ],
    ["r2v", { prompt: "a fox", duration: "5s" }, "400 reference_image_urls"],
    ["r2v", { prompt: "a fox", duration: "5s", reference_image_urls: ["https://x/1.png"] }, "ok"],
    [
      "r2v",
      { prompt: "a fox, longer than ten", duration: "5s", reference_image_urls: ["https://x/1.png"] },
      "400 prompt",
    ],
    ["r2v", { prompt: "a fox", duration: "5s", reference_image_urls: ["https://x/1.png"], audio: true }, "400 audio"],
    ["r2v", { prompt: "a fox", duration: "5s", reference_image_urls: ["https://x/1.png"], audio: false }, "400 audio"],
    ["v2v", { duration: "Auto", video_url: "https://x/in.mp4" }, "ok"],
    ["v2v", { duration: "Auto" }, "400 video_url"],
  ] as const)("%s %j → %s", (row, body, expected) => {
    expect(outcome(row, body)).toBe(expected);
  });

  test("not an object, or no model: 400", () => {
    expect(() => parseVideoRequest([])).toThrow(DomainError);
    expect(() => parseVideoRequest({ duration: "5s" })).toThrow(DomainError);
  });
});
