import type { PriceUnit, SimImageModel, SimImagePricing } from "./models.js";

/** The default catalog's image rows: the three pricing shapes (flat, by resolution, by resolution × quality). */

const p = (usd: number): PriceUnit => ({ usd, diem: usd });

const UPSCALE: SimImagePricing["upscale"] = { "2x": p(0.02), "4x": p(0.08) };

export const SIM_IMAGE_MODELS: readonly SimImageModel[] = [
  {
    id: "venice-sd35",
    object: "model",
    owned_by: "venice.ai",
    type: "image",
    created: 1740787200,
    model_spec: {
      name: "Venice SD35",
      privacy: "private",
      offline: false,
      traits: ["default"],
      supportsWebSearch: false,
      pricing: { generation: p(0.01), upscale: UPSCALE },
      constraints: { promptCharacterLimit: 1500, steps: { default: 25, max: 30 }, widthHeightDivisor: 16 },
    },
  },
  {
    id: "nano-banana-pro",
    object: "model",
    owned_by: "venice.ai",
    type: "image",
    created: 1763653951,
    model_spec: {
      name: "Nano Banana Pro",
      privacy: "anonymized",
      offline: false,
      traits: [],
      supportsWebSearch: true,
      pricing: {
        resolutions: { "1K": p(0.18), "2K": p(0.23), "4K": p(0.35) },
        upscale: UPSCALE,
      },
      constraints: {
        promptCharacterLimit: 32768,
        steps: { default: 20, max: 50 },
        widthHeightDivisor: 1,
        aspectRatios: ["1:1", "3:2", "16:9", "21:9", "9:16", "2:3", "3:4", "4:5"],
        defaultAspectRatio: "1:1",
        resolutions: ["1K", "2K", "4K"],
        defaultResolution: "1K",
      },
    },
  },
  {
    id: "gpt-image-2",
    object: "model",
    owned_by: "venice.ai",
    type: "image",
    created: 1776211200,
    model_spec: {
      name: "GPT Image 2",
      privacy: "anonymized",
      offline: false,
      traits: [],
      supportsWebSearch: false,
      pricing: {
        resolutions: { "1K": p(0.26), "2K": p(0.52), "4K": p(0.83) },
        quality: {
          "1K": { low: p(0.02), medium: p(0.07), high: p(0.26) },
          "2K": { low: p(0.04), medium: p(0.14), high: p(0.52) },
          "4K": { low: p(0.07), medium: p(0.23), high: p(0.83) },
        },
        upscale: UPSCALE,
      },
      constraints: {
        promptCharacterLimit: 32000,
        steps: { default: 1, max: 1 },
        widthHeightDivisor: 16,
        aspectRatios: ["1:1", "3:2", "2:3"],
        defaultAspectRatio: "1:1",
        resolutions: ["1K", "2K", "4K"],
        defaultResolution: "1K",
        qualities: ["low", "medium", "high"],
        defaultQuality: "high",
      },
    },
  },
];
