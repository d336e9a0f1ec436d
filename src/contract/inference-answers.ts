import { decimal6, timestamp, uuid, z } from "./common.js";

/** The inference routes' answers (their 200 bodies) and the SSE cost frame. */

/** The charged amount in `usage` (OpenRouter's `usage.cost`), on buffered bodies and streamed usage. */
const usageCost = {
  cost: z.number().openapi({
    description: "USD charged for this request (the figure of X-Svc-Cost-Usdc, as a JSON number)",
    example: 0.000019,
  }),
  cost_details: z
    .object({
      cost_usdc: decimal6.openapi({ description: "the charged amount, exact (six decimals)" }),
      clearing_price_cents: z.number().int().openapi({ description: "the clearing offer's price, cents per DIEM" }),
      upstream_burn_diem: decimal6.openapi({ description: "the DIEM the request burned upstream (six decimals)" }),
      cached_tokens: z
        .number()
        .int()
        .openapi({ description: "prompt tokens read from the provider's cache, priced at the model's cache rate" }),
      cache_write_tokens: z.number().int().openapi({
        description: "prompt tokens written to the provider's cache, priced at the model's cache-write rate",
      }),
    })
    .openapi("CostDetails"),
};

const usage = z
  .object({
    prompt_tokens: z.number().int(),
    completion_tokens: z.number().int(),
    total_tokens: z.number().int(),
    ...usageCost,
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
      .object({
        input_tokens: z.number().int(),
        output_tokens: z.number().int(),
        total_tokens: z.number().int(),
        ...usageCost,
      })
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
