import { decimal6, timestamp, uuid, z } from "./common.js";
import { modelId } from "./model-id.js";
import { parseWith, refusal, withRule } from "./parse.js";
import {
  type RequestControls,
  requestControlFields,
  requestControls,
  withoutControls,
  withPrimaryModel,
} from "./request-controls.js";

/**
 * SPEC "Inference" (Bearer only): the requests of chat, Responses, images and video, and their
 * answers. Each body is parsed once, here, into the typed request the domain takes
 * (`parseChatRequest`, `parseResponsesRequest`, `parseImageRequest`, `parseOpenAiImageRequest`,
 * `parseVideoRequest`): every rule that needs no database row lives in these schemas — the model
 * id, `stream`, `n`, the token caps, THE paid add-on refusal (SPEC 12), the image fields — with the
 * message and the field of its 400. Rules that need the catalog row or a price (image tiers, video
 * constraints, admission) are the domain's (src/domain/inference). The `…Body` objects are what
 * /openapi.json documents and the MCP tools list; the parses add the refusals no client sends on
 * purpose (paid add-ons, `return_binary`), in the order a 400 names them (the first issue speaks).
 */

export type Json = Record<string, unknown>;

/** The largest `max_tokens` a request may ask for (a number beyond it is a 400, not a reservation). */
export const MAX_REQUESTED_TOKENS = 10_000_000;
/** Images per image request (`variants` / `n`). */
export const MAX_IMAGE_VARIANTS = 4;
/** The upstream's own default output format on the native image route, stated by the service (SPEC: WebP). */
const DEFAULT_IMAGE_FORMAT = "webp";

export { modelId };

const streamFlag = z
  .boolean({ invalid_type_error: "stream must be a boolean." })
  .optional()
  .openapi({ description: "true: SSE (text/event-stream); omitted or false: buffered JSON" });

/** An optional token cap (absent or null: none): an integer 1–MAX_REQUESTED_TOKENS. */
const tokenCap = (field: string) => {
  const message = `${field} must be an integer from 1 to ${MAX_REQUESTED_TOKENS}.`;
  return z
    .number({ invalid_type_error: message })
    .int({ message })
    .min(1, { message })
    .max(MAX_REQUESTED_TOKENS, { message })
    .nullable()
    .optional();
};

// ---- THE paid add-on refusal (SPEC 12): anything that bills beyond published pricing ----------

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A paid add-on switch counts as on unless absent, null, false or "off" (text and image routes alike). */
function switchedOn(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false && v !== "off";
}

/** Tool types that bill beyond published pricing. */
const PAID_TOOL = /^(web_search|web_search_preview|x_search)(_|$)/;

/** A paid add-on switch: absent, null, false and "off" are off; any other value is the 400 `message`. */
const offSwitch = (message: string) => withRule(z.unknown(), (v) => (switchedOn(v) ? message : undefined)).optional();

/**
 * The text routes' paid add-ons: the provider's web search, scraping and X search
 * (`venice_parameters.enable_*`), OpenAI's `web_search`, and paid tool types, each a 400 naming its
 * field. Not in the documented bodies (no client sends them expecting them to work), so their
 * rules are `withRule`s, which cost nothing when the field is not sent.
 */
export const paidAddOns = {
  venice_parameters: withRule(
    z.record(z.unknown(), { invalid_type_error: "venice_parameters must be an object." }),
    (vp) =>
      switchedOn(vp.enable_web_search) || switchedOn(vp.enable_web_scraping) || switchedOn(vp.enable_x_search)
        ? "Web search, scraping and X search are refused: they bill beyond published pricing."
        : undefined,
  )
    .nullable()
    .optional(),
  web_search: offSwitch("web_search is refused: it bills beyond published pricing."),
  tools: withRule(z.array(z.unknown(), { invalid_type_error: "tools must be an array." }), (tools) => {
    for (const t of tools) {
      if (isObject(t) && typeof t.type === "string" && PAID_TOOL.test(t.type)) {
        return `The ${t.type} tool is refused: it bills beyond published pricing.`;
      }
    }
    return undefined;
  })
    .nullable()
    .optional(),
};

/**
 * Fields the upstream documents that change what it bills in a way the service does not price, each a
 * 400 naming it (nothing held): `fallbacks` (on failure the upstream answers from another model,
 * billed at that model's rates, while the settlement prices the requested one). Absent, null or an
 * empty list asks for nothing. Other fields the upstream does not document are dropped, not refused
 * (docs/decisions.md "Venice as documented: what goes upstream").
 */
export const unpricedFields = {
  fallbacks: withRule(z.unknown(), (v) =>
    v === undefined || v === null || (Array.isArray(v) && v.length === 0)
      ? undefined
      : "fallbacks is refused: the upstream bills a fallback model at that model's rates, which this service does not price.",
  ).optional(),
};

const SVC_CEILING_MESSAGE = "svc.maxPriceCentsPerDollar must be an integer from 30 to 80.";

/**
 * The service's own body object (`svc`, SPEC naming conventions), on every inference route: options
 * for this service, never forwarded upstream. `maxPriceCentsPerDollar` (30-80) is the request's own
 * ceiling: it can only lower the effective one (the lowest of the account's, the key's and this).
 */
export const svcOptions = z
  .object(
    {
      maxPriceCentsPerDollar: z
        .number({ invalid_type_error: SVC_CEILING_MESSAGE })
        .int({ message: SVC_CEILING_MESSAGE })
        .min(30, { message: SVC_CEILING_MESSAGE })
        .max(80, { message: SVC_CEILING_MESSAGE })
        .optional()
        .openapi({ description: "this request's ceiling (30-80); only lowers the account's and the key's" }),
    },
    { invalid_type_error: "svc must be an object." },
  )
  .strict("svc takes only maxPriceCentsPerDollar.")
  .optional()
  .openapi({ description: "the service's own options; never forwarded upstream" });

/** The body without `svc` (what goes upstream), and the request's own ceiling from it. */
function ownOptions(raw: unknown, svc: z.infer<typeof svcOptions>): { body: Json; maxPriceCents: number | undefined } {
  const body = raw as Json;
  if (!("svc" in body)) return { body, maxPriceCents: undefined };
  const { svc: _svc, ...rest } = body;
  return { body: rest, maxPriceCents: svc?.maxPriceCentsPerDollar };
}

// ---- typed requests ------------------------------------------------------------------------------

/** What every parsed inference request carries. */
export interface ModalityRequest {
  /** the buyer's body as sent, checked by the contract (forwarded fields come from it) */
  body: Json;
  /** the model as the buyer sent it */
  model: string;
  stream: boolean;
  /** the request's own ceiling (`svc.maxPriceCentsPerDollar`); it only lowers the effective one */
  maxPriceCents: number | undefined;
  /**
   * OpenRouter's request controls (`models`, `provider.max_price`; request-controls.ts), on the
   * routes that parse them; absent: none sent (or a route that does not take them)
   */
  controls?: RequestControls | undefined;
}

/**
 * A text route's own fields: the body without `svc` and the request controls (what goes upstream),
 * the request's own ceiling and its controls.
 */
function textOptions(
  raw: unknown,
  b: z.infer<z.ZodObject<typeof requestControlFields>> & { model: string; svc?: z.infer<typeof svcOptions> },
): { body: Json; maxPriceCents: number | undefined; controls?: RequestControls } {
  const own = ownOptions(raw, b.svc);
  const controls = requestControls(b);
  return { ...own, body: withoutControls(own.body), ...(controls ? { controls } : {}) };
}

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
export type ChatMessage = z.infer<typeof chatMessage>;

const CHAT_BODY_MESSAGE = "Body must be a JSON object with model and messages.";
const chatBodyErrors = { required_error: CHAT_BODY_MESSAGE, invalid_type_error: CHAT_BODY_MESSAGE };

/** The chat fields in the order a 400 names them: the paid add-ons come before the token caps. */
const chatHead = {
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
};
const chatCaps = {
  max_completion_tokens: tokenCap("max_completion_tokens"),
  max_tokens: tokenCap("max_tokens"),
  svc: svcOptions,
  ...requestControlFields,
};

/**
 * `POST /v1/chat/completions`: OpenAI's body; the other fields the upstream documents go to it, the
 * ones it does not are dropped.
 */
export const chatCompletionBody = z
  .object({ ...chatHead, ...chatCaps }, chatBodyErrors)
  .passthrough()
  .openapi("ChatCompletionRequest", {
    description:
      "OpenAI chat completion request. Paid add-ons (web search, scraping, X search, paid tools) and `fallbacks` are refused with 400; fields the upstream does not document are dropped.",
  });
export type ChatCompletionBody = z.infer<typeof chatCompletionBody>;

const chatRequestBody = z
  .object({ ...chatHead, ...paidAddOns, ...unpricedFields, ...chatCaps }, chatBodyErrors)
  .passthrough();

/** A parsed chat body and what the pipeline needs of it. */
export interface ChatRequest extends ModalityRequest {
  /** `max_completion_tokens`, else `max_tokens` */
  maxTokens: number | undefined;
  messages: ChatMessage[];
}

/** `POST /v1/chat/completions` (SPEC "Inference"): the typed request, or the 400 naming the field. */
export function parseChatRequest(raw: unknown): ChatRequest {
  const b = parseWith(chatRequestBody, withPrimaryModel(raw));
  return {
    ...textOptions(raw, b),
    model: b.model,
    stream: b.stream === true,
    maxTokens: b.max_completion_tokens ?? b.max_tokens ?? undefined,
    messages: b.messages,
  };
}

const INPUT_MESSAGE = "input is required (a string or an array of input items).";
const INPUT_ITEMS_MESSAGE = "input must be a string or a non-empty array of input items.";
const RESPONSES_BODY_MESSAGE = "Body must be a JSON object with model and input.";
const responsesBodyErrors = { required_error: RESPONSES_BODY_MESSAGE, invalid_type_error: RESPONSES_BODY_MESSAGE };

const responsesFields = {
  model: modelId,
  input: z.union(
    [
      z.string().min(1, { message: "input must not be empty." }),
      z
        .array(z.unknown())
        .min(1, { message: INPUT_ITEMS_MESSAGE })
        .refine((items) => items.every(isObject), { message: INPUT_ITEMS_MESSAGE })
        .openapi({ items: { type: "object" } }),
    ],
    { errorMap: () => ({ message: INPUT_MESSAGE }) },
  ),
  instructions: z.string({ invalid_type_error: "instructions must be a string." }).nullable().optional(),
  stream: streamFlag,
  max_output_tokens: tokenCap("max_output_tokens"),
  svc: svcOptions,
  ...requestControlFields,
};

/** `POST /v1/responses`: the stateless Responses facade (`store`/`previous_response_id` are not kept). */
export const responsesBody = z.object(responsesFields, responsesBodyErrors).passthrough().openapi("ResponsesRequest", {
  description:
    "OpenAI Responses request, stateless: `instructions` goes upstream as a leading system message; paid add-ons and `fallbacks` are refused with 400; fields the upstream does not document (`store`, `previous_response_id`, `metadata`, …) are dropped.",
});

const responsesRequestBody = z
  .object({ ...responsesFields, ...paidAddOns, ...unpricedFields }, responsesBodyErrors)
  .passthrough();

export interface ResponsesRequest extends ModalityRequest {
  maxTokens: number | undefined;
  input: string | unknown[];
  instructions: string | undefined;
}

/** `POST /v1/responses` (SPEC "Inference"): the typed request, or the 400 naming the field. */
export function parseResponsesRequest(raw: unknown): ResponsesRequest {
  const b = parseWith(responsesRequestBody, withPrimaryModel(raw));
  return {
    ...textOptions(raw, b),
    model: b.model,
    stream: b.stream === true,
    maxTokens: b.max_output_tokens ?? undefined,
    input: b.input,
    instructions: b.instructions ?? undefined,
  };
}

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
 * outright (web search, streaming, binary answers) and `variants` and `n` with different values,
 * then the priced fields.
 */
const imageRequestBody = z
  .object(
    {
      model: modelId,
      prompt,
      enable_web_search: offSwitch("enable_web_search is refused: it bills beyond published pricing."),
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
}

/** `POST /v1/video/quote` and `/v1/video/queue`: the typed request, or the 400 naming the field. */
export function parseVideoRequest(raw: unknown): VideoRequest {
  const b = parseWith(videoBody, raw);
  const own = ownOptions(raw, b.svc);
  return { body: own.body as VideoBody, model: b.model, maxPriceCents: own.maxPriceCents };
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

// ---- responses -------------------------------------------------------------------------------

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
