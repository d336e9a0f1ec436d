import { decimal6, timestamp, uuid, z } from "./common.js";

/**
 * SPEC "Inference" (Bearer only): the transport shapes of chat, Responses, images and video.
 * These schemas check only the shape every request must have, with the messages the domain uses
 * (src/domain/inference/*-request.ts, chat.ts, image.ts), and pass every other field through: the
 * domain keeps the rules that need the catalog row or the price (paid add-ons, `n`, constraints,
 * image tiers), so a route answers exactly as before.
 */

const MODEL_MESSAGE = "model is required (a live id from /v1/models).";

/** A live model id from the catalog, optionally `svc/`-prefixed; `model:option` suffixes are refused. */
export const modelId = z
  .string({ required_error: MODEL_MESSAGE, invalid_type_error: MODEL_MESSAGE })
  .min(1, { message: MODEL_MESSAGE })
  .max(200, { message: MODEL_MESSAGE })
  .refine((m) => !m.includes(":"), { message: "model suffixes (`model:option=…`) are not accepted." })
  .openapi({ description: "a live id from GET /v1/models, optionally `svc/`-prefixed", example: "qwen3-4b" });

const streamFlag = z
  .boolean({ invalid_type_error: "stream must be a boolean." })
  .optional()
  .openapi({ description: "true: SSE (text/event-stream); omitted or false: buffered JSON" });

/** An optional positive integer token cap (null counts as absent). */
const tokenCap = (field: string) =>
  z
    .number({ invalid_type_error: `${field} must be a positive integer.` })
    .int({ message: `${field} must be a positive integer.` })
    .min(1, { message: `${field} must be a positive integer.` })
    .nullable()
    .optional();

/** One OpenAI chat message (`content` a string, an array of content parts, or null). */
export const chatMessage = z
  .object({
    role: z
      .string({ required_error: "is required", invalid_type_error: "must be a string" })
      .openapi({ enum: ["system", "developer", "user", "assistant", "tool"], example: "user" }),
    content: z
      .union([z.string(), z.array(z.record(z.unknown())), z.null()])
      .optional()
      .openapi({ example: "Say hello." }),
    name: z.string().optional(),
    tool_calls: z.array(z.record(z.unknown())).optional(),
    tool_call_id: z.string().optional(),
  })
  .passthrough()
  .openapi("ChatMessage");

/** `POST /v1/chat/completions`: OpenAI's body; other OpenAI fields pass through to the upstream. */
export const chatCompletionBody = z
  .object(
    {
      model: modelId,
      messages: z
        .array(chatMessage, {
          required_error: "messages must be a non-empty array.",
          invalid_type_error: "messages must be a non-empty array.",
        })
        .min(1, { message: "messages must be a non-empty array." }),
      stream: streamFlag,
      n: z
        .literal(1, { errorMap: () => ({ message: "n must be 1 (one choice per request)." }) })
        .optional()
        .openapi({ description: "one choice per request" }),
      max_completion_tokens: tokenCap("max_completion_tokens"),
      max_tokens: tokenCap("max_tokens"),
    },
    {
      required_error: "Body must be a JSON object with model and messages.",
      invalid_type_error: "Body must be a JSON object with model and messages.",
    },
  )
  .passthrough()
  .openapi("ChatCompletionRequest", {
    description:
      "OpenAI chat completion request. Paid add-ons (web search, scraping, X search, paid tools) are refused with 400.",
  });
export type ChatCompletionBody = z.infer<typeof chatCompletionBody>;

const INPUT_MESSAGE = "input is required (a string or an array of input items).";
const INPUT_ITEMS_MESSAGE = "input must be a string or a non-empty array of input items.";

/** `POST /v1/responses`: the stateless Responses facade (`store`/`previous_response_id` are not kept). */
export const responsesBody = z
  .object(
    {
      model: modelId,
      input: z.union(
        [
          z.string().min(1, { message: "input must not be empty." }),
          z
            .array(z.unknown())
            .min(1, { message: INPUT_ITEMS_MESSAGE })
            .refine((items) => items.every((i) => typeof i === "object" && i !== null && !Array.isArray(i)), {
              message: INPUT_ITEMS_MESSAGE,
            })
            .openapi({ items: { type: "object" } }),
        ],
        { errorMap: () => ({ message: INPUT_MESSAGE }) },
      ),
      instructions: z.string({ invalid_type_error: "instructions must be a string." }).nullable().optional(),
      stream: streamFlag,
      max_output_tokens: tokenCap("max_output_tokens"),
    },
    {
      required_error: "Body must be a JSON object with model and input.",
      invalid_type_error: "Body must be a JSON object with model and input.",
    },
  )
  .passthrough()
  .openapi("ResponsesRequest");

const nonEmptyString = (field: string) =>
  z
    .string({ invalid_type_error: `${field} must be a non-empty string.` })
    .min(1, { message: `${field} must be a non-empty string.` });

const PROMPT_MESSAGE = "prompt must be a non-empty string.";
const prompt = z
  .string({ required_error: PROMPT_MESSAGE, invalid_type_error: PROMPT_MESSAGE })
  .refine((p) => p.trim().length > 0, { message: PROMPT_MESSAGE });

const variants = (field: string) =>
  z
    .number({ invalid_type_error: `${field} must be an integer 1-4.` })
    .int({ message: `${field} must be an integer 1-4.` })
    .min(1, { message: `${field} must be an integer 1-4.` })
    .max(4, { message: `${field} must be an integer 1-4.` })
    .nullable()
    .optional();

/** `POST /v1/image/generate`: the upstream's native body; `resolution`, `quality`, `variants`/`n` are priced. */
export const imageGenerateBody = z
  .object(
    {
      model: modelId,
      prompt,
      variants: variants("variants"),
      n: variants("n"),
      resolution: nonEmptyString("resolution").nullable().optional(),
      quality: nonEmptyString("quality").nullable().optional(),
      hide_watermark: z.boolean().optional().openapi({ description: "true removes the watermark at no extra cost" }),
      format: z.string().optional().openapi({ description: "output format (default webp)", example: "webp" }),
    },
    {
      required_error: "Body must be a JSON object with model and prompt.",
      invalid_type_error: "Body must be a JSON object with model and prompt.",
    },
  )
  .passthrough()
  .openapi("ImageGenerateRequest", { description: "`enable_web_search` is refused; other fields go upstream." });

/** `POST /v1/images/generations`: OpenAI's image body, translated onto the native one. */
export const openAiImageBody = z
  .object(
    {
      model: modelId,
      prompt,
      n: variants("n"),
      size: z.string().optional().openapi({ example: "1024x1024" }),
      output_format: z
        .string()
        .optional()
        .openapi({ enum: ["png", "jpeg", "webp"] }),
      response_format: z
        .string()
        .optional()
        .openapi({ enum: ["b64_json", "url"] }),
      moderation: z
        .string()
        .optional()
        .openapi({ enum: ["auto", "low"] }),
      quality: z.string({ invalid_type_error: "quality must be a string." }).nullable().optional(),
    },
    {
      required_error: "Body must be a JSON object with model and prompt.",
      invalid_type_error: "Body must be a JSON object with model and prompt.",
    },
  )
  .passthrough()
  .openapi("OpenAiImageRequest");

/**
 * `POST /v1/video/quote` and `POST /v1/video/queue` (the same body). Which fields a model takes is in
 * its catalog row's `constraints` (a missing key means the field must not be sent); the row is checked
 * before the upstream is asked. Model-specific fields pass through.
 */
export const videoBody = z
  .object(
    {
      model: modelId,
      prompt: z
        .string({ invalid_type_error: PROMPT_MESSAGE })
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
    },
    {
      required_error: "Body must be a JSON object with model and duration.",
      invalid_type_error: "Body must be a JSON object with model and duration.",
    },
  )
  .passthrough()
  .openapi("VideoRequest");
export type VideoBody = z.infer<typeof videoBody>;

const QUEUE_ID_MESSAGE = "queue_id (the id POST /v1/video/queue returned) is required.";

/** `POST /v1/video/retrieve` and `POST /v1/video/complete`: `{queue_id}`. */
export const videoRetrieveBody = z
  .object(
    {
      queue_id: z
        .string({ required_error: QUEUE_ID_MESSAGE, invalid_type_error: QUEUE_ID_MESSAGE })
        .min(1, { message: QUEUE_ID_MESSAGE })
        .max(100, { message: QUEUE_ID_MESSAGE }),
    },
    {
      required_error: "Body must be a JSON object with queue_id.",
      invalid_type_error: "Body must be a JSON object with queue_id.",
    },
  )
  .openapi("VideoJobRef");

// ---- responses -------------------------------------------------------------------------------

const usage = z
  .object({
    prompt_tokens: z.number().int(),
    completion_tokens: z.number().int(),
    total_tokens: z.number().int(),
  })
  .passthrough();

/** A buffered chat completion (OpenAI's object, relayed with the upstream's fields). */
export const chatCompletionResponse = z
  .object({
    id: z.string(),
    object: z.literal("chat.completion"),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: z.number().int(),
          message: z.object({ role: z.string(), content: z.string().nullable() }).passthrough(),
          finish_reason: z.string().nullable(),
        })
        .passthrough(),
    ),
    usage: usage.optional(),
  })
  .passthrough()
  .openapi("ChatCompletion");
export type ChatCompletionResponse = z.infer<typeof chatCompletionResponse>;

/** A buffered Responses object. */
export const responsesResponse = z
  .object({
    id: z.string(),
    object: z.literal("response"),
    status: z.string(),
    model: z.string(),
    output: z.array(z.record(z.unknown())),
    usage: z
      .object({ input_tokens: z.number().int(), output_tokens: z.number().int(), total_tokens: z.number().int() })
      .passthrough()
      .optional(),
  })
  .passthrough()
  .openapi("Response");

/** `POST /v1/image/generate` 200: base64 images, one per variant (no URLs). */
export const imageGenerateResponse = z
  .object({
    id: z.string(),
    images: z.array(z.string()).openapi({ description: "base64 image data, one per variant" }),
    request: z.record(z.unknown()).optional().openapi({ description: "echo of the request" }),
    timing: z.record(z.unknown()).optional(),
  })
  .passthrough()
  .openapi("ImageResult");

/** `POST /v1/images/generations` 200 (OpenAI's shape). */
export const openAiImageResponse = z
  .object({
    created: z.number().int(),
    data: z.array(z.object({ b64_json: z.string().optional(), url: z.string().optional() }).passthrough()),
  })
  .passthrough()
  .openapi("OpenAiImageResult");

/** `POST /v1/video/quote` 200: no charge, no job, no support reference. */
export const videoQuoteResponse = z
  .object({
    model: z.string(),
    quote_diem: decimal6,
    estimated_usdc: decimal6,
    max_price_cents: z.number().int(),
    max_eligible_offer_diem: decimal6.openapi({ description: "largest single eligible offer at or below the ceiling" }),
    eligible_routable_diem: decimal6,
    clears_now: z.boolean().openapi({ description: "quote_diem fits within max_eligible_offer_diem" }),
    svc: z.object({
      cost_usdc: decimal6,
      clearing_price_cents: z.number().int().nullable(),
      upstream_quote_diem: decimal6,
      markup_bps: z.number().int(),
    }),
  })
  .openapi("VideoQuote");
export type VideoQuoteResponse = z.infer<typeof videoQuoteResponse>;

/** `POST /v1/video/queue` 200: settled up front. */
export const videoQueueResponse = z
  .object({
    queue_id: z.string(),
    model: z.string(),
    svc: z.object({
      cost_usdc: decimal6,
      clearing_price_cents: z.number().int(),
      quote_diem: decimal6,
      upstream_quote_diem: decimal6,
      balance_remaining_usdc: decimal6,
      support_reference: uuid,
      request_id: uuid,
    }),
  })
  .openapi("VideoQueued");

/** `POST /v1/video/retrieve` 200 JSON while rendering (or a terminal status); the mp4 is the other 200. */
export const videoStatusResponse = z
  .object({
    queue_id: z.string(),
    model: z.string(),
    state: z.string().openapi({ description: "the job's state here" }),
    status: z.string().openapi({ description: "the upstream's status as it said it: PROCESSING, COMPLETED, failed…" }),
    upstream_status: z.string().nullable().optional(),
    average_execution_time: z.number().nullable().optional(),
    execution_duration: z.number().nullable().optional(),
    refunded: z.boolean().optional(),
    reason: z.string().nullable().optional(),
    refunded_usdc: decimal6.optional(),
    media: z.boolean().optional(),
    refund_due_at: timestamp.nullable().optional(),
    message: z.string().optional(),
  })
  .openapi("VideoStatus");

export const videoCompleteResponse = z
  .object({ success: z.boolean(), queue_id: z.string(), state: z.string() })
  .openapi("VideoCompleted");

/** The SSE `svc.cost` frame (chat streams), after the usage chunk and before `[DONE]`. */
export const costFrame = z
  .object({
    object: z.literal("svc.cost"),
    choices: z.array(z.never()).length(0),
    costUsdc: decimal6,
    clearingPriceCents: z.number().int(),
    supportReference: uuid,
  })
  .openapi("CostFrame");
