/**
 * Deterministic token accounting for the simulator, so tests can predict `usage` and burn exactly.
 *
 * Prompt tokens: for every message, PER_MESSAGE_OVERHEAD_TOKENS + ceil(chars / 4), where chars is the
 * UTF-16 length of the message's text (string `content`, plus the `text` of every content part, plus
 * assistant `tool_calls[].function.arguments`). Non-text parts (images, audio) count 0. Definitions
 * sent beside the messages (`tools`, `tool_choice`, `response_format`) are part of the prompt, as a
 * provider renders them into it: ceil(chars of their JSON / 4) each (`countDefinitionTokens`).
 *
 * Completion tokens: the reply is `desired` tokens long, where desired = the `[[sim:tokens=N]]`
 * directive if present, else clamp(prompt_tokens, 8, 64); it is cut to the request's max tokens
 * (`max_completion_tokens` ?? `max_tokens`, else the model's `maxCompletionTokens`), with
 * `finish_reason: "length"` when cut, else `"stop"`.
 */

export const PER_MESSAGE_OVERHEAD_TOKENS = 4;
export const CHARS_PER_TOKEN = 4;
export const MIN_NATURAL_COMPLETION_TOKENS = 8;
export const MAX_NATURAL_COMPLETION_TOKENS = 64;
/** Default number of content chunks in a stream (fewer when the reply has fewer tokens). */
export const DEFAULT_STREAM_CHUNKS = 8;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The text of one chat message as the simulator counts it. */
export function messageText(message: unknown): string {
  if (!isRecord(message)) return "";
  let text = "";
  const content = message.content;
  if (typeof content === "string") {
    text += content;
  } else if (Array.isArray(content)) {
    for (const part of content) {
      if (isRecord(part) && typeof part.text === "string") text += part.text;
    }
  }
  const toolCalls = message.tool_calls;
  if (Array.isArray(toolCalls)) {
    for (const call of toolCalls) {
      if (isRecord(call) && isRecord(call.function) && typeof call.function.arguments === "string") {
        text += call.function.arguments;
      }
    }
  }
  return text;
}

/**
 * Prompt tokens of the definitions sent beside the messages (tools, a tool choice, a response
 * format): ceil(chars of each one's JSON / 4); an absent or null one counts 0. Pure.
 */
export function countDefinitionTokens(...definitions: unknown[]): number {
  let total = 0;
  for (const d of definitions) {
    if (d !== undefined && d !== null) total += Math.ceil(JSON.stringify(d).length / CHARS_PER_TOKEN);
  }
  return total;
}

/** Prompt tokens of a chat `messages` array: Σ (4 + ceil(chars / 4)). Pure. */
export function countPromptTokens(messages: readonly unknown[]): number {
  let total = 0;
  for (const message of messages) {
    total += PER_MESSAGE_OVERHEAD_TOKENS + Math.ceil(messageText(message).length / CHARS_PER_TOKEN);
  }
  return total;
}

/**
 * Converts a Responses API `input` (+ `instructions`) into chat-like messages, the way upstream
 * translates a Responses request into a chat completion. `input_tokens` = countPromptTokens(result).
 */
export function responsesInputToMessages(input: unknown, instructions?: unknown): unknown[] {
  const messages: unknown[] = [];
  if (typeof instructions === "string" && instructions.length > 0) {
    messages.push({ role: "system", content: instructions });
  }
  if (typeof input === "string") {
    messages.push({ role: "user", content: input });
    return messages;
  }
  if (!Array.isArray(input)) return messages;
  for (const item of input) {
    if (!isRecord(item)) continue;
    if (item.type === "function_call") {
      messages.push({ role: "assistant", content: typeof item.arguments === "string" ? item.arguments : "" });
    } else if (item.type === "function_call_output") {
      messages.push({ role: "tool", content: typeof item.output === "string" ? item.output : "" });
    } else if (item.type === "message" || typeof item.role === "string") {
      messages.push({ role: item.role, content: item.content });
    }
  }
  return messages;
}

/** Test directives embedded in prompt text, e.g. `[[sim:tokens=120]]`. */
export interface SimDirectives {
  /** exact number of completion tokens per choice (still cut by max tokens) */
  tokens?: number;
  /** delay before every content chunk (streaming) / total generation delay (buffered) */
  chunkDelayMs?: number;
  /** number of content chunks in a stream */
  chunks?: number;
  /** report this many prompt tokens as cache reads (capped at prompt_tokens) */
  cachedTokens?: number;
  /** report this many completion tokens as reasoning tokens (capped at completion_tokens; billed as output) */
  reasoningTokens?: number;
  /**
   * chat only: report this many prompt tokens as cache writes (`cache_creation_input_tokens`,
   * capped at what the cache reads leave of prompt_tokens), billed at `cache_write`
   */
  cacheWriteTokens?: number;
}

const DIRECTIVE_RE = /\[\[sim:([a-z_]+)=(\d{1,9})\]\]/g;

/** Reads `[[sim:name=N]]` directives from all message texts; a later occurrence wins. */
export function parseDirectives(messages: readonly unknown[]): SimDirectives {
  const directives: SimDirectives = {};
  for (const message of messages) {
    const text = messageText(message);
    if (!text.includes("[[sim:")) continue;
    for (const match of text.matchAll(DIRECTIVE_RE)) {
      const value = Number(match[2]);
      switch (match[1]) {
        case "tokens":
          directives.tokens = value;
          break;
        case "chunk_delay_ms":
          directives.chunkDelayMs = value;
          break;
        case "chunks":
          directives.chunks = Math.max(1, value);
          break;
        case "cached_tokens":
          directives.cachedTokens = value;
          break;
        case "reasoning_tokens":
          directives.reasoningTokens = value;
          break;
        case "cache_write":
        case "cache_write_tokens":
          directives.cacheWriteTokens = value;
          break;
        default:
          break;
      }
    }
  }
  return directives;
}

/**
 * `[[sim:tool_call]]` (the first tool) or `[[sim:tool_call=NAME]]` anywhere in the messages: the
 * reply is a call to that tool instead of text (see `planToolCall`). A later occurrence wins;
 * undefined when absent, `true` for the bare form.
 */
export function parseToolCallDirective(messages: readonly unknown[]): string | true | undefined {
  let found: string | true | undefined;
  for (const message of messages) {
    const text = messageText(message);
    if (!text.includes("[[sim:tool_call")) continue;
    for (const match of text.matchAll(/\[\[sim:tool_call(?:=([A-Za-z0-9_.-]{1,64}))?\]\]/g)) found = match[1] ?? true;
  }
  return found;
}

/** One function call the simulated model makes: its tool's name and its JSON arguments. */
export interface SimToolCall {
  name: string;
  arguments: string;
}

/** A value of a JSON-schema property, deterministic: its first enum value, else one per type. */
function sampleValue(schema: unknown): unknown {
  if (!isRecord(schema)) return "sim";
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case "integer":
    case "number":
      return 1;
    case "boolean":
      return true;
    case "array":
      return [];
    case "object":
      return {};
    case "null":
      return null;
    default:
      return "sim";
  }
}

/** A function's `parameters` (JSON schema) filled with `sampleValue`s: its required properties, else all. */
export function sampleArguments(parameters: unknown): string {
  const out: Record<string, unknown> = {};
  if (isRecord(parameters) && isRecord(parameters.properties)) {
    const props = parameters.properties;
    const required = Array.isArray(parameters.required)
      ? parameters.required.filter((k): k is string => typeof k === "string" && k in props)
      : [];
    for (const k of required.length > 0 ? required : Object.keys(props)) out[k] = sampleValue(props[k]);
  }
  return JSON.stringify(out);
}

/**
 * The tool call a chat request is answered with, or undefined for a text reply. A call is made
 * when the request has function `tools`, `tool_choice` is not `"none"`, the last message is not a
 * `tool` result, and either the `[[sim:tool_call…]]` directive is present or `tool_choice` forces a
 * call (`"required"` or a named function). The tool is the directive's name, else `tool_choice`'s,
 * else the first tool (a name no tool has: the first tool); the arguments are `sampleArguments`.
 */
export function planToolCall(body: Record<string, unknown>, messages: readonly unknown[]): SimToolCall | undefined {
  const tools = Array.isArray(body.tools)
    ? body.tools.filter((t): t is Record<string, unknown> => isRecord(t) && isRecord(t.function))
    : [];
  if (tools.length === 0) return undefined;
  const choice = body.tool_choice;
  if (choice === "none") return undefined;
  const last = messages[messages.length - 1];
  if (isRecord(last) && last.role === "tool") return undefined;
  const directive = parseToolCallDirective(messages);
  const forced = isRecord(choice) && isRecord(choice.function) ? choice.function.name : undefined;
  if (directive === undefined && choice !== "required" && forced === undefined) return undefined;
  const wanted = typeof directive === "string" ? directive : typeof forced === "string" ? forced : undefined;
  const fn = (t: Record<string, unknown>) => t.function as Record<string, unknown>;
  const tool = tools.find((t) => fn(t).name === wanted) ?? tools[0];
  if (!tool) return undefined;
  return { name: String(fn(tool).name ?? "tool"), arguments: sampleArguments(fn(tool).parameters) };
}

/** Completion tokens of a tool call: ceil((name + arguments characters) / 4), at least 1. */
export function toolCallTokens(call: SimToolCall): number {
  return Math.max(1, Math.ceil((call.name.length + call.arguments.length) / CHARS_PER_TOKEN));
}

export interface CompletionPlan {
  tokens: number;
  finishReason: "stop" | "length";
}

/** See the module comment. `maxTokens` is the effective cap the request asked for (or null). */
export function planCompletion(args: {
  promptTokens: number;
  maxTokens: number | null;
  modelMaxCompletionTokens: number;
  directiveTokens?: number;
}): CompletionPlan {
  const desired =
    args.directiveTokens ??
    Math.min(MAX_NATURAL_COMPLETION_TOKENS, Math.max(MIN_NATURAL_COMPLETION_TOKENS, args.promptTokens));
  const limit = args.maxTokens ?? args.modelMaxCompletionTokens;
  return desired > limit ? { tokens: limit, finishReason: "length" } : { tokens: desired, finishReason: "stop" };
}

const VOCAB = [
  "This",
  " is",
  " a",
  " simulated",
  " reply",
  " from",
  " the",
  " upstream",
  " simulator",
  ".",
  " It",
  " is",
  " deterministic",
  " and",
  " counted",
  " one",
  " word",
  " per",
  " token",
  ".",
] as const;

/** The reply as a list of tokens (each entry is exactly one completion token). */
export function replyTokens(count: number): string[] {
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) out[i] = VOCAB[i % VOCAB.length] ?? "";
  return out;
}

/** Splits `tokens` into at most `chunks` consecutive content pieces, each with its token count. */
export function chunkTokens(tokens: readonly string[], chunks: number): { text: string; tokens: number }[] {
  if (tokens.length === 0) return [];
  const pieces = Math.max(1, Math.min(chunks, tokens.length));
  const size = Math.ceil(tokens.length / pieces);
  const out: { text: string; tokens: number }[] = [];
  for (let i = 0; i < tokens.length; i += size) {
    const slice = tokens.slice(i, i + size);
    out.push({ text: slice.join(""), tokens: slice.length });
  }
  return out;
}
