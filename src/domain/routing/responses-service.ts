import type { UpstreamClient } from "../../adapters/upstream/client.js";
import { eventFrame } from "../../http/openai/sse.js";
import { DomainError } from "../../lib/errors.js";
import { formatDecimal6 } from "../../lib/money.js";
import { estimatePromptTokens } from "./admission.js";
import {
  type BufferedResult,
  type Caller,
  costHeaders,
  runBuffered,
  runStream,
  type StreamSink,
  usageOf,
} from "./chat-service.js";
import { bareModelId } from "./model-resolver.js";
import type { RouterService, RoutingSession, Settled, Usage } from "./router-service.js";
import type { StreamRelay } from "./stream-relay.js";

type Json = Record<string, unknown>;

/** Request fields that ask for storage or background work: the facade is stateless, so they are dropped. */
const STATELESS_DROPPED = ["store", "previous_response_id", "background", "metadata"] as const;
/** Upstream-only extras never shown to the buyer (the upstream's own cost is not the buyer's). */
const UPSTREAM_EXTRAS = ["venice_parameters", "cost", "prompt_logprobs"] as const;
/** Tool types that bill beyond published pricing (SPEC 12): refused like chat's web search. */
const PAID_TOOL = /^(web_search|web_search_preview|x_search)(_|$)/;

export interface ResponsesRequest {
  body: Json;
  model: string;
  stream: boolean;
  maxTokens: number | undefined;
  input: string | unknown[];
  instructions: string | undefined;
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function refusePaidAddOns(body: Json): void {
  const on = (v: unknown) => v !== undefined && v !== null && v !== false && v !== "off";
  const vp = body.venice_parameters;
  if (vp !== undefined && vp !== null && !isObject(vp)) {
    throw new DomainError("invalid_request", "venice_parameters must be an object.", { field: "venice_parameters" });
  }
  if (vp && (on(vp.enable_web_search) || on(vp.enable_web_scraping) || on(vp.enable_x_search))) {
    throw new DomainError(
      "invalid_request",
      "Web search, scraping and X search are refused: they bill beyond published pricing.",
      { field: "venice_parameters" },
    );
  }
  if (on(body.web_search)) {
    throw new DomainError("invalid_request", "web_search is refused: it bills beyond published pricing.", {
      field: "web_search",
    });
  }
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) {
      throw new DomainError("invalid_request", "tools must be an array.", { field: "tools" });
    }
    for (const t of body.tools) {
      if (isObject(t) && typeof t.type === "string" && PAID_TOOL.test(t.type)) {
        throw new DomainError("invalid_request", `The ${t.type} tool is refused: it bills beyond published pricing.`, {
          field: "tools",
        });
      }
    }
  }
}

/** Validates a Responses body; returns what routing needs. Nothing is changed on failure. */
export function parseResponsesBody(raw: unknown): ResponsesRequest {
  if (!isObject(raw)) {
    throw new DomainError("invalid_request", "Body must be a JSON object with model and input.");
  }
  const body = raw;
  if (typeof body.model !== "string" || body.model.length === 0 || body.model.length > 200) {
    throw new DomainError("invalid_request", "model is required (a live id from /v1/models).", { field: "model" });
  }
  if (body.model.includes(":")) {
    throw new DomainError("invalid_request", "model suffixes (`model:option=…`) are not accepted.", { field: "model" });
  }
  const input = body.input;
  if (typeof input === "string") {
    if (input.length === 0) throw new DomainError("invalid_request", "input must not be empty.", { field: "input" });
  } else if (Array.isArray(input)) {
    if (input.length === 0 || !input.every(isObject)) {
      throw new DomainError("invalid_request", "input must be a string or a non-empty array of input items.", {
        field: "input",
      });
    }
  } else {
    throw new DomainError("invalid_request", "input is required (a string or an array of input items).", {
      field: "input",
    });
  }
  if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== "string") {
    throw new DomainError("invalid_request", "instructions must be a string.", { field: "instructions" });
  }
  if (body.stream !== undefined && typeof body.stream !== "boolean") {
    throw new DomainError("invalid_request", "stream must be a boolean.", { field: "stream" });
  }
  let maxTokens: number | undefined;
  const m = body.max_output_tokens;
  if (m !== undefined && m !== null) {
    if (typeof m !== "number" || !Number.isInteger(m) || m < 1) {
      throw new DomainError("invalid_request", "max_output_tokens must be a positive integer.", {
        field: "max_output_tokens",
      });
    }
    maxTokens = m;
  }
  refusePaidAddOns(body);
  return {
    body,
    model: body.model,
    stream: body.stream === true,
    maxTokens,
    input,
    instructions: typeof body.instructions === "string" ? body.instructions : undefined,
  };
}

/** The admission estimate: the generous bytes/3 rule over the input (and the instructions, if any). */
export function responsesPromptEstimate(req: Pick<ResponsesRequest, "input" | "instructions">): number {
  const items = typeof req.input === "string" ? 1 : req.input.length;
  if (req.instructions === undefined) return estimatePromptTokens(req.input, items);
  return estimatePromptTokens([req.instructions, req.input], items + 1);
}

/** A rough upstream-like prompt count (chars/4 per item) for billing a stream that ended without usage. */
function approxPromptTokens(req: Pick<ResponsesRequest, "input" | "instructions">): number {
  const text = (v: unknown) => (typeof v === "string" ? v.length : JSON.stringify(v ?? "").length);
  let t = req.instructions ? 4 + Math.ceil(req.instructions.length / 4) : 0;
  if (typeof req.input === "string") return t + 4 + Math.ceil(req.input.length / 4);
  for (const item of req.input) {
    const x = item as Json;
    t += 4 + Math.ceil(text(x.content ?? x.output ?? x.arguments ?? x) / 4);
  }
  return t;
}

function withoutExtras(o: Json): Json {
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
  };
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

const TERMINAL = new Set(["response.completed", "response.incomplete"]);
const FAILURE = new Set(["response.failed", "error"]);

/**
 * The stateless OpenAI Responses facade over the same router as chat (SPEC "Inference" POST
 * /v1/responses, "Events" Responses SSE): same key, prepaid debit, catalog and fall-forward.
 * Buffered answers carry the cost headers; streams end in `response.completed` (with usage) or
 * `response.incomplete` (estimated, no usage), both with flat `costUsdc`, `clearingPriceCents`,
 * `supportReference`, or `response.failed` when settlement does not commit. No `[DONE]`, no `svc.cost`.
 */
export class ResponsesService {
  constructor(
    private readonly router: RouterService,
    private readonly upstream: UpstreamClient,
  ) {}

  private open(caller: Caller, req: ResponsesRequest, stream: boolean): Promise<RoutingSession> {
    return this.router.open({
      ...caller,
      route: "responses",
      model: bareModelId(req.model),
      stream,
      promptEstimate: responsesPromptEstimate(req),
      requestedMaxTokens: req.maxTokens,
    });
  }

  private upstreamBody(body: Json, session: RoutingSession, stream: boolean): Json {
    const rest: Json = { ...body };
    for (const k of [...STATELESS_DROPPED, "model", "max_output_tokens", "max_tokens", "max_completion_tokens", "user"])
      delete rest[k];
    return {
      ...rest,
      model: session.model.id,
      max_output_tokens: session.plan.admittedMaxTokens,
      stream,
      venice_parameters: {
        include_venice_system_prompt: false,
        ...(isObject(body.venice_parameters) ? body.venice_parameters : {}),
      },
    };
  }

  /** Buffered: settles on the upstream's usage, then returns the response object and the cost headers. */
  async buffered(caller: Caller, raw: unknown, signal: AbortSignal): Promise<BufferedResult> {
    const req = parseResponsesBody(raw);
    const session = await this.open(caller, req, false);
    const { answer, settled } = await runBuffered(this.router, this.upstream, session, {
      path: "/responses",
      body: () => this.upstreamBody(req.body, session, false),
      signal,
      // an `incomplete` response (cut at max_output_tokens) consumed tokens: settled like any other
      refuse: (a) => (a.status === "failed" ? "upstream response failed" : undefined),
    });
    return { body: withoutExtras(answer), headers: costHeaders(settled, session) };
  }

  /**
   * Streaming (SPEC "Responses SSE"): events before the first content are held back (a stream that
   * fails before content falls forward invisibly), then relayed as they arrive; the upstream's
   * terminal event is withheld until settlement commits. Errors before the stream starts are thrown
   * (the transport answers with JSON).
   */
  async stream(caller: Caller, raw: unknown, sink: StreamSink): Promise<void> {
    const req = parseResponsesBody(raw);
    const session = await this.open(caller, req, true);
    const progress = { seq: 0 };
    await runStream(this.router, this.upstream, session, sink, {
      path: "/responses",
      body: this.upstreamBody(req.body, session, true),
      relay: (relay) => {
        progress.seq = 0;
        return this.relay(session, req, sink, relay, progress);
      },
      errorFrame: () => this.failedFrame(session, undefined, progress.seq),
    });
  }

  /**
   * Relays one upstream stream. Returns "retry" when it failed before any content (fall forward),
   * "done" when the buyer's stream was finished (completed, incomplete, or failed settlement).
   */
  private async relay(
    session: RoutingSession,
    req: ResponsesRequest,
    sink: StreamSink,
    relay: StreamRelay,
    progress: { seq: number },
  ): Promise<"retry" | "done"> {
    const seen = new StreamedResponse();
    let terminal: { type: string; response: Json } | undefined;
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
        terminal = { type, response: isObject(ev.response) ? withoutExtras(ev.response) : {} };
        seen.observe(type, ev);
        return "finished"; // withheld until settlement commits
      }
      if (!type.startsWith("response.")) return; // not a Responses event: never relayed
      seen.observe(type, ev);
      const payload: Json = { ...withoutExtras(ev), type, sequence_number: progress.seq++ };
      if (isObject(payload.response)) payload.response = withoutExtras(payload.response);
      relay.emit(eventFrame(type, payload), isContent(type, ev));
    });
    if (verdict === "retry") return "retry";

    const usage = terminal ? usageOf(terminal.response.usage) : undefined;
    // a finished response with usage and no content (an empty answer) is still a result
    if (usage && !sink.closed) relay.commit();
    if (!relay.committed) return relay.closeBeforeContent();

    if (terminal && usage) {
      let settled: Settled;
      try {
        settled = await this.router.settle(session, usage);
      } catch {
        this.finish(sink, this.failedFrame(session, terminal.response, progress.seq));
        return "done";
      }
      const response: Json = { ...terminal.response };
      if (terminal.type === "response.incomplete") {
        // SPEC Responses SSE 4: `response.incomplete` never carries a `usage` key
        delete response.usage;
        response.status = "incomplete";
      }
      this.finish(
        sink,
        eventFrame(terminal.type, {
          type: terminal.type,
          sequence_number: progress.seq,
          response,
          ...costFields(settled),
        }),
      );
      return "done";
    }

    // truncated, failed after content, or the buyer left: bill the estimate
    const estimated: Usage = {
      promptTokens: Math.min(approxPromptTokens(req), session.plan.promptEstimate),
      completionTokens: Math.min(Math.ceil(seen.relayedChars / 4), session.plan.admittedMaxTokens),
    };
    let settled: Settled;
    try {
      settled = await this.router.settle(session, estimated, { incomplete: true });
    } catch {
      this.finish(sink, this.failedFrame(session, seen.snapshot, progress.seq));
      return "done";
    }
    const { usage: _u, error: _e, ...base } = seen.snapshot ?? this.skeleton(session);
    const response: Json = {
      ...base,
      status: "incomplete",
      output: seen.output(),
      incomplete_details: { reason: "stream_incomplete" },
    };
    this.finish(
      sink,
      eventFrame("response.incomplete", {
        type: "response.incomplete",
        sequence_number: progress.seq,
        response,
        ...costFields(settled),
      }),
    );
    return "done";
  }

  private finish(sink: StreamSink, frame: string): void {
    if (sink.closed) return;
    sink.write(frame);
    sink.end();
  }

  /** A minimal response object when the upstream sent none (kept in the Responses shape). */
  private skeleton(session: RoutingSession): Json {
    return {
      id: `resp_${session.requestId.replaceAll("-", "")}`,
      object: "response",
      created_at: Math.floor(session.startedAt.getTime() / 1000),
      model: session.model.id,
      output: [],
    };
  }

  /** SPEC Responses SSE 5: settlement did not commit; nested status `failed`, no `error` key anywhere. */
  private failedFrame(session: RoutingSession, like: Json | undefined, seq: number): string {
    const { usage: _u, error: _e, incomplete_details: _i, ...base } = like ?? this.skeleton(session);
    return eventFrame("response.failed", {
      type: "response.failed",
      sequence_number: seq,
      response: { ...base, status: "failed" },
      supportReference: session.supportReference,
    });
  }
}
