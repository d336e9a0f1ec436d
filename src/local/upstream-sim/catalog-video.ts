import type { SimVideoModel } from "./models.js";

/** The default catalog's video rows (they carry no pricing) and the simulator's own video prices. */

export const SIM_VIDEO_MODELS: readonly SimVideoModel[] = [
  {
    id: "wan-2.6-text-to-video",
    object: "model",
    owned_by: "venice.ai",
    type: "video",
    created: 1765843200,
    model_spec: {
      name: "Wan 2.6",
      privacy: "anonymized",
      uncensored: true,
      offline: false,
      traits: [],
      constraints: {
        model_type: "text-to-video",
        aspect_ratios: ["16:9", "9:16", "1:1"],
        resolutions: ["1080p", "720p"],
        durations: ["5s", "10s", "15s"],
        audio: true,
        audio_configurable: true,
        audio_input: true,
        per_reference_audio: false,
        video_input: false,
      },
    },
  },
  {
    id: "kling-2.6-pro-image-to-video",
    object: "model",
    owned_by: "venice.ai",
    type: "video",
    created: 1764547200,
    model_spec: {
      name: "Kling 2.6 Pro",
      privacy: "anonymized",
      offline: false,
      traits: [],
      regionRestrictions: ["US", "GB"],
      constraints: {
        model_type: "image-to-video",
        aspect_ratios: [],
        resolutions: [],
        durations: ["5s", "10s"],
        audio: true,
        audio_configurable: true,
        audio_input: false,
        per_reference_audio: false,
        video_input: false,
      },
    },
  },
  {
    id: "vidu-q2-reference-to-video",
    object: "model",
    owned_by: "venice.ai",
    type: "video",
    created: 1762128000,
    model_spec: {
      name: "Vidu Q2 Reference",
      privacy: "anonymized",
      offline: false,
      traits: [],
      constraints: {
        model_type: "image-to-video",
        aspect_ratios: ["16:9", "9:16", "1:1"],
        resolutions: ["720p", "1080p"],
        durations: ["5s", "8s"],
        audio: false,
        audio_configurable: false,
        audio_input: false,
        per_reference_audio: false,
        video_input: false,
        prompt_character_limit: 1500,
      },
    },
  },
  {
    id: "kling-o1-video-to-video",
    object: "model",
    owned_by: "venice.ai",
    type: "video",
    created: 1764892800,
    model_spec: {
      name: "Kling O1 Video Edit",
      privacy: "anonymized",
      offline: false,
      traits: [],
      constraints: {
        model_type: "video",
        aspect_ratios: [],
        resolutions: [],
        durations: ["Auto"],
        audio: false,
        audio_configurable: false,
        audio_input: false,
        per_reference_audio: false,
        video_input: true,
      },
    },
  },
  {
    id: "grok-imagine-text-to-video-private",
    object: "model",
    owned_by: "venice.ai",
    type: "video",
    created: 1767225600,
    model_spec: {
      name: "Grok Imagine (private)",
      description: "VPS-backed private model: the queue response carries a one-time download_url.",
      privacy: "private",
      offline: false,
      traits: [],
      constraints: {
        model_type: "text-to-video",
        aspect_ratios: ["16:9", "9:16", "1:1"],
        resolutions: ["720p"],
        durations: ["6s", "10s"],
        audio: true,
        audio_configurable: false,
        audio_input: false,
        per_reference_audio: false,
        video_input: false,
      },
    },
  },
];

/**
 * Simulator-only video price schedule (upstream publishes none; prices come from `POST /video/quote`).
 * quote = seconds × (rate[resolution] + (audio ? audioPerSecond : 0)), micro-USD (= micro-DIEM).
 */
export interface SimVideoPrice {
  /** per-second rate by resolution; models without resolutions use the "default" entry */
  perSecondMicro: Record<string, bigint>;
  audioPerSecondMicro: bigint;
  /** seconds billed for duration "Auto" */
  autoSeconds: number;
}

export const SIM_VIDEO_PRICING: Readonly<Record<string, SimVideoPrice>> = {
  "wan-2.6-text-to-video": {
    perSecondMicro: { "720p": 100_000n, "1080p": 150_000n },
    audioPerSecondMicro: 20_000n,
    autoSeconds: 5,
  },
  "kling-2.6-pro-image-to-video": {
    perSecondMicro: { default: 140_000n },
    audioPerSecondMicro: 70_000n,
    autoSeconds: 5,
  },
  "vidu-q2-reference-to-video": {
    perSecondMicro: { "720p": 50_000n, "1080p": 100_000n },
    audioPerSecondMicro: 0n,
    autoSeconds: 5,
  },
  "kling-o1-video-to-video": { perSecondMicro: { default: 168_000n }, audioPerSecondMicro: 0n, autoSeconds: 5 },
  "grok-imagine-text-to-video-private": {
    perSecondMicro: { "720p": 70_000n },
    audioPerSecondMicro: 0n,
    autoSeconds: 6,
  },
};

/** Used for video models missing from SIM_VIDEO_PRICING (custom catalogs). */
export const SIM_VIDEO_FALLBACK_PRICE: SimVideoPrice = {
  perSecondMicro: { default: 100_000n },
  audioPerSecondMicro: 0n,
  autoSeconds: 5,
};

/** Models whose queue response carries a one-time `download_url` and whose retrieve answers JSON COMPLETED. */
export function isDownloadUrlVideoModel(id: string): boolean {
  return id.endsWith("-private");
}
