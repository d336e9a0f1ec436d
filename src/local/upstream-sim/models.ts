/**
 * The simulator's model catalog, in the exact wire shape of upstream `GET /models` rows
 * (VENICE_API.md §2). Prices are USD/DIEM per unit (per 1M tokens for text), always exactly
 * representable in micro-units, with `diem == usd` as in the live snapshot.
 */

export interface PriceUnit {
  usd: number;
  diem: number;
}

export interface SimExtendedPricing {
  context_token_threshold: number;
  input: PriceUnit;
  output: PriceUnit;
  cache_input?: PriceUnit;
  cache_write?: PriceUnit;
}

export interface SimTextPricing {
  input: PriceUnit;
  output: PriceUnit;
  cache_input?: PriceUnit;
  cache_write?: PriceUnit;
  extended?: SimExtendedPricing;
}

export interface SimImagePricing {
  generation?: PriceUnit;
  resolutions?: Record<string, PriceUnit>;
  quality?: Record<string, Record<string, PriceUnit>>;
  upscale: { "2x": PriceUnit; "4x": PriceUnit };
}

/** `model_spec.deprecation` as the reference has it (`autoRemap`, `date`, `removesAt` required). */
export interface SimDeprecation {
  date: string;
  removesAt: string;
  startsAt?: string;
  autoRemap: boolean;
  replacementModelId?: string;
}

interface SimModelSpecBase {
  name: string;
  description?: string;
  modelSource?: string;
  privacy: "private" | "anonymized";
  offline?: boolean;
  beta?: boolean;
  betaModel?: boolean;
  traits: string[];
  uncensored?: boolean;
  deprecation?: SimDeprecation;
  /** country codes where the model is served; callers elsewhere get 403 (`SimState.setCallerRegion`) */
  regionRestrictions?: string[];
}

export interface SimTextCapabilities {
  optimizedForCode: boolean;
  quantization: "fp4" | "fp8" | "fp16" | "bf16" | "int8" | "int4" | "not-available";
  supportsFunctionCalling: boolean;
  supportsReasoning: boolean;
  /** whether `reasoning_effort` is honoured (required by the reference) */
  supportsReasoningEffort: boolean;
  reasoningEffortOptions?: string[];
  defaultReasoningEffort?: string;
  supportsResponseSchema: boolean;
  supportsVision: boolean;
  supportsMultipleImages?: boolean;
  maxImages?: number;
  supportsVideoInput: boolean;
  supportsAudioInput: boolean;
  supportsWebSearch: boolean;
  supportsLogProbs: boolean;
  supportsTeeAttestation?: boolean;
  supportsE2EE?: boolean;
  supportsXSearch?: boolean;
}

export interface SimTextModelSpec extends SimModelSpecBase {
  availableContextTokens: number;
  maxCompletionTokens: number;
  pricing?: SimTextPricing;
  capabilities: SimTextCapabilities;
  constraints: {
    temperature: { default: number };
    top_p: { default: number };
    frequency_penalty?: { default: number };
    presence_penalty?: { default: number };
    repetition_penalty?: { default: number };
  };
}

export interface SimImageConstraints {
  promptCharacterLimit: number;
  steps: { default: number; max: number };
  widthHeightDivisor: number;
  aspectRatios?: string[];
  defaultAspectRatio?: string;
  resolutions?: string[];
  defaultResolution?: string;
  qualities?: string[];
  defaultQuality?: string;
  maxStyleReferences?: number;
  supportsStyleReferenceStrength?: boolean;
}

export interface SimImageModelSpec extends SimModelSpecBase {
  supportsWebSearch?: boolean;
  supportsStyleReferences?: boolean;
  supportsOptimizePromptThinking?: boolean;
  pricing?: SimImagePricing;
  constraints: SimImageConstraints;
}

export interface SimVideoConstraints {
  model_type: "text-to-video" | "image-to-video" | "video";
  durations: string[];
  resolutions: string[];
  aspect_ratios: string[];
  audio: boolean;
  audio_configurable: boolean;
  audio_input: boolean;
  per_reference_audio: boolean;
  video_input: boolean;
  prompt_character_limit?: number;
}

/** Video rows carry no pricing (upstream prices video only through `POST /video/quote`). */
export interface SimVideoModelSpec extends SimModelSpecBase {
  constraints: SimVideoConstraints;
}

interface SimModelBase {
  id: string;
  object: "model";
  owned_by: "venice.ai";
  created: number;
}

export interface SimTextModel extends SimModelBase {
  type: "text";
  model_spec: SimTextModelSpec;
}

export interface SimImageModel extends SimModelBase {
  type: "image";
  model_spec: SimImageModelSpec;
}

export interface SimVideoModel extends SimModelBase {
  type: "video";
  model_spec: SimVideoModelSpec;
}

export type SimModel = SimTextModel | SimImageModel | SimVideoModel;

const p = (usd: number): PriceUnit => ({ usd, diem: usd });

const UPSCALE: SimImagePricing["upscale"] = { "2x": p(0.02), "4x": p(0.08) };

const TEXT_CONSTRAINTS = { temperature: { default: 0.7 }, top_p: { default: 0.9 } };

function caps(overrides: Partial<SimTextCapabilities>): SimTextCapabilities {
  return {
    optimizedForCode: false,
    quantization: "fp8",
    supportsFunctionCalling: true,
    supportsReasoning: false,
    supportsReasoningEffort: false,
    supportsResponseSchema: true,
    supportsVision: false,
    supportsMultipleImages: false,
    supportsVideoInput: false,
    supportsAudioInput: false,
    supportsWebSearch: true,
    supportsLogProbs: false,
    supportsTeeAttestation: false,
    supportsE2EE: false,
    supportsXSearch: false,
    ...overrides,
  };
}

/**
 * Default catalog. Exported so tests can read prices and limits. Covers every shape the checklist
 * asks for: plain text rows, an `extended` long-context tier (`gemini-3-1-pro-preview`), cache
 * read/write prices, a text row without `pricing` (`llama-3.2-3b`), an `offline:true` row
 * (`deepseek-r1-671b`), a `betaModel:true` row (`kimi-k2-5`), a deprecated row (`llama-3.1-405b`),
 * the three image pricing shapes and four video flavours (no pricing).
 */
export const DEFAULT_SIM_MODELS: readonly SimModel[] = [
  {
    id: "zai-org-glm-5-1",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1775520000,
    model_spec: {
      name: "GLM 5.1",
      description: "Zhipu GLM 5.1, general purpose reasoning model.",
      modelSource: "https://huggingface.co/zai-org/GLM-5.1",
      privacy: "private",
      offline: false,
      betaModel: false,
      traits: [],
      availableContextTokens: 200000,
      maxCompletionTokens: 24000,
      pricing: { input: p(1.54), cache_input: p(0.286), output: p(4.84) },
      capabilities: caps({
        supportsReasoning: true,
        supportsReasoningEffort: true,
        reasoningEffortOptions: ["none", "low", "medium", "high"],
        defaultReasoningEffort: "low",
      }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
  {
    id: "gemini-3-1-pro-preview",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1771459200,
    model_spec: {
      name: "Gemini 3.1 Pro Preview",
      description: "Google Gemini 3.1 Pro with a long-context price tier.",
      privacy: "anonymized",
      offline: false,
      betaModel: false,
      traits: [],
      availableContextTokens: 1048576,
      maxCompletionTokens: 65536,
      pricing: {
        input: p(2.5),
        output: p(15),
        cache_input: p(0.5),
        cache_write: p(0.5),
        extended: {
          context_token_threshold: 200000,
          input: p(5),
          output: p(22.5),
          cache_input: p(1),
          cache_write: p(1),
        },
      },
      capabilities: caps({
        quantization: "not-available",
        supportsReasoning: true,
        supportsVision: true,
        supportsMultipleImages: true,
        maxImages: 10,
      }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
  {
    id: "claude-sonnet-4-6",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1770681600,
    model_spec: {
      name: "Claude Sonnet 4.6",
      privacy: "anonymized",
      offline: false,
      betaModel: false,
      traits: [],
      availableContextTokens: 200000,
      maxCompletionTokens: 64000,
      pricing: { input: p(3.6), output: p(18), cache_input: p(0.36), cache_write: p(4.5) },
      capabilities: caps({ quantization: "not-available", supportsReasoning: true, supportsVision: true }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
  {
    id: "qwen3-4b",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1745903059,
    model_spec: {
      name: "Venice Small",
      description: "Small, fast and cheap Qwen3 4B.",
      modelSource: "https://huggingface.co/Qwen/Qwen3-4B",
      privacy: "private",
      offline: false,
      betaModel: false,
      traits: ["fastest"],
      availableContextTokens: 32000,
      maxCompletionTokens: 8192,
      pricing: { input: p(0.05), output: p(0.15) },
      capabilities: caps({ quantization: "fp16", supportsReasoning: true, supportsLogProbs: true }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
  {
    id: "llama-3.3-70b",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1733768349,
    model_spec: {
      name: "Llama 3.3 70B",
      modelSource: "https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct",
      privacy: "private",
      offline: false,
      betaModel: false,
      traits: ["default"],
      availableContextTokens: 131072,
      maxCompletionTokens: 16384,
      pricing: { input: p(0.7), output: p(2.8) },
      capabilities: caps({ quantization: "fp8", supportsLogProbs: true }),
      constraints: {
        ...TEXT_CONSTRAINTS,
        frequency_penalty: { default: 0 },
        presence_penalty: { default: 0 },
        repetition_penalty: { default: 1 },
      },
    },
  },
  {
    id: "qwen3-coder-480b-a35b-instruct",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1753142400,
    model_spec: {
      name: "Qwen 3 Coder 480B",
      privacy: "private",
      offline: false,
      betaModel: false,
      traits: ["default_code"],
      availableContextTokens: 262144,
      maxCompletionTokens: 32768,
      pricing: { input: p(0.75), output: p(3), cache_input: p(0.375) },
      capabilities: caps({ optimizedForCode: true }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
  {
    id: "kimi-k2-5",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1769558400,
    model_spec: {
      name: "Kimi K2.5",
      privacy: "private",
      offline: false,
      betaModel: true,
      traits: [],
      availableContextTokens: 256000,
      maxCompletionTokens: 32768,
      pricing: { input: p(0.75), output: p(3.75), cache_input: p(0.125) },
      capabilities: caps({ supportsReasoning: true, supportsVision: true }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
  {
    id: "llama-3.1-405b",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1727966436,
    model_spec: {
      name: "Llama 3.1 405B",
      privacy: "private",
      offline: false,
      betaModel: false,
      traits: [],
      deprecation: { date: "2026-09-30T00:00:00.000Z", removesAt: "2026-09-30T00:00:00.000Z", autoRemap: false },
      availableContextTokens: 65536,
      maxCompletionTokens: 8192,
      pricing: { input: p(1.5), output: p(6) },
      capabilities: caps({ supportsWebSearch: false }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
  {
    id: "llama-3.2-3b",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1727395200,
    model_spec: {
      name: "Llama 3.2 3B",
      description: "Internal utility model; listed without pricing.",
      privacy: "private",
      offline: false,
      betaModel: false,
      traits: [],
      availableContextTokens: 131072,
      maxCompletionTokens: 4096,
      capabilities: caps({ quantization: "fp16", supportsFunctionCalling: false, supportsWebSearch: false }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
  {
    id: "deepseek-r1-671b",
    object: "model",
    owned_by: "venice.ai",
    type: "text",
    created: 1737936000,
    model_spec: {
      name: "DeepSeek R1 671B",
      privacy: "private",
      offline: true,
      betaModel: false,
      traits: [],
      availableContextTokens: 128000,
      maxCompletionTokens: 32768,
      pricing: { input: p(3.5), output: p(7) },
      capabilities: caps({ supportsReasoning: true, supportsFunctionCalling: false }),
      constraints: TEXT_CONSTRAINTS,
    },
  },
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

/** Normalised lookup form: upstream tolerates dots, underscores and spaces in model ids. */
export function normalizeModelId(id: string): string {
  return id
    .trim()
    .toLowerCase()
    .replace(/[._\s]+/g, "-");
}

/** The family a `GET /models?type=` value selects. */
export const MODEL_LIST_TYPES = [
  "text",
  "image",
  "video",
  "inpaint",
  "upscale",
  "embedding",
  "tts",
  "asr",
  "music",
  "all",
  "code",
] as const;
export type ModelListType = (typeof MODEL_LIST_TYPES)[number];

export function isModelListType(value: string): value is ModelListType {
  return (MODEL_LIST_TYPES as readonly string[]).includes(value);
}

export function filterModels(models: readonly SimModel[], type: ModelListType): SimModel[] {
  if (type === "all") return [...models];
  if (type === "code") {
    return models.filter((m) => m.type === "text" && m.model_spec.capabilities.optimizedForCode);
  }
  return models.filter((m) => m.type === type);
}
