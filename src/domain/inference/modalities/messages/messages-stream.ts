import { anthropicErrorObject } from "../../../../contract/messages.js";
import { DomainError, ERROR_TABLE } from "../../../../lib/errors.js";
import { formatDecimal6 } from "../../../../lib/money.js";
import { eventFrame } from "../../../../lib/sse.js";
import type { InferenceSession, Settled } from "../../pipeline/session.js";
import type { RelayOutcome, StreamRelay, StreamRenderer } from "../../pipeline/stream-relay.js";
import { paymentFields, usageOf } from "../../settlement/usage.js";
import {
  anthropicUsage,
  approxMessagesPromptTokens,
  type ChatPrompt,
  messageIdOf,
  stopReasonOf,
} from "./messages-translate.js";

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The flat cost fields of the closing `message_delta` and of an incomplete stream's `error` event. */
function costFields(s: Settled): Json {
  return {
    costUsdc: formatDecimal6(s.costMicroUsdc),
    clearingPriceCents: s.clearingPriceCents,
    supportReference: s.supportReference,
    ...paymentFields(s),
  };
}

/** An Anthropic SSE event: the name on the `event:` line and as the JSON `type`. */
function event(type: string, payload: Json = {}): string {
  return eventFrame(type, { type, ...payload });
}

/** The block being streamed: Anthropic's blocks are sequential, each started and stopped once. */
interface OpenBlock {
  kind: "text" | "thinking" | "tool_use";
  index: number;
}

/** What one relayed attempt has shown the buyer (reset per attempt). */
class Translation {
  started = false;
  open: OpenBlock | undefined;
  blocks = 0;
  /** the upstream's tool call index → its block index */
  tools = new Map<number, number>();
  finish: unknown = null;
  matched: unknown = null;
  sawToolCall = false;
  usageChunk: Json | undefined;
  relayedChars = 0;
  /** the reasoning of a request that did not ask for thinking has committed the stream (one `ping`) */
  reasoningPinged = false;
}

/**
 * Anthropic's Messages SSE (docs/decisions.md "Anthropic Messages API"), translated from the
 * upstream's chat chunks: `message_start` and a `ping`, then per block `content_block_start`,
 * `content_block_delta` (`text_delta`, `input_json_delta`, `thinking_delta` when thinking was asked
 * for) and `content_block_stop`, relayed as they arrive (held until the first content, so a failure
 * before it falls forward invisibly). The closing `message_delta` (stop reason, usage with its cost,
 * flat `costUsdc`/`clearingPriceCents`/`supportReference`) and `message_stop` are withheld until
 * settlement commits. A stream that ends without usage is billed on estimated usage and ends in an
 * `error` event (`stream_incomplete`, with the same flat cost fields); a settlement that does not
 * commit ends in an `error` event without them.
 */
export class MessagesStream implements StreamRenderer {
  /** a finished answer with usage and no content is still a message (empty content) */
  readonly emptyAnswerIsResult = true;
  private t = new Translation();

  constructor(
    private readonly session: InferenceSession,
    private readonly chat: ChatPrompt,
    private readonly o: { thinking: boolean; stopSequences: readonly string[] | undefined },
  ) {}

  async relayAttempt(relay: StreamRelay): Promise<RelayOutcome> {
    this.t = new Translation();
    const verdict = await relay.pump((frame) => {
      if (frame.data === "[DONE]") return "finished";
      let chunk: unknown;
      try {
        chunk = JSON.parse(frame.data);
      } catch {
        return;
      }
      if (!isObject(chunk)) return;
      if (chunk.error !== undefined) {
        // after content: treated as a truncated stream
        return relay.committed ? "stop" : relay.failBeforeContent("in-band upstream error before content");
      }
      const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
      if (chunk.usage && choices.length === 0) {
        this.t.usageChunk = chunk;
        return;
      }
      this.start(relay);
      const choice = isObject(choices[0]) ? choices[0] : undefined;
      if (choice) this.relayChoice(relay, choice);
      return;
    });
    const usageChunk = this.t.usageChunk as Json | undefined; // set by the frames above
    return { verdict, usage: verdict === "finished" && usageChunk ? usageOf(usageChunk.usage) : undefined };
  }

  /** `message_start` and a `ping`, once per attempt, held until the first content. */
  private start(relay: StreamRelay): void {
    if (this.t.started) return;
    this.t.started = true;
    relay.emit(this.startFrames(), false);
  }

  /** `message_start` (the message without content; its counts come with `message_delta`) and a `ping`. */
  private startFrames(): string {
    const s = this.session;
    const message = {
      id: messageIdOf(s.requestId),
      type: "message",
      role: "assistant",
      model: s.model.id,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    };
    return event("message_start", { message }) + event("ping");
  }

  private relayChoice(relay: StreamRelay, choice: Json): void {
    const delta = isObject(choice.delta) ? choice.delta : {};
    const reasoning = delta.reasoning_content;
    if (typeof reasoning === "string" && reasoning.length > 0) {
      this.t.relayedChars += reasoning.length;
      if (this.o.thinking) {
        this.openBlock(relay, "thinking", { type: "thinking", thinking: "", signature: "" });
        this.delta(relay, { type: "thinking_delta", thinking: reasoning });
      } else if (!this.t.reasoningPinged) {
        // not asked for: not shown, but the model is working (the stream commits, as chat's does)
        this.t.reasoningPinged = true;
        relay.emit(event("ping"), true);
      }
    }
    const text = delta.content;
    if (typeof text === "string" && text.length > 0) {
      this.t.relayedChars += text.length;
      this.openBlock(relay, "text", { type: "text", text: "" });
      this.delta(relay, { type: "text_delta", text });
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const call of delta.tool_calls) if (isObject(call)) this.relayToolCall(relay, call);
    }
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.t.finish = choice.finish_reason;
      this.t.matched = choice.stop_reason ?? null;
      this.closeBlock(relay);
    }
  }

  /** A tool call's first delta starts its `tool_use` block; its arguments are `input_json_delta`s. */
  private relayToolCall(relay: StreamRelay, call: Json): void {
    this.t.sawToolCall = true;
    const at = typeof call.index === "number" ? call.index : 0;
    const fn = isObject(call.function) ? call.function : {};
    let index = this.t.tools.get(at);
    if (index === undefined) {
      this.closeBlock(relay);
      index = this.t.blocks++;
      this.t.tools.set(at, index);
      this.t.open = { kind: "tool_use", index };
      const id = typeof call.id === "string" && call.id !== "" ? call.id : `toolu_${at}`;
      const block = { type: "tool_use", id, name: typeof fn.name === "string" ? fn.name : "", input: {} };
      relay.emit(event("content_block_start", { index, content_block: block }), true);
    }
    const args = fn.arguments;
    if (typeof args === "string" && args.length > 0) {
      this.t.relayedChars += args.length;
      // interleaved calls keep their own block index (the SDK accumulates by index)
      const d = { type: "input_json_delta", partial_json: args };
      relay.emit(event("content_block_delta", { index, delta: d }), true);
    }
  }

  private openBlock(relay: StreamRelay, kind: OpenBlock["kind"], block: Json): void {
    if (this.t.open?.kind === kind) return;
    this.closeBlock(relay);
    const index = this.t.blocks++;
    this.t.open = { kind, index };
    relay.emit(event("content_block_start", { index, content_block: block }), true);
  }

  private delta(relay: StreamRelay, delta: Json): void {
    relay.emit(event("content_block_delta", { index: this.t.open?.index ?? 0, delta }), true);
  }

  private closeBlock(relay: StreamRelay): void {
    const open = this.t.open;
    if (!open) return;
    this.t.open = undefined;
    relay.emit(event("content_block_stop", { index: open.index }), false);
  }

  incomplete() {
    return { approxPromptTokens: approxMessagesPromptTokens(this.chat), relayedChars: this.t.relayedChars };
  }

  completedFrames(settled: Settled): string {
    const t = this.t;
    let out = "";
    // an empty answer whose upstream sent no chunk before its usage is still a whole message
    if (!t.started) out += this.startFrames();
    if (t.open) {
      out += event("content_block_stop", { index: t.open.index });
      t.open = undefined;
    }
    const stop = stopReasonOf(t.finish, t.matched, this.o.stopSequences, t.sawToolCall);
    out += event("message_delta", {
      delta: stop,
      usage: anthropicUsage(t.usageChunk?.usage, settled),
      ...costFields(settled),
    });
    return out + event("message_stop");
  }

  incompleteFrames(settled: Settled): string {
    const error = anthropicErrorObject(
      ERROR_TABLE.stream_incomplete.status,
      "stream_incomplete",
      "The stream ended before its final usage; billed on estimated usage.",
      { supportReference: settled.supportReference },
    );
    return event("error", { error, ...costFields(settled) });
  }

  /** A settlement that did not commit (`settle_failed`) or any failure after the stream started. */
  errorFrame(e: unknown): string {
    const ref = this.session.supportReference;
    const error =
      e instanceof DomainError
        ? anthropicErrorObject(e.status, e.code, e.message, { supportReference: ref })
        : anthropicErrorObject(500, "internal_error", "The request failed after the stream started.", {
            supportReference: ref,
          });
    return event("error", { error });
  }
}
