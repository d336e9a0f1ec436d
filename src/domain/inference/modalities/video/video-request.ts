import type { Json, VideoRequest } from "../../../../contract/inference.js";
import { DomainError } from "../../../../lib/errors.js";

/**
 * A video request (quote and queue take the same body, SPEC "Video"): its shape is the contract's
 * (`parseVideoRequest`, src/contract/inference.ts); here it is checked against the catalog row's
 * published `constraints` before anything is asked of the upstream, so a job the upstream would
 * refuse is a 400 naming the field here, never a charge. Field names beyond these are
 * model-specific and forwarded unchanged (VENICE_API §6).
 */

export type { VideoRequest };

/** VENICE_API §2: a row without `prompt_character_limit` takes prompts up to this many characters. */
export const DEFAULT_VIDEO_PROMPT_LIMIT = 2500;

export type VideoModelType = "text-to-video" | "image-to-video" | "reference-to-video" | "video-to-video";

function bad(field: string, message: string): DomainError {
  return new DomainError("invalid_request", message, { field });
}

function stringList(constraints: Json, key: string): string[] | null {
  const v = constraints[key];
  return Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as string[]) : null;
}

/** A field the row publishes as a list: one of it; a row with no (or an empty) list takes none. */
function oneOf(body: VideoRequest["body"], constraints: Json, field: string, key: string, model: string): void {
  const v = body[field];
  if (v === undefined) return;
  const allowed = stringList(constraints, key) ?? [];
  if (allowed.length === 0) throw bad(field, `${model} takes no ${field}.`);
  if (typeof v !== "string" || !allowed.includes(v)) {
    throw bad(field, `${field} must be one of ${allowed.join(", ")} for ${model}.`);
  }
}

function url(body: VideoRequest["body"], field: "image_url" | "video_url", why: string): void {
  const v = body[field];
  if (typeof v !== "string" || !/^(https?:\/\/|data:)/.test(v)) {
    throw bad(field, `${field} (an http(s) or data: URL) is required ${why}.`);
  }
}

/**
 * The request against the row's constraints (SPEC "Catalog" constraints; VENICE_API §2):
 * `duration` one of `durations` (required); `resolution` / `aspect_ratio` one of theirs, and not
 * sent where the row lists none; `audio` a boolean, `true` only where the row renders audio and
 * `false` only where it is `audio_configurable`; the prompt within the row's limit; and the media each
 * `model_type` needs (`image_url`; `reference_image_urls`; `video_url`).
 */
export function checkVideoRequest(req: VideoRequest, row: { id: string; constraints: Json | null }): void {
  const body = req.body;
  const c = row.constraints ?? {};
  const modelType = c.model_type as VideoModelType | undefined;

  const limit = typeof c.prompt_character_limit === "number" ? c.prompt_character_limit : DEFAULT_VIDEO_PROMPT_LIMIT;
  const prompt = body.prompt;
  if (prompt === undefined && modelType !== "video-to-video") throw bad("prompt", "prompt is required.");
  if (prompt !== undefined && prompt.length > limit) {
    throw bad("prompt", `prompt must be at most ${limit} characters for ${row.id}.`);
  }

  const durations = stringList(c, "durations") ?? [];
  if (body.duration === undefined || !durations.includes(body.duration)) {
    throw bad("duration", `duration is required: one of ${durations.join(", ")} for ${row.id}.`);
  }
  oneOf(body, c, "resolution", "resolutions", row.id);
  oneOf(body, c, "aspect_ratio", "aspect_ratios", row.id);

  if (body.audio === true && c.audio !== true) throw bad("audio", `${row.id} cannot render audio.`);
  if (body.audio === false && c.audio_configurable !== true) {
    throw bad("audio", `${row.id} always renders its audio; audio: false is not accepted.`);
  }

  if (modelType === "image-to-video") url(body, "image_url", `for ${row.id} (image-to-video)`);
  if (modelType === "video-to-video") url(body, "video_url", `for ${row.id} (video-to-video)`);
  if (modelType === "reference-to-video") {
    const refs = body.reference_image_urls;
    if (refs === undefined || refs.length === 0) {
      throw bad("reference_image_urls", `reference_image_urls (a non-empty list of URLs) is required for ${row.id}.`);
    }
  }
}
