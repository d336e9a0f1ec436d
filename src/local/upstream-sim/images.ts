import type { OutgoingHttpHeaders } from "node:http";
import { VENICE_REQUEST_FIELDS } from "../../adapters/upstream/venice-fields.js";
import { admitRequest, MSG_MODEL_NOT_FOUND } from "./admission.js";
import { ENHANCE_PROMPT_FEE_MICRO_DIEM } from "./burn.js";
import { type ApiContext, resolveModel, sendApiError, sendApiJson } from "./context.js";
import { detailedError, type Issue, isRecord, type Json, typeIssue } from "./http-util.js";
import { chargePrepaid, modelOfType } from "./media-admission.js";
import type { PriceUnit, SimImageModel } from "./models.js";
import { numberToMicro } from "./money.js";

/**
 * Prepaid image routes: `POST /image/generate` and `POST /images/generations` (§5). The price is
 * debited up front (`chargePrepaid`).
 */

const PNG_1X1 = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);
const WEBP_1X1 = Buffer.from("UklGRiIAAABXRUJQVlA4IBYAAAAwAQCdASoBAAEADsD+JaQAA3AAAAAA", "base64");
const JPEG_1X1 = Buffer.from(
  "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP//////////////////////////////////////////////////////////////////////////////////////wgALCAABAAEBAREA/8QAFBABAAAAAAAAAAAAAAAAAAAAAP/aAAgBAQABPxA=",
  "base64",
);
const IMAGE_BYTES: Record<string, { bytes: Buffer; mime: string }> = {
  webp: { bytes: WEBP_1X1, mime: "image/webp" },
  png: { bytes: PNG_1X1, mime: "image/png" },
  jpeg: { bytes: JPEG_1X1, mime: "image/jpeg" },
};

/**
 * Content-policy answers (200, flagged by header). The reference documents the headers but not
 * their billing, so a flagged image is debited its normal price; `…_free` flags it without a debit.
 */
const CONTENT_VIOLATION_DIRECTIVE = "[[sim:content_violation]]";
const CONTENT_VIOLATION_FREE_DIRECTIVE = "[[sim:content_violation_free]]";
const ADULT_CONTENT_VIOLATION_DIRECTIVE = "[[sim:adult_content_violation]]";

function priceMicro(unit: PriceUnit | undefined): bigint | null {
  return unit ? numberToMicro(unit.diem) : null;
}

/**
 * Per-image price: `generation` (flat), else `quality[resolution][quality]` for quality models, else
 * `resolutions[resolution]`; resolution/quality default to the model's defaults. Null when unpriced.
 */
export function imageUnitPriceMicro(model: SimImageModel, resolution?: string, quality?: string): bigint | null {
  const pricing = model.model_spec.pricing;
  if (!pricing) return null;
  if (pricing.generation) return priceMicro(pricing.generation);
  const c = model.model_spec.constraints;
  const res = resolution ?? c.defaultResolution ?? "1K";
  if (pricing.quality && c.qualities) {
    return priceMicro(pricing.quality[res]?.[quality ?? c.defaultQuality ?? "high"]);
  }
  return priceMicro(pricing.resolutions?.[res]);
}

// ------------------------------------------------------------------ POST /image/generate

/** The reference's fields (`additionalProperties: false`: anything else → 400), from the generated allow-list. */
const IMAGE_GENERATE_FIELDS: ReadonlySet<string> = new Set(VENICE_REQUEST_FIELDS["/image/generate"].fields);

function imageGenerateIssues(body: Record<string, unknown>, model: SimImageModel): Issue[] {
  const issues: Issue[] = [];
  const unknown = Object.keys(body).filter((k) => !IMAGE_GENERATE_FIELDS.has(k));
  if (unknown.length > 0) {
    issues.push({
      code: "unrecognized_keys",
      keys: unknown,
      path: [],
      message: `Unrecognized key(s) in object: ${unknown.map((k) => `'${k}'`).join(", ")}`,
    });
  }
  const c = model.model_spec.constraints;
  if (typeof body.prompt !== "string" || body.prompt.length === 0) {
    issues.push(typeIssue(["prompt"], "string", body.prompt));
  } else if (body.prompt.length > c.promptCharacterLimit) {
    issues.push({
      code: "too_big",
      path: ["prompt"],
      message: `String must contain at most ${c.promptCharacterLimit} character(s)`,
    });
  }
  for (const field of ["width", "height"]) {
    const v = body[field];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > 1280) {
      issues.push({ code: "invalid_type", path: [field], message: "Expected an integer between 1 and 1280" });
    }
  }
  const variants = body.variants;
  if (
    variants !== undefined &&
    (typeof variants !== "number" || !Number.isInteger(variants) || variants < 1 || variants > 4)
  ) {
    issues.push({ code: "too_big", path: ["variants"], message: "variants must be an integer between 1 and 4" });
  }
  if (body.format !== undefined && !(typeof body.format === "string" && body.format in IMAGE_BYTES)) {
    issues.push({ code: "invalid_enum_value", path: ["format"], message: "Expected 'webp' | 'png' | 'jpeg'" });
  }
  if (body.resolution !== undefined && c.resolutions && !c.resolutions.includes(String(body.resolution))) {
    issues.push({
      code: "invalid_enum_value",
      path: ["resolution"],
      message: `Invalid resolution for ${model.id}. Expected ${c.resolutions.join(" | ")}`,
    });
  }
  if (body.quality !== undefined && c.qualities && !c.qualities.includes(String(body.quality))) {
    issues.push({
      code: "invalid_enum_value",
      path: ["quality"],
      message: `Invalid quality for ${model.id}. Expected ${c.qualities.join(" | ")}`,
    });
  }
  return issues;
}

/**
 * `POST /image/generate`: strict body; price × variants debited up front; a content violation → 200
 * flagged (`x-venice-is-content-violation` / `x-venice-is-adult-model-content-violation`), debited
 * like any image unless `[[sim:content_violation_free]]`.
 */
export async function handleImageGenerate(ctx: ApiContext): Promise<void> {
  const body = ctx.body;
  if (!isRecord(body)) {
    sendApiJson(ctx, 400, detailedError([typeIssue([], "object", body)]));
    return;
  }
  if ("inpaint" in body) {
    sendApiError(ctx, 400, "inpaint is no longer supported on /image/generate; use /image/edit");
    return;
  }
  const model = modelOfType(ctx, body.model, "image", "/image/generate");
  if (!model) return;
  const issues = imageGenerateIssues(body, model);
  if (issues.length > 0) {
    sendApiJson(ctx, 400, detailedError(issues));
    return;
  }
  const c = model.model_spec.constraints;
  // resolution is dropped when the model has none; quality ignored unless supported.
  const resolution = c.resolutions ? ((body.resolution as string | undefined) ?? c.defaultResolution) : undefined;
  const quality = c.qualities ? ((body.quality as string | undefined) ?? c.defaultQuality) : undefined;
  const returnBinary = body.return_binary === true;
  const variants = returnBinary ? 1 : ((body.variants as number | undefined) ?? 1);
  const format = (body.format as string | undefined) ?? "webp";
  const prompt = body.prompt as string;
  const admitted = admitRequest(ctx, model, { prepaid: true });
  if (!admitted) return;
  const free = prompt.includes(CONTENT_VIOLATION_FREE_DIRECTIVE);
  const violation = free || prompt.includes(CONTENT_VIOLATION_DIRECTIVE);
  const adult = prompt.includes(ADULT_CONTENT_VIOLATION_DIRECTIVE);
  const headers: OutgoingHttpHeaders = {
    ...admitted.headers,
    "x-venice-is-content-violation": violation ? "true" : "false",
    "x-venice-is-adult-model-content-violation": adult ? "true" : "false",
    "x-venice-is-blurred": "false",
  };
  if (!free) {
    const unit = imageUnitPriceMicro(model, resolution, quality) ?? 0n;
    const rewrite = body.enhance_prompt === true ? ENHANCE_PROMPT_FEE_MICRO_DIEM : 0n;
    if (!chargePrepaid(ctx, { ...admitted, headers }, unit * BigInt(variants) + rewrite)) return;
  }
  const image = IMAGE_BYTES[format] ?? { bytes: WEBP_1X1, mime: "image/webp" };
  if (returnBinary) {
    ctx.res.writeHead(200, { ...headers, "content-type": image.mime, "content-length": image.bytes.length });
    ctx.res.end(image.bytes);
    return;
  }
  const b64 = image.bytes.toString("base64");
  const data: Record<string, Json> = {
    model: model.id,
    prompt,
    width: (body.width as number | undefined) ?? 1024,
    height: (body.height as number | undefined) ?? 1024,
    format,
    variants,
    safe_mode: body.safe_mode !== false,
    hide_watermark: body.hide_watermark === true,
    return_binary: false,
    enhance_prompt: body.enhance_prompt === true,
  };
  if (resolution) data.resolution = resolution;
  if (quality) data.quality = quality;
  if (typeof body.aspect_ratio === "string") data.aspect_ratio = body.aspect_ratio;
  sendApiJson(
    ctx,
    200,
    {
      id: `generate-image-${ctx.rt.state.nowMs()}`,
      images: Array.from({ length: variants }, () => b64),
      timing: { inferenceDuration: 0, inferencePreprocessingTime: 0, inferenceQueueTime: 0, total: 0 },
      request: { success: true, data },
    },
    headers,
  );
}

// ------------------------------------------------------------------ POST /images/generations

const OPENAI_IMAGE_SIZES = new Set([
  "auto",
  "256x256",
  "512x512",
  "1024x1024",
  "1536x1024",
  "1024x1536",
  "1792x1024",
  "1024x1792",
]);

function defaultImageModel(ctx: ApiContext): SimImageModel | undefined {
  const images = ctx.rt.models.filter((m): m is SimImageModel => m.type === "image" && !m.model_spec.offline);
  return images.find((m) => m.model_spec.traits.includes("default")) ?? images[0];
}

/** `POST /images/generations` (OpenAI-compatible): `n` max 1; unknown model falls back to the default image model. */
export async function handleImagesGenerations(ctx: ApiContext): Promise<void> {
  const body = ctx.body;
  if (!isRecord(body)) {
    sendApiJson(ctx, 400, detailedError([typeIssue([], "object", body)]));
    return;
  }
  const issues: Issue[] = [];
  if (typeof body.prompt !== "string" || body.prompt.length === 0 || body.prompt.length > 1500) {
    issues.push({ code: "invalid_string", path: ["prompt"], message: "prompt must be 1-1500 characters" });
  }
  if (body.n !== undefined && body.n !== 1) {
    issues.push({ code: "too_big", path: ["n"], message: "Number must be less than or equal to 1" });
  }
  if (body.size !== undefined && !(typeof body.size === "string" && OPENAI_IMAGE_SIZES.has(body.size))) {
    issues.push({ code: "invalid_enum_value", path: ["size"], message: "Invalid size" });
  }
  const outputFormat = (body.output_format as string | undefined) ?? "png";
  if (!(outputFormat in IMAGE_BYTES)) {
    issues.push({ code: "invalid_enum_value", path: ["output_format"], message: "Expected 'png' | 'jpeg' | 'webp'" });
  }
  if (issues.length > 0) {
    sendApiJson(ctx, 400, detailedError(issues));
    return;
  }
  const requested = typeof body.model === "string" ? resolveModel(ctx.rt, body.model) : undefined;
  const model = requested?.type === "image" && !requested.model_spec.offline ? requested : defaultImageModel(ctx);
  if (!model) {
    sendApiError(ctx, 404, MSG_MODEL_NOT_FOUND);
    return;
  }
  ctx.record.model = model.id;
  const admitted = admitRequest(ctx, model, { prepaid: true });
  if (!admitted) return;
  if (!chargePrepaid(ctx, admitted, imageUnitPriceMicro(model) ?? 0n)) return;
  const image = IMAGE_BYTES[outputFormat] ?? { bytes: PNG_1X1, mime: "image/png" };
  const b64 = image.bytes.toString("base64");
  const item = body.response_format === "url" ? { url: `data:${image.mime};base64,${b64}` } : { b64_json: b64 };
  sendApiJson(ctx, 200, { created: Math.floor(ctx.rt.state.nowMs() / 1000), data: [item] }, admitted.headers);
}
