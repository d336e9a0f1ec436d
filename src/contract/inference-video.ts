import { z } from "./common.js";
import { ownOptions, PROMPT_MESSAGE, svcOptions } from "./inference-options.js";
import { modelId } from "./model-id.js";
import { parseWith } from "./parse.js";

/**
 * `POST /v1/video/quote` and `POST /v1/video/queue` (the same body). Which fields a model takes is in
 * its catalog row's `constraints` (a missing key means the field must not be sent); the row is checked
 * before the upstream is asked. Model-specific fields the upstream documents pass through.
 */
export const videoBody = z
  .object(
    {
      model: modelId,
      prompt: z
        .string({ invalid_type_error: PROMPT_MESSAGE })
        .refine((p) => p.trim().length > 0, { message: PROMPT_MESSAGE })
        .optional()
        .openapi({ description: "required except for video-to-video models" }),
      duration: z
        .string({ invalid_type_error: "duration must be one of the row's constraints.durations." })
        .optional()
        .openapi({ description: "required: one of the row's `constraints.durations`", example: "5s" }),
      resolution: z.string().optional().openapi({ description: "one of `constraints.resolutions`, where listed" }),
      aspect_ratio: z.string().optional().openapi({ description: "one of `constraints.aspect_ratios`, where listed" }),
      audio: z.boolean({ invalid_type_error: "audio must be a boolean." }).optional(),
      image_url: z.string().optional().openapi({ description: "http(s) or data: URL; image-to-video models" }),
      reference_image_urls: z.array(z.string()).optional().openapi({ description: "reference-to-video models" }),
      video_url: z.string().optional().openapi({ description: "http(s) or data: URL; video-to-video models" }),
      svc: svcOptions,
    },
    {
      required_error: "Body must be a JSON object with model and duration.",
      invalid_type_error: "Body must be a JSON object with model and duration.",
    },
  )
  .passthrough()
  .openapi("VideoRequest", {
    description:
      "Fields the upstream documents for a video job go to it (others are dropped); its quote is asked with the pricing inputs only (model, duration, resolution, aspect_ratio, audio, …), never the prompt or image URLs.",
  });
export type VideoBody = z.infer<typeof videoBody>;

/** A video request (quote and queue): the shape here; the row's constraints are the domain's (`checkVideoRequest`). */
export interface VideoRequest {
  /** the body as sent, checked by the contract (forwarded upstream with the row's id as `model`) */
  body: VideoBody;
  /** the model as the buyer sent it */
  model: string;
  /** the request's own ceiling (`svc.maxPriceCentsPerDollar`); it only lowers the effective one */
  maxPriceCents: number | undefined;
  /** a video job is queued, never streamed (its media is retrieved later) */
  stream: false;
}

/** `POST /v1/video/quote` and `/v1/video/queue`: the typed request, or the 400 naming the field. */
export function parseVideoRequest(raw: unknown): VideoRequest {
  const b = parseWith(videoBody, raw);
  const own = ownOptions(raw, b.svc);
  return { body: own.body as VideoBody, model: b.model, maxPriceCents: own.maxPriceCents, stream: false };
}

/** The id `POST /v1/video/queue` returned (`field`: `queue_id` in REST bodies, `queueId` in GraphQL). */
export const queueIdField = (field: string) => {
  const message = `${field} (the id POST /v1/video/queue returned) is required.`;
  return z.string({ required_error: message, invalid_type_error: message }).min(1, { message }).max(100, { message });
};

/** `POST /v1/video/retrieve` and `POST /v1/video/complete`: `{queue_id}`. */
export const videoRetrieveBody = z
  .object(
    { queue_id: queueIdField("queue_id") },
    {
      required_error: "Body must be a JSON object with queue_id.",
      invalid_type_error: "Body must be a JSON object with queue_id.",
    },
  )
  .openapi("VideoJobRef");

/** `POST /v1/video/retrieve` and `/v1/video/complete`: the job's `queue_id`, or the 400 naming the field. */
export function parseVideoJobRef(raw: unknown): string {
  return parseWith(videoRetrieveBody, raw).queue_id;
}
