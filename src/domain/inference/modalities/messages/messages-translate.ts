import type {
  AnthropicContentBlock,
  AnthropicMessage,
  AnthropicPrompt,
  AnthropicToolChoice,
} from "../../../../contract/messages.js";
import { textPromptEstimate } from "../../pipeline/admission.js";
import type { Settled } from "../../pipeline/session.js";
import { approxDefinitionTokens, approxItemTokens, usageOf, usageWithCost } from "../../settlement/usage.js";

/**
 * Anthropic's Messages API onto the upstream's chat completions and back (docs/decisions.md
 * "Anthropic Messages API"), pure: the prompt (system, messages, tools, tool choice) as chat
 * messages and tools; a chat completion as Anthropic's content blocks, stop reason and usage. The
 * stream's event-by-event translation is messages-stream.ts, on the same helpers.
 */

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The chat fields a Messages prompt becomes (only documented chat fields). */
export interface ChatPrompt {
  messages: Json[];
  tools?: Json[];
  tool_choice?: string | Json;
  parallel_tool_calls?: boolean;
}

type Block = AnthropicContentBlock;
type TextBlock = Extract<Block, { type: "text" }>;
type ImageBlock = Extract<Block, { type: "image" }>;

function imagePart(b: ImageBlock): Json {
  const s = b.source;
  const url = s.type === "base64" ? `data:${s.media_type};base64,${s.data}` : s.url;
  return { type: "image_url", image_url: { url } };
}

/** A user turn's parts: text (empty text dropped: the upstream refuses it) and images. */
function userPart(b: TextBlock | ImageBlock): Json | undefined {
  if (b.type === "image") return imagePart(b);
  return b.text.length > 0 ? { type: "text", text: b.text } : undefined;
}

/** A user message from parts: one text part is sent as a string. */
function userMessage(parts: Json[]): Json {
  const only = parts[0];
  if (parts.length === 1 && only?.type === "text") return { role: "user", content: only.text };
  return { role: "user", content: parts };
}

/** One Anthropic message as chat messages (a user turn with tool results is several). */
function chatMessagesOf(m: AnthropicMessage): Json[] {
  if (m.role === "system") {
    const text = typeof m.content === "string" ? m.content : joinedText(m.content);
    return text.length > 0 ? [{ role: "system", content: text }] : [];
  }
  if (typeof m.content === "string") return [{ role: m.role, content: m.content }];
  const blocks = m.content;
  if (m.role === "assistant") {
    const text = blocks.map((b) => (b.type === "text" ? b.text : "")).join("");
    const calls = blocks.flatMap((b) =>
      b.type === "tool_use"
        ? [{ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.input) } }]
        : [],
    );
    // thinking from an earlier turn is not forwarded; a turn of thinking alone is dropped
    if (calls.length === 0) return text.length > 0 ? [{ role: "assistant", content: text }] : [];
    return [{ role: "assistant", content: text.length > 0 ? text : null, tool_calls: calls }];
  }
  // a user turn: its tool results first (each a `tool` message right after the assistant's calls),
  // then its own text and images; images inside a result follow the results as user parts
  const out: Json[] = [];
  const parts: Json[] = [];
  for (const b of blocks) {
    if (b.type !== "tool_result") continue;
    let content = "";
    if (typeof b.content === "string") content = b.content;
    else {
      for (const c of b.content ?? []) {
        if (c.type === "text") content += c.text;
        else parts.push(imagePart(c));
      }
    }
    out.push({ role: "tool", tool_call_id: b.tool_use_id, content });
  }
  for (const b of blocks) {
    if (b.type !== "text" && b.type !== "image") continue;
    const part = userPart(b);
    if (part) parts.push(part);
  }
  if (parts.length > 0) out.push(userMessage(parts));
  return out;
}

/** System text blocks as one text: joined by a blank line. */
function joinedText(blocks: readonly Block[]): string {
  return blocks
    .map((b) => (b.type === "text" ? b.text : ""))
    .filter((t) => t.length > 0)
    .join("\n\n");
}

/** The system prompt as one system message (text blocks joined by a blank line), or none. */
function systemMessage(system: AnthropicPrompt["system"]): Json | undefined {
  const text = typeof system === "string" ? system : joinedText(system ?? []);
  return text.length > 0 ? { role: "system", content: text } : undefined;
}

function toolChoiceOf(c: AnthropicToolChoice): string | Json {
  switch (c.type) {
    case "auto":
      return "auto";
    case "any":
      return "required";
    case "none":
      return "none";
    case "tool":
      return { type: "function", function: { name: c.name } };
  }
}

/**
 * THE translation of a Messages prompt onto chat: the system message, the turns (tool calls as
 * `tool_calls`, tool results as `tool` messages, images as `image_url` parts with data: URLs),
 * custom tools as functions and the tool choice (`any` → `required`, a named tool → that function,
 * `disable_parallel_tool_use` → `parallel_tool_calls: false`). `cache_control` is not forwarded.
 */
export function chatPromptOf(p: AnthropicPrompt): ChatPrompt {
  const messages: Json[] = [];
  const sys = systemMessage(p.system);
  if (sys) messages.push(sys);
  for (const m of p.messages) messages.push(...chatMessagesOf(m));
  const out: ChatPrompt = { messages };
  if (p.tools && p.tools.length > 0) {
    out.tools = p.tools.map((t) => ({
      type: "function",
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.input_schema,
      },
    }));
    if (p.toolChoice) {
      out.tool_choice = toolChoiceOf(p.toolChoice);
      if ("disable_parallel_tool_use" in p.toolChoice && p.toolChoice.disable_parallel_tool_use === true) {
        out.parallel_tool_calls = false;
      }
    }
  }
  return out;
}

/**
 * THE prompt estimate of a Messages request, for admission and for `count_tokens`: the generous
 * bytes/3 rule (`textPromptEstimate`, as on chat) over what goes upstream — the translated
 * messages, the tool definitions and the tool choice — plus 16 per message.
 */
export function messagesPromptEstimate(chat: ChatPrompt): number {
  return textPromptEstimate(chat.messages, chat.messages.length, { tools: chat.tools, tool_choice: chat.tool_choice });
}

/** The rough upstream-like prompt count (per chat message) for billing a stream that ended without usage. */
export function approxMessagesPromptTokens(chat: ChatPrompt): number {
  let tokens = 0;
  for (const m of chat.messages) {
    let chars = JSON.stringify(m.content ?? "").length;
    if (Array.isArray(m.tool_calls)) chars += JSON.stringify(m.tool_calls).length;
    tokens += approxItemTokens(chars);
  }
  return tokens + approxDefinitionTokens({ tools: chat.tools, tool_choice: chat.tool_choice });
}

/** A tool call's arguments as Anthropic's `input` object (arguments that are not a JSON object: `{}`). */
export function toolInputOf(args: unknown): Json {
  if (isObject(args)) return args;
  if (typeof args !== "string" || args.trim() === "") return {};
  try {
    const parsed: unknown = JSON.parse(args);
    return isObject(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "refusal";

/**
 * THE stop reason of an answer: a tool call → `tool_use`; `length` → `max_tokens`;
 * `content_filter` → `refusal`; a stop the upstream names (`choices[].stop_reason`) that is one of
 * the request's `stop_sequences` → `stop_sequence` with it; anything else → `end_turn`.
 */
export function stopReasonOf(
  finish: unknown,
  matched: unknown,
  stopSequences: readonly string[] | undefined,
  toolCalls: boolean,
): { stop_reason: StopReason; stop_sequence: string | null } {
  if (toolCalls || finish === "tool_calls" || finish === "function_call") {
    return { stop_reason: "tool_use", stop_sequence: null };
  }
  if (finish === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (finish === "content_filter") return { stop_reason: "refusal", stop_sequence: null };
  if (typeof matched === "string" && stopSequences?.includes(matched)) {
    return { stop_reason: "stop_sequence", stop_sequence: matched };
  }
  return { stop_reason: "end_turn", stop_sequence: null };
}

/**
 * The upstream's chat usage as Anthropic's: `input_tokens` are the prompt tokens neither read from
 * nor written to the cache, `cache_read_input_tokens` the cached ones, `cache_creation_input_tokens`
 * the ones written to the cache (priced at the catalog's `cache_write`); with the settlement, the cost
 * fields every answer's `usage` carries.
 */
export function anthropicUsage(chatUsage: unknown, settled?: Settled): Json {
  const u = usageOf(chatUsage) ?? { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };
  const cached = u.cachedTokens ?? 0;
  const written = u.cacheWriteTokens ?? 0;
  const usage: Json = {
    input_tokens: u.promptTokens - cached - written,
    output_tokens: u.completionTokens,
    cache_read_input_tokens: cached,
    cache_creation_input_tokens: written,
  };
  return settled ? (usageWithCost(usage, settled) as Json) : usage;
}

/** Anthropic's id for a request's message (`msg_` and the request id). */
export function messageIdOf(requestId: string): string {
  return `msg_${requestId.replaceAll("-", "")}`;
}

/** A buffered chat completion's first choice as Anthropic's content blocks. */
export function contentBlocksOf(message: Json, thinking: boolean): Json[] {
  const blocks: Json[] = [];
  const reasoning = message.reasoning_content;
  if (thinking && typeof reasoning === "string" && reasoning.length > 0) {
    blocks.push({ type: "thinking", thinking: reasoning, signature: "" });
  }
  let text = "";
  if (typeof message.content === "string") text = message.content;
  else if (Array.isArray(message.content)) {
    for (const p of message.content) if (isObject(p) && typeof p.text === "string") text += p.text;
  }
  if (text.length > 0) blocks.push({ type: "text", text });
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  for (const [i, call] of calls.entries()) {
    if (!isObject(call)) continue;
    const fn = isObject(call.function) ? call.function : {};
    blocks.push({
      type: "tool_use",
      id: typeof call.id === "string" && call.id !== "" ? call.id : `toolu_${i}`,
      name: typeof fn.name === "string" ? fn.name : "",
      input: toolInputOf(fn.arguments),
    });
  }
  return blocks;
}

/**
 * A settled buffered chat completion as Anthropic's message: its content blocks, stop reason,
 * usage (with the cost) and the catalog id that answered.
 */
export function anthropicMessageOf(
  answer: Json,
  o: { requestId: string; model: string; thinking: boolean; stopSequences: readonly string[] | undefined },
  settled: Settled,
): Json {
  const choice = Array.isArray(answer.choices) && isObject(answer.choices[0]) ? answer.choices[0] : {};
  const message = isObject(choice.message) ? choice.message : {};
  const content = contentBlocksOf(message, o.thinking);
  const stop = stopReasonOf(
    choice.finish_reason,
    choice.stop_reason,
    o.stopSequences,
    content.some((b) => b.type === "tool_use"),
  );
  return {
    id: messageIdOf(o.requestId),
    type: "message",
    role: "assistant",
    model: o.model,
    content,
    ...stop,
    usage: anthropicUsage(answer.usage, settled),
  };
}
