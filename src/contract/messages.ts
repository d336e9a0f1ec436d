import { z } from "./common.js";
import { MAX_REQUESTED_TOKENS, type ModalityRequest, modelId, svcOptions } from "./inference.js";
import {
  type AnthropicMessage,
  type AnthropicTool,
  type AnthropicToolChoice,
  anthropicMessage,
  anthropicTool,
  MESSAGES_MESSAGE,
  system,
  type textBlock,
  toolChoice,
  toolsRefusal,
} from "./messages-blocks.js";
import { parseWith, refusal } from "./parse.js";
import { requestControlFields, requestControls, withoutControls, withPrimaryModel } from "./request-controls.js";

/**
 * Anthropic's Messages API (`POST /v1/messages`, `POST /v1/messages/count_tokens`; docs/decisions.md
 * "Anthropic Messages API"): the request as Anthropic documents it, parsed once into the typed
 * request the domain translates onto the upstream's chat completions (src/domain/inference/
 * modalities/messages/messages-translate.ts), the answer's and the error's shapes (for /openapi.json), and THE mapping
 * of the service's statuses onto Anthropic's error types. Fields Anthropic documents and the
 * service cannot use (`metadata`, `cache_control`, `container`, `mcp_servers`, `service_tier`…) are
 * accepted and not forwarded; unknown fields are ignored, as Anthropic's API does.
 *
 * The request's parts (content blocks, tools) are messages-blocks.ts, the answers and the error
 * mapping messages-answers.ts; this file assembles the request and re-exports both.
 */

type Json = Record<string, unknown>;

/** The upstream takes at most this many stop sequences (its `stop`). */
export const MAX_STOP_SEQUENCES = 4;

const unitInterval = (field: string) => {
  const message = `${field} must be a number from 0 to 1.`;
  return z.number({ invalid_type_error: message }).min(0, { message }).max(1, { message }).optional();
};

const MAX_TOKENS_MESSAGE = `max_tokens is required: an integer from 1 to ${MAX_REQUESTED_TOKENS}.`;
const STOP_MESSAGE = `stop_sequences must be an array of at most ${MAX_STOP_SEQUENCES} non-empty strings (the upstream's limit).`;

const BODY_MESSAGE = "Body must be a JSON object with model, max_tokens and messages.";
const bodyErrors = { required_error: BODY_MESSAGE, invalid_type_error: BODY_MESSAGE };

/** The fields both routes read (count_tokens takes no `max_tokens`). */
const promptFields = {
  model: modelId,
  messages: z
    .array(anthropicMessage, { required_error: MESSAGES_MESSAGE, invalid_type_error: MESSAGES_MESSAGE })
    .min(1, { message: MESSAGES_MESSAGE }),
  system,
  // the server-tool refusal first: a web_search tool is refused for what it is, not for its missing input_schema
  tools: z
    .array(z.unknown(), { invalid_type_error: "tools must be an array." })
    .superRefine((tools, ctx) => {
      const message = toolsRefusal(tools);
      if (message) ctx.addIssue({ code: "custom", ...refusal(message) });
    })
    .pipe(z.array(anthropicTool))
    .optional()
    .openapi({
      type: "array",
      items: { $ref: "#/components/schemas/AnthropicTool" },
      description: "custom tools (name, description, input_schema); server tools such as web search are refused",
    }),
  tool_choice: toolChoice,
};

const generationFields = {
  max_tokens: z
    .number({ required_error: MAX_TOKENS_MESSAGE, invalid_type_error: MAX_TOKENS_MESSAGE })
    .int({ message: MAX_TOKENS_MESSAGE })
    .min(1, { message: MAX_TOKENS_MESSAGE })
    .max(MAX_REQUESTED_TOKENS, { message: MAX_TOKENS_MESSAGE }),
  stop_sequences: z
    .array(z.string().min(1), { invalid_type_error: STOP_MESSAGE })
    .max(MAX_STOP_SEQUENCES, { message: STOP_MESSAGE })
    .optional()
    .openapi({ description: `at most ${MAX_STOP_SEQUENCES} (the upstream's limit)` }),
  temperature: unitInterval("temperature"),
  top_p: unitInterval("top_p"),
  top_k: z
    .number({ invalid_type_error: "top_k must be a non-negative integer." })
    .int({ message: "top_k must be a non-negative integer." })
    .min(0, { message: "top_k must be a non-negative integer." })
    .optional(),
  metadata: z.record(z.unknown()).nullable().optional().openapi({ description: "accepted, not forwarded" }),
  thinking: z.object({ type: z.string() }).passthrough().nullable().optional().openapi({
    description:
      "`enabled` or `adaptive` (without `display: omitted`): the model's reasoning comes back as thinking blocks; not forwarded",
  }),
  stream: z
    .boolean({ invalid_type_error: "stream must be a boolean." })
    .optional()
    .openapi({ description: "true: Anthropic's SSE events; omitted or false: one JSON message" }),
  svc: svcOptions,
  // OpenRouter's request controls (`models`, `provider.max_price`, `usage`), as on chat
  ...requestControlFields,
};

/** `POST /v1/messages`: Anthropic's Messages request (unknown fields are ignored). */
export const messagesBody = z
  .object({ ...promptFields, ...generationFields }, bodyErrors)
  .passthrough()
  .openapi("AnthropicMessagesRequest", {
    description:
      "Anthropic's Messages request, translated onto the upstream's chat completions. Unknown fields are ignored; server tools (web search…) are refused.",
  });

/** `POST /v1/messages/count_tokens`: the same prompt fields, no `max_tokens`. */
export const countTokensBody = z
  .object(promptFields, {
    required_error: "Body must be a JSON object with model and messages.",
    invalid_type_error: "Body must be a JSON object with model and messages.",
  })
  .passthrough()
  .openapi("AnthropicCountTokensRequest");

/** The prompt of a Messages request, as the domain translates it. */
export interface AnthropicPrompt {
  system: string | z.infer<typeof textBlock>[] | undefined;
  messages: AnthropicMessage[];
  tools: AnthropicTool[] | undefined;
  toolChoice: AnthropicToolChoice | undefined;
}

/** A parsed `POST /v1/messages` body. */
export interface MessagesRequest extends ModalityRequest, AnthropicPrompt {
  maxTokens: number;
  stopSequences: string[] | undefined;
  temperature: number | undefined;
  topP: number | undefined;
  topK: number | undefined;
  /** `thinking: {type: "enabled" | "adaptive"}` (not `display: "omitted"`): the model's reasoning is answered as thinking blocks */
  thinking: boolean;
}

/** `POST /v1/messages`: the typed request, or the 400 naming the field. */
export function parseMessagesRequest(raw: unknown): MessagesRequest {
  const b = parseWith(messagesBody, withPrimaryModel(raw));
  const { svc: _svc, ...body } = raw as Json;
  const controls = requestControls(b);
  return {
    body: withoutControls(body),
    ...(controls ? { controls } : {}),
    model: b.model,
    stream: b.stream === true,
    maxPriceCents: b.svc?.maxPriceCentsPerDollar,
    system: b.system,
    messages: b.messages,
    tools: b.tools,
    toolChoice: b.tool_choice,
    maxTokens: b.max_tokens,
    stopSequences: b.stop_sequences,
    temperature: b.temperature,
    topP: b.top_p,
    topK: b.top_k,
    thinking: (b.thinking?.type === "enabled" || b.thinking?.type === "adaptive") && b.thinking.display !== "omitted",
  };
}

/** `POST /v1/messages/count_tokens`: the model and the prompt, or the 400 naming the field. */
export function parseCountTokensRequest(raw: unknown): AnthropicPrompt & { model: string } {
  const b = parseWith(countTokensBody, raw);
  return { model: b.model, system: b.system, messages: b.messages, tools: b.tools, toolChoice: b.tool_choice };
}

export {
  anthropicErrorBody,
  anthropicErrorObject,
  anthropicErrorType,
  anthropicMessageResponse,
  anthropicUsage,
  countTokensResponse,
} from "./messages-answers.js";
export {
  type AnthropicContentBlock,
  type AnthropicMessage,
  type AnthropicTool,
  type AnthropicToolChoice,
  anthropicMessage,
  anthropicTool,
} from "./messages-blocks.js";
