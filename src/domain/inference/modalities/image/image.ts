import type { IncomingHttpHeaders } from "node:http";
import { documentedBody } from "../../../../adapters/upstream/reference.js";
import {
  type ImageRequest,
  type Json,
  parseImageRequest,
  parseOpenAiImageRequest,
} from "../../../../contract/inference.js";
import { DomainError } from "../../../../lib/errors.js";
import { imageUnitPriceMicro } from "../../../catalog/catalog-pricing.js";
import { flatJobPricer } from "../../pipeline/admission.js";
import type { InferenceModality } from "../../pipeline/endpoint.js";
import type { BurnPricer, RoutableModel } from "../../pipeline/session.js";

export type { ImageRequest };

/**
 * The image modality (SPEC "What the service does" 10 and 12, "Image result"): a synchronous job
 * priced by the service from the catalog — per image (flat, by resolution, or by resolution ×
 * quality) × variants — and generated upstream by `POST /image/generate` for both buyer routes
 * (the OpenAI-compatible one is translated onto it by the contract's `parseOpenAiImageRequest`:
 * the upstream's own OpenAI route takes one image only). The bodies' shape is the contract's
 * (src/contract/inference.ts); the rules here need the catalog row: the priced tiers and the
 * OpenAI `size` fitted to the model. Everything else (admission, escrow, gates incl. the wallet's
 * one image job, fall-forward, settlement, records) is the pipeline's.
 */

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

/**
 * The upstream's content-policy headers on an image answer (vendor/venice/api-spec.mdx "Response
 * Headers Reference"; swagger `/image/generate`): `x-venice-is-content-violation` (Venice's policies)
 * or `x-venice-is-adult-model-content-violation` (an adult model's), `"true"` when flagged.
 * `x-venice-is-blurred` is not a violation (Safe Venice blurred an image it delivered).
 */
export const CONTENT_VIOLATION_HEADERS = [
  "x-venice-is-content-violation",
  "x-venice-is-adult-model-content-violation",
] as const;

export function isContentViolation(headers: IncomingHttpHeaders): boolean {
  return CONTENT_VIOLATION_HEADERS.some(
    (h) =>
      String(headers[h] ?? "")
        .trim()
        .toLowerCase() === "true",
  );
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
      // only what the reference documents of the native body (undocumented fields dropped)
      ...documentedBody("/image/generate", req.forward),
      ...(req.openai?.size ? sizeFields(req.openai.size, session.model.constraints) : {}),
      model: session.model.id,
    }),
    meter: (answer, headers) => {
      if (!imagesOf(answer)) return { refused: "no images in the upstream answer" };
      // a content-policy answer is a 200 with blacked-out images: charged what the upstream burned
      if (isContentViolation(headers)) return { flagged: "content_violation" };
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
export const imageModality = modality("image", parseImageRequest);
/** `POST /v1/images/generations` */
export const openAiImageModality = modality("images_openai", parseOpenAiImageRequest);
