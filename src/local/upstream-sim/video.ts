import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { admitRequest, requireKey } from "./admission.js";
import { isDownloadUrlVideoModel, SIM_VIDEO_FALLBACK_PRICE, SIM_VIDEO_PRICING } from "./catalog-video.js";
import { type ApiContext, baseHeaders, resolveModel, sendApiError, sendApiJson } from "./context.js";
import { detailedError, type Issue, isRecord, type Json, sendJson, typeIssue } from "./http-util.js";
import { chargePrepaid, modelOfType } from "./media-admission.js";
import type { SimVideoModel } from "./models.js";
import { microToNumber } from "./money.js";
import type { SimState } from "./state.js";
import type { SimVideoJob, SimVideoOutcome } from "./video-jobs.js";

/**
 * Prepaid video routes: `POST /video/quote|queue|retrieve|complete` (§6), and the unauthenticated
 * download behind a private model's `download_url`. The quote is debited at queue.
 */

/** An `ftyp` box: enough for clients that sniff the container. */
export const SIM_MP4_BYTES = Buffer.from("000000186674797069736f6d0000020069736f6d69736f32", "hex");

function durationSeconds(duration: string, autoSeconds: number): number {
  const match = /^(\d+)\s*s$/i.exec(duration.trim());
  return match ? Number(match[1]) : autoSeconds;
}

/** The length the simulator gives each reference video a job fetches (`reference_video_urls`). */
export const SIM_REFERENCE_CLIP_SECONDS = 10;
/** The most reference video a job takes in all, seconds (the reference: "max 150s"). */
export const SIM_REFERENCE_TOTAL_MAX_SECONDS = 150;

/** The reference video a queued job fetched, seconds: each clip SIM_REFERENCE_CLIP_SECONDS, capped. */
export function referenceSecondsOf(body: Record<string, unknown>): number {
  const clips = Array.isArray(body.reference_video_urls) ? body.reference_video_urls.length : 0;
  return Math.min(SIM_REFERENCE_TOTAL_MAX_SECONDS, clips * SIM_REFERENCE_CLIP_SECONDS);
}

/**
 * Deterministic quote in micro-USD (= micro-DIEM): seconds × (rate[resolution] + audio rate when the
 * model makes audio and `audio` is not false), plus `referenceSeconds` × rate[resolution] for
 * reference videos (the reference's "input with video" tier: a quote names their total in
 * `reference_video_total_duration`; a queued job is charged for the clips it fetched). Rates:
 * SIM_VIDEO_PRICING.
 */
export function quoteVideoMicro(
  model: SimVideoModel,
  args: { duration: string; resolution?: string; audio?: boolean; referenceSeconds?: number },
): bigint {
  const price = SIM_VIDEO_PRICING[model.id] ?? SIM_VIDEO_FALLBACK_PRICE;
  const c = model.model_spec.constraints;
  const resolution = args.resolution ?? c.resolutions[0] ?? "default";
  const rate =
    price.perSecondMicro[resolution] ?? price.perSecondMicro.default ?? Object.values(price.perSecondMicro)[0] ?? 0n;
  const audio = c.audio && args.audio !== false ? price.audioPerSecondMicro : 0n;
  const references = BigInt(Math.ceil(args.referenceSeconds ?? 0)) * rate;
  return BigInt(durationSeconds(args.duration, price.autoSeconds)) * (rate + audio) + references;
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
  const stated = body.reference_video_total_duration;
  const quote = quoteVideoMicro(model, {
    duration: body.duration as string,
    resolution: body.resolution as string | undefined,
    audio: body.audio === false ? false : undefined,
    referenceSeconds: typeof stated === "number" && stated > 0 ? stated : undefined,
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
    referenceSeconds: referenceSecondsOf(body),
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
