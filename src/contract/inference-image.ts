import { z } from "./common.js";
import {
  type Json,
  type ModalityRequest,
  offSwitch,
  ownOptions,
  PROMPT_MESSAGE,
  svcOptions,
} from "./inference-options.js";
import { modelId } from "./model-id.js";
import { parseWith, refusal, withRule } from "./parse.js";

/** The image routes' requests: the upstream's native body and OpenAI's, translated onto it. */

/** Images per image request (`variants` / `n`). */
export const MAX_IMAGE_VARIANTS = 4;
/** The upstream's own default output format on the native image route, stated by the service (SPEC: WebP). */
const DEFAULT_IMAGE_FORMAT = "webp";

const nonEmptyString = (field: string) =>
  z
    .string({ invalid_type_error: `${field} must be a non-empty string.` })
    .min(1, { message: `${field} must be a non-empty string.` });
const prompt = z
  .string({ required_error: PROMPT_MESSAGE, invalid_type_error: PROMPT_MESSAGE })
  .refine((p) => p.trim().length > 0, { message: PROMPT_MESSAGE });

const variants = (field: string) =>
  z
    .number({ invalid_type_error: `${field} must be an integer 1-${MAX_IMAGE_VARIANTS}.` })
    .int({ message: `${field} must be an integer 1-${MAX_IMAGE_VARIANTS}.` })
    .min(1, { message: `${field} must be an integer 1-${MAX_IMAGE_VARIANTS}.` })
    .max(MAX_IMAGE_VARIANTS, { message: `${field} must be an integer 1-${MAX_IMAGE_VARIANTS}.` })
    .nullable()
    .optional();

const IMAGE_BODY_MESSAGE = "Body must be a JSON object with model and prompt.";
const imageBodyErrors = { required_error: IMAGE_BODY_MESSAGE, invalid_type_error: IMAGE_BODY_MESSAGE };

const imageFields = {
  variants: variants("variants"),
  n: variants("n"),
  resolution: nonEmptyString("resolution").nullable().optional(),
  quality: nonEmptyString("quality").nullable().optional(),
  hide_watermark: z.boolean().optional().openapi({ description: "true removes the watermark at no extra cost" }),
  format: z.string().optional().openapi({ description: "output format (default webp)", example: "webp" }),
  svc: svcOptions,
};

/** `POST /v1/image/generate`: the upstream's native body; `resolution`, `quality`, `variants`/`n` are priced. */
export const imageGenerateBody = z
  .object({ model: modelId, prompt, ...imageFields }, imageBodyErrors)
  .passthrough()
  .openapi("ImageGenerateRequest", {
    description:
      "`enable_web_search` is refused; other fields go upstream if the upstream documents them, else are dropped.",
  });

/** Absent or `false`, else the 400 `message` names the field. */
const offOnly = (message: string) => withRule(z.unknown(), (v) => (v === false ? undefined : message)).optional();

/**
 * The native image body in two steps, in the order a 400 names them: first what is refused
 * outright (web search, the prompt rewrite, streaming, binary answers) and `variants` and `n` with different values,
 * then the priced fields.
 */
const imageRequestBody = z
  .object(
    {
      model: modelId,
      prompt,
      enable_web_search: offSwitch("enable_web_search is refused: it bills beyond published pricing."),
      enhance_prompt: offSwitch("enhance_prompt is refused: its prompt rewrite bills beyond published pricing."),
      stream: offOnly("Image generation does not stream."),
      return_binary: offOnly("return_binary is not supported: images come back base64 in images[]."),
    },
    imageBodyErrors,
  )
  .passthrough()
  .superRefine((b, ctx) => {
    if (b.variants !== undefined && b.n !== undefined && b.variants !== b.n) {
      ctx.addIssue({
        code: "custom",
        path: ["variants"],
        ...refusal("Send variants or n, not both with different values."),
      });
    }
  })
  .pipe(z.object(imageFields).passthrough());

/** OpenAI route only: how the buyer wants the images back, and the size asked (null: `auto`). */
export interface OpenAiImageOptions {
  responseFormat: "b64_json" | "url";
  mime: string;
  size: [number, number] | null;
}

export interface ImageRequest extends ModalityRequest {
  /** the body forwarded upstream (`model` set per call; fields the service prices validated) */
  forward: Json;
  variants: number;
  resolution: string | undefined;
  quality: string | undefined;
  openai: OpenAiImageOptions | null;
}

/** `POST /v1/image/generate`: the typed request (`n` forwarded as `variants`, WebP by default), or the 400. */
export function parseImageRequest(raw: unknown): ImageRequest {
  const b = parseWith(imageRequestBody, raw);
  const variants = b.variants ?? b.n ?? 1;
  const own = ownOptions(raw, b.svc);
  const { n: _n, stream: _s, enable_web_search: _w, ...rest } = own.body;
  return {
    ...own,
    model: (raw as { model: string }).model,
    stream: false,
    forward: { ...rest, variants, format: b.format ?? DEFAULT_IMAGE_FORMAT },
    variants,
    resolution: b.resolution ?? undefined,
    quality: b.quality ?? undefined,
    openai: null,
  };
}

const OPENAI_IMAGE_SIZES: Readonly<Record<string, [number, number] | null>> = {
  auto: null,
  "256x256": [256, 256],
  "512x512": [512, 512],
  "1024x1024": [1024, 1024],
  "1536x1024": [1536, 1024],
  "1024x1536": [1024, 1536],
  "1792x1024": [1792, 1024],
  "1024x1792": [1024, 1792],
};
const OPENAI_IMAGE_FORMATS: Readonly<Record<string, string>> = {
  png: "image/png",
  jpeg: "image/jpeg",
  webp: "image/webp",
};
/** OpenAI `quality` values that name a priced quality tier; the others (`auto`, `standard`, `hd`) are the model's default. */
const OPENAI_QUALITY_TIERS = new Set(["low", "medium", "high"]);

/** An optional string that is one of `allowed`; anything else (null included) is the 400 `message`. */
const oneOfStrings = (allowed: readonly string[], message: string) =>
  z
    .string({ invalid_type_error: message })
    .refine((v) => allowed.includes(v), { message })
    .optional();

const SIZE_MESSAGE = `size must be one of ${Object.keys(OPENAI_IMAGE_SIZES).join(", ")}.`;

/** `POST /v1/images/generations`: OpenAI's image body, translated onto the native one. */
export const openAiImageBody = z
  .object(
    {
      model: modelId,
      prompt,
      n: variants("n"),
      size: oneOfStrings(Object.keys(OPENAI_IMAGE_SIZES), SIZE_MESSAGE).openapi({ example: "1024x1024" }),
      output_format: oneOfStrings(["png", "jpeg", "webp"], "output_format must be png, jpeg or webp.").openapi({
        enum: ["png", "jpeg", "webp"],
      }),
      response_format: oneOfStrings(["b64_json", "url"], "response_format must be b64_json or url.").openapi({
        enum: ["b64_json", "url"],
      }),
      moderation: oneOfStrings(["auto", "low"], "moderation must be auto or low.").openapi({ enum: ["auto", "low"] }),
      quality: z.string({ invalid_type_error: "quality must be a string." }).nullable().optional(),
      svc: svcOptions,
    },
    imageBodyErrors,
  )
  .passthrough()
  .openapi("OpenAiImageRequest");

/**
 * `POST /v1/images/generations` (OpenAI's shape, docs/decisions.md "Images"): the typed request on
 * the native body, so `n` 1-4 works and the price rules are the same. `output_format` → format (PNG
 * by default, as OpenAI), `moderation: low` → safe mode off, `quality` low/medium/high → the priced
 * quality tier; `size` is fitted to the model by the domain (its catalog row); `style`,
 * `background`, `output_compression` and `user` are accepted and not forwarded.
 */
export function parseOpenAiImageRequest(raw: unknown): ImageRequest {
  const b = parseWith(openAiImageBody, raw);
  const variants = b.n ?? 1;
  const format = b.output_format ?? "png";
  const quality = typeof b.quality === "string" && OPENAI_QUALITY_TIERS.has(b.quality) ? b.quality : undefined;
  return {
    ...ownOptions(raw, b.svc),
    model: b.model,
    // not a stream route: `stream: true` is the endpoint's refusal ("This route does not stream.")
    stream: (raw as Json).stream === true,
    forward: {
      prompt: b.prompt,
      variants,
      format,
      ...(b.moderation === "low" ? { safe_mode: false } : {}),
      ...(quality ? { quality } : {}),
    },
    variants,
    resolution: undefined,
    quality,
    openai: {
      responseFormat: b.response_format === "url" ? "url" : "b64_json",
      mime: OPENAI_IMAGE_FORMATS[format] ?? "image/png",
      size: OPENAI_IMAGE_SIZES[b.size ?? "auto"] ?? null,
    },
  };
}
