import { DomainError } from "../../lib/errors.js";
import { imageUnitPriceMicro } from "../catalog/catalog-pricing.js";
import { flatJobPricer } from "./admission.js";
import type { InferenceModality, ModalityRequest } from "./endpoint.js";
import type { BurnPricer, RoutableModel } from "./session.js";
import { isObject, type Json, requireModel, switchedOn } from "./text-request.js";

/**
 * The image modality (SPEC "What the service does" 10 and 12, "Image result"): a synchronous job
 * priced by the service from the catalog — per image (flat, by resolution, or by resolution ×
 * quality) × variants — and generated upstream by `POST /image/generate` for both buyer routes
 * (the OpenAI-compatible one is translated onto it: the upstream's own OpenAI route takes one image
 * only). Everything else (admission, escrow, gates incl. the wallet's one image job, fall-forward,
 * settlement, records) is the pipeline's.
 */

export const MAX_VARIANTS = 4;
/** The upstream's own default output format, stated by the service (SPEC: default is WebP). */
export const DEFAULT_IMAGE_FORMAT = "webp";

export interface ImageRequest extends ModalityRequest {
  /** the body forwarded upstream (`model` set per call; fields the service prices validated) */
  forward: Json;
  variants: number;
  resolution: string | undefined;
  quality: string | undefined;
  /** OpenAI route only: how the buyer wants the images back, and the size asked (null: `auto`) */
  openai: { responseFormat: "b64_json" | "url"; mime: string; size: [number, number] | null } | null;
}

function optionalString(body: Json, field: string): string | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || v.length === 0) {
    throw new DomainError("invalid_request", `${field} must be a non-empty string.`, { field });
  }
  return v;
}

function variantsOf(v: unknown, field: string): number {
  if (v === undefined || v === null) return 1;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > MAX_VARIANTS) {
    throw new DomainError("invalid_request", `${field} must be an integer 1-${MAX_VARIANTS}.`, { field });
  }
  return v;
}

function requirePrompt(body: Json): string {
  if (typeof body.prompt !== "string" || body.prompt.trim().length === 0) {
    throw new DomainError("invalid_request", "prompt must be a non-empty string.", { field: "prompt" });
  }
  return body.prompt;
}

/** `POST /v1/image/generate`: the upstream's native body, validated where the service prices it. */
export function parseImageBody(raw: unknown): ImageRequest {
  if (!isObject(raw)) throw new DomainError("invalid_request", "Body must be a JSON object with model and prompt.");
  const body = raw;
  const model = requireModel(body);
  requirePrompt(body);
  if (switchedOn(body.enable_web_search)) {
    throw new DomainError("invalid_request", "enable_web_search is refused: it bills beyond published pricing.", {
      field: "enable_web_search",
    });
  }
  if (body.stream !== undefined && body.stream !== false) {
    throw new DomainError("invalid_request", "Image generation does not stream.", { field: "stream" });
  }
  if (body.return_binary !== undefined && body.return_binary !== false) {
    throw new DomainError("invalid_request", "return_binary is not supported: images come back base64 in images[].", {
      field: "return_binary",
    });
  }
  if (body.variants !== undefined && body.n !== undefined && body.variants !== body.n) {
    throw new DomainError("invalid_request", "Send variants or n, not both with different values.", {
      field: "variants",
    });
  }
  const variants = variantsOf(body.variants ?? body.n, body.variants !== undefined ? "variants" : "n");
  const resolution = optionalString(body, "resolution");
  const quality = optionalString(body, "quality");
  const format = body.format ?? DEFAULT_IMAGE_FORMAT;
  const { n: _n, stream: _s, enable_web_search: _w, ...rest } = body;
  return {
    body,
    model,
    stream: false,
    forward: { ...rest, variants, format },
    variants,
    resolution,
    quality,
    openai: null,
  };
}

const OPENAI_SIZES: Record<string, [number, number] | null> = {
  auto: null,
  "256x256": [256, 256],
  "512x512": [512, 512],
  "1024x1024": [1024, 1024],
  "1536x1024": [1536, 1024],
  "1024x1536": [1024, 1536],
  "1792x1024": [1792, 1024],
  "1024x1792": [1024, 1792],
};
const OPENAI_FORMATS: Record<string, string> = { png: "image/png", jpeg: "image/jpeg", webp: "image/webp" };
/** OpenAI `quality` values that name a priced quality tier; the others (`auto`, `standard`, `hd`) are the model's default. */
const OPENAI_QUALITY_TIERS = new Set(["low", "medium", "high"]);

/**
 * `POST /v1/images/generations` (OpenAI's shape, docs/decisions.md "Images"): translated onto the
 * native body so `n` 1-4 works and the price rules are the same. `size` → the nearest published
 * aspect ratio, or width/height fitted to the upstream's limits (`sizeFields`; `auto`: the model's
 * default), `output_format` → format (PNG by default, as OpenAI), `moderation: low` →
 * safe mode off, `quality` low/medium/high → the priced quality tier; `style`, `background`,
 * `output_compression` and `user` are accepted and not forwarded.
 */
export function parseOpenAiImageBody(raw: unknown): ImageRequest {
  if (!isObject(raw)) throw new DomainError("invalid_request", "Body must be a JSON object with model and prompt.");
  const body = raw;
  const model = requireModel(body);
  const prompt = requirePrompt(body);
  const variants = variantsOf(body.n, "n");
  const size = body.size ?? "auto";
  if (typeof size !== "string" || !(size in OPENAI_SIZES)) {
    throw new DomainError("invalid_request", `size must be one of ${Object.keys(OPENAI_SIZES).join(", ")}.`, {
      field: "size",
    });
  }
  const outputFormat = body.output_format ?? "png";
  if (typeof outputFormat !== "string" || !(outputFormat in OPENAI_FORMATS)) {
    throw new DomainError("invalid_request", "output_format must be png, jpeg or webp.", { field: "output_format" });
  }
  const responseFormat = body.response_format ?? "b64_json";
  if (responseFormat !== "b64_json" && responseFormat !== "url") {
    throw new DomainError("invalid_request", "response_format must be b64_json or url.", { field: "response_format" });
  }
  const moderation = body.moderation ?? "auto";
  if (moderation !== "auto" && moderation !== "low") {
    throw new DomainError("invalid_request", "moderation must be auto or low.", { field: "moderation" });
  }
  const q = body.quality;
  if (q !== undefined && q !== null && typeof q !== "string") {
    throw new DomainError("invalid_request", "quality must be a string.", { field: "quality" });
  }
  const quality = typeof q === "string" && OPENAI_QUALITY_TIERS.has(q) ? q : undefined;
  const forward: Json = {
    prompt,
    variants,
    format: outputFormat,
    ...(moderation === "low" ? { safe_mode: false } : {}),
    ...(quality ? { quality } : {}),
  };
  return {
    body,
    model,
    stream: false,
    forward,
    variants,
    resolution: undefined,
    quality,
    openai: { responseFormat, mime: OPENAI_FORMATS[outputFormat] ?? "image/png", size: OPENAI_SIZES[size] ?? null },
  };
}

/** The upstream's pixel limit per side (VENICE_API §5: width and height at most 1280). */
const MAX_SIDE = 1280;

/**
 * An OpenAI `size` on the native body: models with published aspect ratios get the nearest one;
 * pixel models get width/height, scaled down to fit MAX_SIDE and the model's divisor.
 */
function sizeFields(size: [number, number], constraints: Record<string, unknown> | null): Json {
  const [w, h] = size;
  const ratios = listOf(constraints, "aspectRatios");
  if (ratios && ratios.length > 0) {
    const target = w / h;
    let best = ratios[0] as string;
    let bestGap = Number.POSITIVE_INFINITY;
    for (const r of ratios) {
      const [a, b] = r.split(":").map(Number);
      if (!a || !b) continue;
      const gap = Math.abs(Math.log(a / b / target));
      if (gap < bestGap) {
        best = r;
        bestGap = gap;
      }
    }
    return { aspect_ratio: best };
  }
  const divisor =
    typeof constraints?.widthHeightDivisor === "number" && constraints.widthHeightDivisor > 0
      ? constraints.widthHeightDivisor
      : 1;
  const scale = Math.min(1, MAX_SIDE / Math.max(w, h));
  const fitSide = (v: number) => Math.max(divisor, Math.floor((v * scale) / divisor) * divisor);
  return { width: fitSide(w), height: fitSide(h) };
}

function listOf(constraints: Record<string, unknown> | null, key: string): string[] | null {
  const v = constraints?.[key];
  return Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as string[]) : null;
}

/**
 * The job's price rules: one image at the chosen resolution and quality (the row's defaults when
 * omitted) × variants; the maximum and the actual burn are the same flat job price. A resolution
 * or quality the row does not offer is a 400 naming the field (nothing held).
 */
export function imagePricer(req: ImageRequest, model: RoutableModel): BurnPricer {
  const pricing = model.imagePricing;
  if (!pricing) throw new DomainError("model_not_live", `${model.id} has no published image pricing.`);
  const resolutions = listOf(model.constraints, "resolutions");
  if (req.resolution !== undefined && !resolutions?.includes(req.resolution)) {
    throw new DomainError(
      "invalid_request",
      resolutions
        ? `resolution must be one of ${resolutions.join(", ")} for ${model.id}.`
        : `${model.id} takes no resolution.`,
      { field: "resolution" },
    );
  }
  const qualities = listOf(model.constraints, "qualities");
  if (req.quality !== undefined && !qualities?.includes(req.quality)) {
    // the OpenAI route only sends a quality the model prices; elsewhere it is the buyer's mistake
    throw new DomainError(
      "invalid_request",
      qualities ? `quality must be one of ${qualities.join(", ")} for ${model.id}.` : `${model.id} takes no quality.`,
      { field: "quality" },
    );
  }
  const unit = imageUnitPriceMicro(pricing, { resolution: req.resolution, quality: req.quality });
  if (unit === null || unit <= 0n) {
    throw new DomainError("invalid_request", `${model.id} has no published price for this resolution and quality.`, {
      field: req.resolution !== undefined ? "resolution" : "quality",
    });
  }
  return flatJobPricer(unit * BigInt(req.variants));
}

function imagesOf(answer: Json): string[] | null {
  const images = answer.images;
  return Array.isArray(images) && images.length > 0 && images.every((i) => typeof i === "string")
    ? (images as string[])
    : null;
}

function modality(
  route: "image" | "images_openai",
  parse: (raw: unknown) => ImageRequest,
): InferenceModality<ImageRequest> {
  return {
    route,
    modality: "image",
    path: "/image/generate",
    parse,
    price: imagePricer,
    upstreamBody: (req, session) => ({
      ...req.forward,
      ...(req.openai?.size ? sizeFields(req.openai.size, session.model.constraints) : {}),
      model: session.model.id,
    }),
    meter: (answer, headers) => {
      if (!imagesOf(answer)) return { refused: "no images in the upstream answer" };
      // a content-policy block is a 200 with blacked-out images, not charged upstream (VENICE_API §5)
      if (String(headers["x-venice-is-content-violation"] ?? "").toLowerCase() === "true") {
        return { uncharged: "content_violation" };
      }
      return { promptTokens: 0, completionTokens: 0 };
    },
    answer: (answer, req, session) => {
      const images = imagesOf(answer) ?? [];
      if (!req.openai) {
        return { id: answer.id, images, request: answer.request ?? null, timing: answer.timing ?? null };
      }
      const { responseFormat, mime } = req.openai;
      return {
        created: Math.floor(session.startedAt.getTime() / 1000),
        data: images.map((b64) =>
          responseFormat === "url" ? { url: `data:${mime};base64,${b64}` } : { b64_json: b64 },
        ),
      };
    },
  };
}

/** `POST /v1/image/generate` */
export const imageModality = modality("image", parseImageBody);
/** `POST /v1/images/generations` */
export const openAiImageModality = modality("images_openai", parseOpenAiImageBody);
