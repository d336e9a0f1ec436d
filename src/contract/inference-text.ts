import { z } from "./common.js";
import {
  isObject,
  type Json,
  type ModalityRequest,
  ownOptions,
  paidAddOns,
  streamFlag,
  svcOptions,
  tokenCap,
  unpricedFields,
} from "./inference-options.js";
import { modelId } from "./model-id.js";
import { parseWith } from "./parse.js";
import {
  type RequestControls,
  requestControlFields,
  requestControls,
  withoutControls,
  withPrimaryModel,
} from "./request-controls.js";

/** The text routes' requests: chat completions and the stateless Responses facade. */

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
