/**
 * Prepaid media routes: `POST /image/generate`, `POST /images/generations` (§5) and
 * `POST /video/quote|queue|retrieve|complete` (§6). Prices are debited up front and only when one
 * currency covers the whole amount (else 402).
 */

import { randomUUID } from "node:crypto";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { VENICE_REQUEST_FIELDS } from "../../adapters/upstream/venice-fields.js";
import {
  type Admitted,
  admitRequest,
  MSG_INSUFFICIENT_BALANCE,
  MSG_MODEL_NOT_FOUND,
  MSG_SPEND_LIMIT,
  requireKey,
} from "./admission.js";
import { type ApiContext, baseHeaders, resolveModel, sendApiError, sendApiJson } from "./context.js";
import { detailedError, type Issue, isRecord, type Json, sendJson, typeIssue } from "./http-util.js";
import { admissionFailure, debitPrepaid } from "./keys.js";
import {
  isDownloadUrlVideoModel,
  type PriceUnit,
  SIM_VIDEO_FALLBACK_PRICE,
  SIM_VIDEO_PRICING,
  type SimImageModel,
  type SimModel,
  type SimVideoModel,
} from "./models.js";
import { microToNumber, numberToMicro } from "./money.js";
import type { SimState } from "./state.js";
import type { SimVideoJob, SimVideoOutcome } from "./video-jobs.js";

// ------------------------------------------------------------------ placeholder media bytes

const PNG_1X1 = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);
const WEBP_1X1 = Buffer.from("UklGRiIAAABXRUJQVlA4IBYAAAAwAQCdASoBAAEADsD+JaQAA3AAAAAA", "base64");
const JPEG_1X1 = Buffer.from(
  "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP//////////////////////////////////////////////////////////////////////////////////////wgALCAABAAEBAREA/8QAFBABAAAAAAAAAAAAAAAAAAAAAP/aAAgBAQABPxA=",
  "base64",
);
/** An `ftyp` box: enough for clients that sniff the container. */
export const SIM_MP4_BYTES = Buffer.from("000000186674797069736f6d0000020069736f6d69736f32", "hex");

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

// ------------------------------------------------------------------ shared

function modelOfType<T extends SimModel["type"]>(
  ctx: ApiContext,
  raw: unknown,
  type: T,
  routeName: string,
): Extract<SimModel, { type: T }> | null {
  if (typeof raw !== "string" || raw.trim() === "") {
    sendApiError(ctx, 400, "model is required");
    return null;
  }
  const model = resolveModel(ctx.rt, raw);
  if (!model) {
    sendApiError(ctx, 404, MSG_MODEL_NOT_FOUND);
    return null;
  }
  ctx.record.model = model.id;
  if (model.type !== type) {
    sendApiError(ctx, 400, `Model ${model.id} is a ${model.type} model and does not support ${routeName}`);
    return null;
  }
  if (model.model_spec.offline) {
    sendApiError(ctx, 400, `Model ${model.id} is currently offline. Please select a different model.`);
    return null;
  }
  return model as Extract<SimModel, { type: T }>;
}

/**
 * Debits a prepaid amount (DIEM first, then USD; one currency must cover it) and records it.
 * Sends 402 and returns false when it does not fit.
 */
function chargePrepaid(
  ctx: ApiContext,
  admitted: Admitted,
  amountMicro: bigint,
): { diemMicro: bigint; usdMicro: bigint } | null {
  const charged = debitPrepaid(admitted.key, amountMicro);
  if (!charged) {
    const failure = admissionFailure(admitted.key);
    sendApiJson(
      ctx,
      402,
      { error: failure === "spend_limit" ? MSG_SPEND_LIMIT : MSG_INSUFFICIENT_BALANCE },
      admitted.headers,
    );
    return null;
  }
  ctx.record.burnMicroDiem = amountMicro;
  ctx.record.chargedDiemMicro = charged.diemMicro;
  ctx.record.chargedUsdMicro = charged.usdMicro;
  return charged;
}

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
    if (!chargePrepaid(ctx, { ...admitted, headers }, unit * BigInt(variants))) return;
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

// ------------------------------------------------------------------ video

function durationSeconds(duration: string, autoSeconds: number): number {
  const match = /^(\d+)\s*s$/i.exec(duration.trim());
  return match ? Number(match[1]) : autoSeconds;
}

/**
 * Deterministic quote in micro-USD (= micro-DIEM): seconds × (rate[resolution] + audio rate when the
 * model makes audio and `audio` is not false). Rates: SIM_VIDEO_PRICING.
 */
export function quoteVideoMicro(
  model: SimVideoModel,
  args: { duration: string; resolution?: string; audio?: boolean },
): bigint {
  const price = SIM_VIDEO_PRICING[model.id] ?? SIM_VIDEO_FALLBACK_PRICE;
  const c = model.model_spec.constraints;
  const resolution = args.resolution ?? c.resolutions[0] ?? "default";
  const rate =
    price.perSecondMicro[resolution] ?? price.perSecondMicro.default ?? Object.values(price.perSecondMicro)[0] ?? 0n;
  const audio = c.audio && args.audio !== false ? price.audioPerSecondMicro : 0n;
  return BigInt(durationSeconds(args.duration, price.autoSeconds)) * (rate + audio);
}

function videoParamIssues(body: Record<string, unknown>, model: SimVideoModel, forQueue: boolean): Issue[] {
  const issues: Issue[] = [];
  const c = model.model_spec.constraints;
  if (typeof body.duration !== "string") {
    issues.push(typeIssue(["duration"], "string", body.duration));
  } else if (!c.durations.includes(body.duration)) {
    issues.push({
      code: "invalid_enum_value",
      path: ["duration"],
      message: `Unsupported duration for ${model.id}. Expected ${c.durations.join(" | ")}`,
    });
  }
  if (body.resolution !== undefined && c.resolutions.length > 0 && !c.resolutions.includes(String(body.resolution))) {
    issues.push({
      code: "invalid_enum_value",
      path: ["resolution"],
      message: `Unsupported resolution for ${model.id}. Expected ${c.resolutions.join(" | ")}`,
    });
  }
  if (!forQueue) return issues;
  if (
    body.aspect_ratio !== undefined &&
    c.aspect_ratios.length > 0 &&
    !c.aspect_ratios.includes(String(body.aspect_ratio))
  ) {
    issues.push({
      code: "invalid_enum_value",
      path: ["aspect_ratio"],
      message: `Unsupported aspect_ratio for ${model.id}. Expected ${c.aspect_ratios.join(" | ")}`,
    });
  }
  const limit = c.prompt_character_limit ?? 2500;
  if (!c.video_input) {
    if (typeof body.prompt !== "string" || body.prompt.length === 0) {
      issues.push(typeIssue(["prompt"], "string", body.prompt));
    }
  }
  if (typeof body.prompt === "string" && body.prompt.length > limit) {
    issues.push({ code: "too_big", path: ["prompt"], message: `String must contain at most ${limit} character(s)` });
  }
  if (
    c.model_type === "image-to-video" &&
    !model.id.includes("reference-to-video") &&
    typeof body.image_url !== "string"
  ) {
    issues.push({ code: "custom", path: ["image_url"], message: `image_url is required for ${model.id}` });
  }
  if (model.id.includes("reference-to-video") && !Array.isArray(body.reference_image_urls)) {
    issues.push({
      code: "custom",
      path: ["reference_image_urls"],
      message: `reference_image_urls is required for ${model.id}`,
    });
  }
  if (c.video_input && typeof body.video_url !== "string") {
    issues.push({ code: "custom", path: ["video_url"], message: `video_url is required for ${model.id}` });
  }
  if (body.audio === false && !c.audio_configurable) {
    issues.push({ code: "custom", path: ["audio"], message: `audio cannot be disabled for ${model.id}` });
  }
  return issues;
}

/** `POST /video/quote` → `{quote}` in USD; no charge, no job. */
export async function handleVideoQuote(ctx: ApiContext): Promise<void> {
  const body = ctx.body;
  if (!isRecord(body)) {
    sendApiJson(ctx, 400, detailedError([typeIssue([], "object", body)]));
    return;
  }
  const model = modelOfType(ctx, body.model, "video", "/video/quote");
  if (!model) return;
  const issues = videoParamIssues(body, model, false);
  if (issues.length > 0) {
    sendApiJson(ctx, 400, detailedError(issues));
    return;
  }
  const quote = quoteVideoMicro(model, {
    duration: body.duration as string,
    resolution: body.resolution as string | undefined,
    audio: body.audio === false ? false : undefined,
  });
  sendApiJson(ctx, 200, { quote: microToNumber(quote) });
}

const VIDEO_OUTCOME_RE = /\[\[sim:video=(mp4|failed|content_policy|completed_no_media)\]\]/;
const VIDEO_POLLS_RE = /\[\[sim:polls=(\d{1,4})\]\]/;
const VIDEO_RENDER_MS_RE = /\[\[sim:render_ms=(\d{1,9})\]\]/;

/**
 * A job's outcome: the `[[sim:video=…]]` directive, else the configured default on ordinary models;
 * `*-private` models turn a successful outcome (`mp4`, directive or not) into `download_url`.
 */
function chooseVideoOutcome(state: SimState, prompt: string, downloadModel: boolean): SimVideoOutcome {
  const forced = VIDEO_OUTCOME_RE.exec(prompt)?.[1] as SimVideoOutcome | undefined;
  if (downloadModel) return forced === undefined || forced === "mp4" ? "download_url" : forced;
  return forced ?? state.video.defaultOutcome;
}

/**
 * `POST /video/queue`: validates against the model's constraints, debits the quote up front (402 when
 * no single currency covers it), returns `{model, queue_id}` (+ `download_url` on `*-private` models
 * unless the job is `completed_no_media`). Prompt directives: `[[sim:video=mp4|failed|content_policy|
 * completed_no_media]]`, `[[sim:polls=N]]`, `[[sim:render_ms=N]]`.
 */
export async function handleVideoQueue(ctx: ApiContext): Promise<void> {
  const body = ctx.body;
  if (!isRecord(body)) {
    sendApiJson(ctx, 400, detailedError([typeIssue([], "object", body)]));
    return;
  }
  const model = modelOfType(ctx, body.model, "video", "/video/queue");
  if (!model) return;
  const issues = videoParamIssues(body, model, true);
  if (issues.length > 0) {
    sendApiJson(ctx, 400, detailedError(issues));
    return;
  }
  const admitted = admitRequest(ctx, model, { prepaid: true });
  if (!admitted) return;
  const quote = quoteVideoMicro(model, {
    duration: body.duration as string,
    resolution: body.resolution as string | undefined,
    audio: body.audio === false ? false : undefined,
  });
  const charged = chargePrepaid(ctx, admitted, quote);
  if (!charged) return;
  const prompt = typeof body.prompt === "string" ? body.prompt : "";
  const polls = VIDEO_POLLS_RE.exec(prompt)?.[1];
  const renderMs = VIDEO_RENDER_MS_RE.exec(prompt)?.[1];
  const state = ctx.rt.state;
  const downloadModel = isDownloadUrlVideoModel(model.id);
  const outcome = chooseVideoOutcome(state, prompt, downloadModel);
  const queueId = randomUUID();
  state.video.jobs.set(queueId, {
    queueId,
    model: model.id,
    key: admitted.key.key,
    quoteMicro: quote,
    charged,
    outcome,
    processingPollsLeft: polls === undefined ? state.video.processingPolls : Number(polls),
    renderMs: renderMs === undefined ? state.video.renderMs : Number(renderMs),
    createdAt: state.now(),
    completedAt: null,
    refunded: false,
    deleted: false,
    queueRecordId: ctx.record.id,
    record: ctx.record,
  });
  const out: Record<string, Json> = { model: model.id, queue_id: queueId };
  // The URL is handed out at queue, before the fate is known (a failed job's URL then 404s), except
  // for completed_no_media: the upstream that "completes" without media never gave one.
  if (downloadModel && outcome !== "completed_no_media")
    out.download_url = `http://${ctx.req.headers.host ?? "127.0.0.1"}/__media/${queueId}.mp4`;
  sendApiJson(ctx, 200, out, admitted.headers);
}

const MSG_MEDIA_NOT_FOUND = "Media could not be found. Request may be invalid, expired, or deleted.";
const AVERAGE_EXECUTION_MS = 145_000;

function findJob(ctx: ApiContext, body: Record<string, unknown>) {
  const key = requireKey(ctx);
  const job = typeof body.queue_id === "string" ? ctx.rt.state.video.jobs.get(body.queue_id) : undefined;
  if (!job || job.deleted || job.key !== key.key) return undefined;
  if (typeof body.model === "string" && resolveModel(ctx.rt, body.model)?.id !== job.model) return undefined;
  return job;
}

function completedBody(job: SimVideoJob): Record<string, Json> {
  return {
    status: "COMPLETED",
    average_execution_time: AVERAGE_EXECUTION_MS,
    execution_duration: Math.max(0, (job.completedAt?.getTime() ?? 0) - job.createdAt.getTime()),
  };
}

/**
 * `POST /video/retrieve`: 200 JSON PROCESSING while the job renders (its processing polls, and its
 * render time on the sim clock), then by outcome: 200 `video/mp4` bytes; JSON COMPLETED
 * (download_url models, and `completed_no_media`, which never serves media); `failed` → 200
 * `{status:"failed"}` and content policy → 422, both refunded once by the first retrieve that sees
 * them and answered again on every later retrieve; unknown/deleted/other key's → 404.
 */
export async function handleVideoRetrieve(ctx: ApiContext): Promise<void> {
  const body = ctx.body;
  if (!isRecord(body)) {
    sendApiJson(ctx, 400, detailedError([typeIssue([], "object", body)]));
    return;
  }
  if (typeof body.queue_id !== "string" || typeof body.model !== "string") {
    sendApiJson(ctx, 400, detailedError([typeIssue(["queue_id"], "string", body.queue_id)]));
    return;
  }
  const job = findJob(ctx, body);
  if (!job) {
    sendApiError(ctx, 404, MSG_MEDIA_NOT_FOUND);
    return;
  }
  ctx.record.model = job.model;
  const state = ctx.rt.state;
  if (job.completedAt === null && state.takeVideoProcessingPoll(job)) {
    sendApiJson(ctx, 200, {
      status: "PROCESSING",
      average_execution_time: AVERAGE_EXECUTION_MS,
      execution_duration: Math.max(0, state.nowMs() - job.createdAt.getTime()),
    });
    return;
  }
  job.completedAt ??= state.now();
  switch (job.outcome) {
    case "failed":
      state.refundVideoJob(job.queueId);
      sendApiJson(ctx, 200, { status: "failed", error: "Video generation failed. Credits have been refunded." });
      return;
    case "content_policy":
      state.refundVideoJob(job.queueId);
      sendApiJson(ctx, 422, {
        error: {
          message: "The provider rejected this request under its content policy. Credits have been refunded.",
          type: "provider_content_policy",
          credits_refunded: true,
        },
      });
      return;
    case "download_url":
    case "completed_no_media":
      sendApiJson(ctx, 200, completedBody(job));
      return;
    case "mp4":
      if (body.delete_media_on_completion === true) job.deleted = true;
      ctx.res.writeHead(200, {
        ...baseHeaders(ctx),
        "content-type": "video/mp4",
        "content-length": SIM_MP4_BYTES.length,
      });
      ctx.res.end(SIM_MP4_BYTES);
  }
}

/**
 * `POST /video/complete` → `{success:true}` on any live job of the key (delivered, still rendering,
 * failed or completed without media); marks it deleted, so retrieve then answers 404. Deleting a job
 * whose failure no retrieve has seen yet forgoes its refund (the sim refunds on discovery only).
 */
export async function handleVideoComplete(ctx: ApiContext): Promise<void> {
  const body = ctx.body;
  if (!isRecord(body) || typeof body.queue_id !== "string" || typeof body.model !== "string") {
    sendApiJson(ctx, 400, detailedError([typeIssue(["queue_id"], "string", isRecord(body) ? body.queue_id : body)]));
    return;
  }
  const job = findJob(ctx, body);
  if (!job) {
    sendApiError(ctx, 404, MSG_MEDIA_NOT_FOUND);
    return;
  }
  ctx.record.model = job.model;
  job.deleted = true;
  sendApiJson(ctx, 200, { success: true });
}

/** Unauthenticated `GET|DELETE /__media/{queue_id}.mp4` behind `download_url` (private models). */
export function handleMediaDownload(state: SimState, req: IncomingMessage, res: ServerResponse, path: string): void {
  const match = /^\/__media\/([0-9a-f-]+)\.mp4$/.exec(path);
  const job = match?.[1] ? state.video.jobs.get(match[1]) : undefined;
  if (!job || job.deleted || job.outcome !== "download_url" || job.completedAt === null) {
    sendJson(res, 404, { error: MSG_MEDIA_NOT_FOUND });
    return;
  }
  if (req.method === "DELETE") {
    job.deleted = true;
    sendJson(res, 200, { success: true });
    return;
  }
  res.writeHead(200, { "content-type": "video/mp4", "content-length": SIM_MP4_BYTES.length });
  res.end(SIM_MP4_BYTES);
}
