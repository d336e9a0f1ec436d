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
