import { type AnswerFacts, answerFacts } from "../../../../adapters/upstream/answer-facts.js";
import { formatDecimal6 } from "../../../../lib/money.js";
import { eventFrame } from "../../../../lib/sse.js";
import type { InferenceSession, Settled, Usage } from "../../pipeline/session.js";
import type { RelayOutcome, StreamRelay, StreamRenderer } from "../../pipeline/stream-relay.js";
import { paymentFields, usageOf, usageWithCost } from "../../settlement/usage.js";

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Upstream-only extras never shown to the buyer (the upstream's own cost is not the buyer's). */
const UPSTREAM_EXTRAS = ["venice_parameters", "cost", "prompt_logprobs"] as const;
const TERMINAL = new Set(["response.completed", "response.incomplete"]);
const FAILURE = new Set(["response.failed", "error"]);

export function withoutExtras(o: Json): Json {
  const out: Json = { ...o };
  for (const k of UPSTREAM_EXTRAS) delete out[k];
  return out;
}

/** The flat cost metadata of the terminal Responses frames (SPEC "Responses SSE" 3–4). */
function costFields(s: Settled): Json {
  return {
    costUsdc: formatDecimal6(s.costMicroUsdc),
    clearingPriceCents: s.clearingPriceCents,
    supportReference: s.supportReference,
    ...paymentFields(s),
  };
}

/** True when an upstream event carries the first content the buyer would see. */
function isContent(type: string, ev: Json): boolean {
  if (type.endsWith(".delta")) return typeof ev.delta === "string" && ev.delta.length > 0;
  if (type === "response.output_item.added" || type === "response.output_item.done") {
    const item = ev.item;
    if (!isObject(item)) return false;
    if (item.type === "function_call") return true;
    if (Array.isArray(item.content) && item.content.length > 0) return true;
    if (Array.isArray(item.summary) && item.summary.length > 0) return true;
  }
  return type === "response.output_text.done" || type === "response.function_call_arguments.done";
}

/** What one relayed stream has shown the buyer so far (to describe an unfinished response). */
class StreamedResponse {
  snapshot: Json | undefined;
  /** output items by output_index: the last item seen (added or done), and its streamed text */
  private readonly items = new Map<number, { item: Json; done: boolean; text: string; args: string }>();
  relayedChars = 0;

  observe(type: string, ev: Json): void {
    if (isObject(ev.response)) this.snapshot = withoutExtras(ev.response);
    const index = typeof ev.output_index === "number" ? ev.output_index : 0;
    if ((type === "response.output_item.added" || type === "response.output_item.done") && isObject(ev.item)) {
      const prev = this.items.get(index);
      this.items.set(index, {
        item: ev.item,
        done: type === "response.output_item.done",
        text: prev?.text ?? "",
        args: prev?.args ?? "",
      });
    }
    if (type.endsWith(".delta") && typeof ev.delta === "string") {
      this.relayedChars += ev.delta.length;
      const slot = this.items.get(index);
      if (slot && type === "response.output_text.delta") slot.text += ev.delta;
      if (slot && type === "response.function_call_arguments.delta") slot.args += ev.delta;
    }
  }

  /** The output as far as it streamed: finished items as sent, unfinished ones with their partial text. */
  output(): Json[] {
    return [...this.items.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, s]) => {
        if (s.done) return s.item;
        if (s.item.type === "message") {
          return {
            ...s.item,
            status: "incomplete",
            content: s.text ? [{ type: "output_text", text: s.text, annotations: [] }] : [],
          };
        }
        if (s.item.type === "function_call") return { ...s.item, status: "incomplete", arguments: s.args };
        return { ...s.item, status: "incomplete" };
      });
  }
}

/**
 * Responses SSE (SPEC "Events" Responses SSE): events before the first content are held back (a
 * stream that fails before content falls forward invisibly), then relayed as they arrive, renumbered;
 * the upstream's terminal event is withheld until settlement commits and then sent with the flat
 * cost fields; a stream without usage ends in `response.incomplete` (estimated, no `usage` key);
 * a settlement that does not commit ends in `response.failed`. No `[DONE]`, no `svc.cost`.
 */
export class ResponsesStream implements StreamRenderer {
  /** a finished response with usage and no content (an empty answer) is still a result */
  readonly emptyAnswerIsResult = true;
  private seq = 0;
  private seen = new StreamedResponse();
  private terminal: { type: string; response: Json } | undefined;

  constructor(
    private readonly session: InferenceSession,
    private readonly approxPromptTokens: number,
  ) {}

  async relayAttempt(relay: StreamRelay): Promise<RelayOutcome> {
    this.seq = 0;
    this.seen = new StreamedResponse();
    this.terminal = undefined;
    const verdict = await relay.pump(async (frame) => {
      if (frame.data === "[DONE]") return "finished";
      let ev: Json;
      try {
        const parsed: unknown = JSON.parse(frame.data);
        if (!isObject(parsed)) return;
        ev = parsed;
      } catch {
        return;
      }
      const type = typeof ev.type === "string" ? ev.type : frame.event;
      const hasError = ev.error !== undefined && ev.error !== null;
      // `response.failed`, an `error` event, or a chat-style in-band `{error}` chunk
      const failed = type === undefined ? hasError : FAILURE.has(type) || (hasError && !type.startsWith("response."));
      if (failed) {
        // after content: treated as a truncated stream
        return relay.committed ? "stop" : relay.failBeforeContent(`upstream ${type} before content`);
      }
      if (type === undefined) return;
      if (TERMINAL.has(type)) {
        this.terminal = { type, response: isObject(ev.response) ? withoutExtras(ev.response) : {} };
        this.seen.observe(type, ev);
        return "finished"; // withheld until settlement commits
      }
      if (!type.startsWith("response.")) return; // not a Responses event: never relayed
      this.seen.observe(type, ev);
      const payload: Json = { ...withoutExtras(ev), type, sequence_number: this.seq++ };
      if (isObject(payload.response)) payload.response = withoutExtras(payload.response);
      relay.emit(eventFrame(type, payload), isContent(type, ev));
    });
    const terminal = this.terminal as { response: Json } | undefined; // set by the frames above
    const usage: Usage | undefined = terminal ? usageOf(terminal.response.usage) : undefined;
    return { verdict, usage };
  }

  incomplete() {
    return { approxPromptTokens: this.approxPromptTokens, relayedChars: this.seen.relayedChars };
  }

  answerFacts(): AnswerFacts {
    return answerFacts(this.terminal?.response ?? this.seen.snapshot ?? {});
  }

  completedFrames(settled: Settled): string {
    const terminal = this.terminal ?? { type: "response.completed", response: {} };
    const response: Json = { ...terminal.response };
    if (terminal.type === "response.incomplete") {
      // SPEC Responses SSE 4: `response.incomplete` never carries a `usage` key
      delete response.usage;
      response.status = "incomplete";
    } else if (response.usage !== undefined) {
      response.usage = usageWithCost(response.usage, settled);
    }
    return eventFrame(terminal.type, {
      type: terminal.type,
      sequence_number: this.seq,
      response,
      ...costFields(settled),
    });
  }

  incompleteFrames(settled: Settled): string {
    const { usage: _u, error: _e, ...base } = this.seen.snapshot ?? this.skeleton();
    const response: Json = {
      ...base,
      status: "incomplete",
      output: this.seen.output(),
      incomplete_details: { reason: "stream_incomplete" },
    };
    return eventFrame("response.incomplete", {
      type: "response.incomplete",
      sequence_number: this.seq,
      response,
      ...costFields(settled),
    });
  }

  /** SPEC Responses SSE 5: settlement did not commit (or the request failed); nested status `failed`, no `error` key. */
  errorFrame(): string {
    const like = this.terminal?.response ?? this.seen.snapshot;
    const { usage: _u, error: _e, incomplete_details: _i, ...base } = like ?? this.skeleton();
    return eventFrame("response.failed", {
      type: "response.failed",
      sequence_number: this.seq,
      response: { ...base, status: "failed" },
      supportReference: this.session.supportReference,
    });
  }

  /** A minimal response object when the upstream sent none (kept in the Responses shape). */
  private skeleton(): Json {
    const s = this.session;
    return {
      id: `resp_${s.requestId.replaceAll("-", "")}`,
      object: "response",
      created_at: Math.floor(s.startedAt.getTime() / 1000),
      model: s.model.id,
      output: [],
    };
  }
}
