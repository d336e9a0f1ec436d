import { decimal6, errorCode, uuid, z } from "./common.js";
import { MAX_REQUESTED_TOKENS, type ModalityRequest, modelId, svcOptions } from "./inference.js";
import { parseWith, refusal } from "./parse.js";
import { requestControlFields, requestControls, withoutControls, withPrimaryModel } from "./request-controls.js";

/**
 * Anthropic's Messages API (`POST /v1/messages`, `POST /v1/messages/count_tokens`; docs/decisions.md
 * "Anthropic Messages API"): the request as Anthropic documents it, parsed once into the typed
 * request the domain translates onto the upstream's chat completions (src/domain/inference/
 * messages-translate.ts), the answer's and the error's shapes (for /openapi.json), and THE mapping
 * of the service's statuses onto Anthropic's error types. Fields Anthropic documents and the
 * service cannot use (`metadata`, `cache_control`, `container`, `mcp_servers`, `service_tier`…) are
 * accepted and not forwarded; unknown fields are ignored, as Anthropic's API does.
 */

type Json = Record<string, unknown>;

/** The upstream takes at most this many stop sequences (its `stop`). */
export const MAX_STOP_SEQUENCES = 4;

/** Anthropic's image media types (base64 sources). */
const IMAGE_MEDIA_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp"] as const;

/** The content block types this route translates (anything else is a 400 naming the block). */
const BLOCK_TYPES = "text, image, tool_use, tool_result, thinking, redacted_thinking";

const nonEmpty = (message: string) =>
  z.string({ required_error: message, invalid_type_error: message }).min(1, { message });

/**
 * A string or an array of `item`s. Not a zod union: a union that fails both ways reports only that
 * it failed, where this names the block and the field that is wrong (`messages.0.content.1.type`).
 */
function stringOr<T extends z.ZodTypeAny>(item: T, message: string, description: string) {
  const array = z.array(item);
  return z
    .unknown()
    .transform((v, ctx): string | z.output<T>[] => {
      if (typeof v === "string") return v;
      if (!Array.isArray(v)) {
        ctx.addIssue({ code: "custom", message });
        return z.NEVER;
      }
      const r = array.safeParse(v);
      if (r.success) return r.data;
      for (const issue of r.error.issues) ctx.addIssue(issue as z.IssueData);
      return z.NEVER;
    })
    .openapi({ anyOf: [{ type: "string" }, { type: "array", items: { type: "object" } }], description });
}

/** `cache_control` on a block, a tool or the system: accepted, not forwarded (the catalog prices no cache writes). */
const cacheControl = z.record(z.unknown()).nullable().optional();

const textBlock = z
  .object({
    type: z.literal("text"),
    text: z.string({ required_error: "text is required", invalid_type_error: "text must be a string" }),
    cache_control: cacheControl,
  })
  .passthrough()
  .openapi("AnthropicTextBlock");

const imageSource = z.discriminatedUnion(
  "type",
  [
    z.object({
      type: z.literal("base64"),
      media_type: z.enum(IMAGE_MEDIA_TYPES, {
        errorMap: () => ({ message: `media_type must be one of ${IMAGE_MEDIA_TYPES.join(", ")}` }),
      }),
      data: nonEmpty("data must be a non-empty base64 string"),
    }),
    z.object({ type: z.literal("url"), url: nonEmpty("url must be a non-empty string") }),
  ],
  { errorMap: () => ({ message: "source must be {type: base64, media_type, data} or {type: url, url}" }) },
);

const imageBlock = z
  .object({ type: z.literal("image"), source: imageSource, cache_control: cacheControl })
  .passthrough()
  .openapi("AnthropicImageBlock");

const toolUseBlock = z
  .object({
    type: z.literal("tool_use"),
    id: nonEmpty("id must be a non-empty string"),
    name: nonEmpty("name must be a non-empty string"),
    input: z.record(z.unknown(), {
      invalid_type_error: "input must be an object",
      required_error: "input is required",
    }),
    cache_control: cacheControl,
  })
  .passthrough()
  .openapi("AnthropicToolUseBlock");

const toolResultContent = stringOr(
  z.discriminatedUnion("type", [textBlock, imageBlock], {
    errorMap: (issue, ctx) =>
      issue.code === "invalid_union_discriminator"
        ? { message: "a tool_result's content blocks are text or image" }
        : { message: ctx.defaultError },
  }),
  "content must be a string or an array of text and image blocks",
  "a string, or text and image blocks",
);

const toolResultBlock = z
  .object({
    type: z.literal("tool_result"),
    tool_use_id: nonEmpty("tool_use_id must be a non-empty string"),
    content: toolResultContent.optional(),
    is_error: z.boolean({ invalid_type_error: "is_error must be a boolean" }).optional(),
    cache_control: cacheControl,
  })
  .passthrough()
  .openapi("AnthropicToolResultBlock");

/** Thinking from an earlier turn (sent back by clients): accepted, not forwarded. */
const thinkingBlock = z.object({ type: z.literal("thinking"), thinking: z.string().optional() }).passthrough();
const redactedThinkingBlock = z.object({ type: z.literal("redacted_thinking") }).passthrough();

const contentBlock = z.discriminatedUnion(
  "type",
  [textBlock, imageBlock, toolUseBlock, toolResultBlock, thinkingBlock, redactedThinkingBlock],
  {
    errorMap: (issue, ctx) =>
      issue.code === "invalid_union_discriminator"
        ? {
            message: `a content block's type is one of ${BLOCK_TYPES} (documents and server-tool blocks are not supported)`,
          }
        : { message: ctx.defaultError },
  },
);
export type AnthropicContentBlock = z.infer<typeof contentBlock>;

const MESSAGES_MESSAGE = "messages must be a non-empty array of {role, content}.";

/**
 * A turn: `user`, `assistant`, or `system` (Anthropic's mid-conversation system message, text only;
 * Claude Code sends its environment that way).
 */
export const anthropicMessage = z
  .object({
    role: z.enum(["user", "assistant", "system"], {
      errorMap: () => ({ message: "role must be user, assistant or system" }),
    }),
    content: stringOr(
      contentBlock,
      "content must be a string or an array of content blocks",
      `a string, or content blocks (${BLOCK_TYPES})`,
    ),
  })
  .passthrough()
  .superRefine((m, ctx) => {
    if (m.role !== "system" || typeof m.content === "string") return;
    const i = m.content.findIndex((b) => b.type !== "text");
    if (i >= 0)
      ctx.addIssue({ code: "custom", path: ["content", i, "type"], message: "a system message's blocks are text" });
  })
  .openapi("AnthropicMessage");
export type AnthropicMessage = z.infer<typeof anthropicMessage>;

const SYSTEM_MESSAGE = "system must be a string or an array of text blocks";
const system = stringOr(
  textBlock,
  SYSTEM_MESSAGE,
  "a string or text blocks; sent upstream as the system message",
).optional();

/** A client tool: `name`, `input_schema` (JSON schema), optional `description`. */
export const anthropicTool = z
  .object({
    type: z
      .string()
      .nullable()
      .optional()
      .openapi({ description: "absent or `custom`; server and built-in tools are refused" }),
    name: nonEmpty("name must be a non-empty string"),
    description: z.string({ invalid_type_error: "description must be a string" }).optional(),
    input_schema: z
      .record(z.unknown(), {
        required_error: "input_schema is required (a JSON schema object)",
        invalid_type_error: "input_schema must be a JSON schema object",
      })
      .openapi({ type: "object" }),
    cache_control: cacheControl,
  })
  .passthrough()
  .openapi("AnthropicTool");
export type AnthropicTool = z.infer<typeof anthropicTool>;

/** Tool types that bill beyond published pricing (SPEC 12, as on chat). */
const PAID_TOOL = /^(web_search|web_fetch|x_search)(_|$)/;

/** Anthropic's server and built-in tools: a typed entry whose schema is Anthropic's, not the buyer's. */
function toolsRefusal(tools: unknown): string | undefined {
  if (!Array.isArray(tools)) return undefined;
  for (const [i, t] of tools.entries()) {
    const type = (t as Json | null)?.type;
    if (typeof type !== "string" || type === "custom") continue;
    if (PAID_TOOL.test(type)) return `tools.${i}: the ${type} tool is refused: it bills beyond published pricing.`;
    return `tools.${i}: the ${type} tool is not supported: send a custom tool with name and input_schema.`;
  }
  return undefined;
}

const TOOL_CHOICE_MESSAGE = "tool_choice must be {type: auto | any | none} or {type: tool, name}";
const toolChoice = z
  .discriminatedUnion(
    "type",
    [
      z.object({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }).passthrough(),
      z.object({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }).passthrough(),
      z.object({ type: z.literal("none") }).passthrough(),
      z
        .object({
          type: z.literal("tool"),
          name: nonEmpty("name must be a non-empty string"),
          disable_parallel_tool_use: z.boolean().optional(),
        })
        .passthrough(),
    ],
    { errorMap: () => ({ message: TOOL_CHOICE_MESSAGE }) },
  )
  .optional();
export type AnthropicToolChoice = NonNullable<z.infer<typeof toolChoice>>;

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

// ---- answers -----------------------------------------------------------------------------------

/** `usage` of a message: Anthropic's counts plus the service's cost (as on chat's `usage`). */
export const anthropicUsage = z
  .object({
    input_tokens: z.number().int().openapi({ description: "prompt tokens not read from the cache" }),
    output_tokens: z.number().int(),
    cache_read_input_tokens: z.number().int(),
    cache_creation_input_tokens: z.number().int().openapi({ description: "always 0: no cache writes are priced" }),
    cost: z.number().openapi({ description: "USD charged (the figure of X-Svc-Cost-Usdc, as a JSON number)" }),
    cost_details: z
      .object({ cost_usdc: decimal6, clearing_price_cents: z.number().int(), upstream_burn_diem: decimal6 })
      .openapi({ description: "the charged amount exact, the clearing price, the upstream burn" }),
  })
  .passthrough()
  .openapi("AnthropicUsage");

/** A buffered answer: Anthropic's message object. */
export const anthropicMessageResponse = z
  .object({
    id: z.string(),
    type: z.literal("message"),
    role: z.literal("assistant"),
    model: z.string().openapi({ description: "the catalog id that answered" }),
    content: z.array(z.record(z.unknown())).openapi({ description: "text, tool_use and (when asked) thinking blocks" }),
    stop_reason: z.enum(["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal"]).nullable(),
    stop_sequence: z.string().nullable(),
    usage: anthropicUsage,
  })
  .openapi("AnthropicMessageResponse");

export const countTokensResponse = z
  .object({
    input_tokens: z
      .number()
      .int()
      .openapi({ description: "the admission estimate: ceil(UTF-8 bytes / 3) + 16 per message" }),
  })
  .openapi("AnthropicCountTokens");

/**
 * The error body of the Messages routes: Anthropic's `{type: "error", error: {type, message}}`,
 * plus the service's `error.code` (and its details, as in every error body) and
 * `error.details.error_code` (where the Anthropic SDK reads a stable code: `APIError.errorCode`).
 */
export const anthropicErrorBody = z
  .object({
    type: z.literal("error"),
    error: z
      .object({
        type: z.string().openapi({ description: "Anthropic's error type (see the status table)" }),
        message: z.string(),
        code: errorCode,
        details: z.object({ error_code: errorCode }).passthrough(),
        supportReference: uuid.optional(),
      })
      .passthrough(),
    request_id: uuid.nullable(),
  })
  .openapi("AnthropicErrorBody");

/**
 * THE Anthropic error object of a service error (the HTTP bodies and the streams' `error` events):
 * Anthropic's `type` and `message`, the service's `code` and details beside them, and the code
 * again in `details.error_code`, where the Anthropic SDK reads a stable code.
 */
export function anthropicErrorObject(status: number, code: string, message: string, details: Json = {}): Json {
  return { type: anthropicErrorType(status), message, code, ...details, details: { error_code: code } };
}

/**
 * THE service status → Anthropic error type (docs/decisions.md "Anthropic Messages API"). The status
 * stays the service's (a 503 stays 503: the SDK retries 5xx unless `x-should-retry` says no).
 */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
    case 405:
    case 406:
    case 415:
    case 431:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
    case 410:
      return "not_found_error";
    case 408:
    case 504:
      return "timeout_error";
    case 409:
      return "conflict_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return "api_error";
  }
}
