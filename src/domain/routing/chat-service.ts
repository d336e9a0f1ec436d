import {
  releaseBody,
  type UpstreamClient,
  type UpstreamFailure,
  type UpstreamResponse,
} from "../../adapters/upstream/client.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import { formatDecimal6 } from "../../lib/money.js";
import { estimatePromptTokens } from "./admission.js";
import { bareModelId } from "./model-resolver.js";
import {
  type AttemptFailure,
  type RouterService,
  type RoutingSession,
  type Settled,
  serverTiming,
  type Usage,
} from "./router-service.js";
import { StreamRelay } from "./stream-relay.js";

/** Buffered upstream calls give up after this long (then fall forward). */
export const UPSTREAM_TIMEOUT_MS = 120_000;
/** A stream that sends no first content within this long is a failed attempt. */
export const FIRST_CONTENT_TIMEOUT_MS = 60_000;

export interface Caller {
  accountId: string;
  apiKeyId: string;
}

/** Where a streamed response goes (the transport provides it; the domain writes SSE text). */
export interface StreamSink {
  /** sends status 200 and the stream headers; called once, before the first frame */
  start(headers: Record<string, string>): void;
  write(text: string): void;
  end(): void;
  /** true once the buyer went away */
  readonly closed: boolean;
  /** aborts when the buyer goes away */
  readonly signal: AbortSignal;
}

export interface BufferedResult {
  body: Record<string, unknown>;
  headers: Record<string, string>;
}

type Json = Record<string, unknown>;

/** Fields the buyer may not send: they bill beyond published pricing (SPEC 12). */
function refusePaidAddOns(body: Json): void {
  const vp = body.venice_parameters as Json | undefined;
  const on = (v: unknown) => v !== undefined && v !== false && v !== "off";
  if (vp && (on(vp.enable_web_search) || on(vp.enable_web_scraping) || on(vp.enable_x_search))) {
    throw new DomainError(
      "invalid_request",
      "Web search, scraping and X search are refused: they bill beyond published pricing.",
      {
        field: "venice_parameters",
      },
    );
  }
  if (on(body.web_search))
    throw new DomainError("invalid_request", "web_search is refused: it bills beyond published pricing.", {
      field: "web_search",
    });
}

function positiveInt(v: unknown, field: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
    throw new DomainError("invalid_request", `${field} must be a positive integer.`, { field });
  }
  return v;
}

/** A validated chat body and what routing needs of it. */
export interface ChatRequest {
  body: Json;
  model: string;
  stream: boolean;
  maxTokens: number | undefined;
  messages: unknown[];
}

/** Validates a chat body; returns what routing needs. Nothing is changed on failure. */
export function parseChatBody(raw: unknown): ChatRequest {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new DomainError("invalid_request", "Body must be a JSON object with model and messages.");
  }
  const body = raw as Json;
  if (typeof body.model !== "string" || body.model.length === 0 || body.model.length > 200) {
    throw new DomainError("invalid_request", "model is required (a live id from /v1/models).", { field: "model" });
  }
  if (body.model.includes(":")) {
    throw new DomainError("invalid_request", "model suffixes (`model:option=…`) are not accepted.", { field: "model" });
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    throw new DomainError("invalid_request", "messages must be a non-empty array.", { field: "messages" });
  }
  if (body.stream !== undefined && typeof body.stream !== "boolean") {
    throw new DomainError("invalid_request", "stream must be a boolean.", { field: "stream" });
  }
  if (body.n !== undefined && body.n !== 1) {
    throw new DomainError("invalid_request", "n must be 1 (one choice per request).", { field: "n" });
  }
  refusePaidAddOns(body);
  const maxTokens =
    positiveInt(body.max_completion_tokens, "max_completion_tokens") ?? positiveInt(body.max_tokens, "max_tokens");
  return { body, model: body.model, stream: body.stream === true, maxTokens, messages: body.messages };
}

/** Maps an upstream failure to fall-forward data, or to the buyer's own error (no other key is burned). */
export function classifyFailure(f: UpstreamFailure): AttemptFailure | DomainError {
  const detail = `${f.kind}${f.status ? ` ${f.status}` : ""}: ${f.message}`.slice(0, 200);
  switch (f.kind) {
    case "auth":
      return { kind: "supplier_auth", status: f.status, detail };
    case "payment":
      return { kind: "supplier_exhausted", status: f.status, detail };
    case "request":
      if (f.status === 404)
        return new DomainError("model_not_found", `The upstream does not know this model: ${f.message}`);
      if (f.status === 413) return new DomainError("payload_too_large", f.message);
      return new DomainError("invalid_request", `The request was refused: ${f.message}`, { upstreamStatus: f.status });
    default:
      return { kind: "retryable", status: f.status, detail };
  }
}

/**
 * Upstream usage → router usage, for both shapes (chat `prompt_tokens`/`completion_tokens`,
 * Responses `input_tokens`/`output_tokens`, with their `…_details.cached_tokens`). Anything that is
 * not a finite non-negative count is no usage at all (the answer falls forward, never a bad charge).
 */
export function usageOf(u: unknown): Usage | undefined {
  if (typeof u !== "object" || u === null) return undefined;
  const x = u as Json;
  const prompt = x.prompt_tokens ?? x.input_tokens;
  const completion = x.completion_tokens ?? x.output_tokens;
  const count = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0;
  if (!count(prompt) || !count(completion)) return undefined;
  const details = (x.prompt_tokens_details ?? x.input_tokens_details) as Json | null | undefined;
  const cached =
    typeof details === "object" && details !== null && count(details.cached_tokens) ? details.cached_tokens : 0;
  return {
    promptTokens: Math.floor(prompt),
    completionTokens: Math.floor(completion),
    cachedTokens: Math.min(Math.floor(cached), Math.floor(prompt)),
  };
}

/** A chunk without the provider's own fields (`cost`, `venice_parameters`), which buyers never see. */
function withoutProviderFields(chunk: Json): Json {
  const { cost: _c, venice_parameters: _v, ...clean } = chunk;
  return clean;
}

/** A rough upstream-like prompt count for billing a stream that ended without usage. */
function approxPromptTokens(messages: unknown[]): number {
  let t = 0;
  for (const m of messages) t += 4 + Math.ceil(JSON.stringify((m as Json)?.content ?? "").length / 4);
  return t;
}

/**
 * One upstream call for the session's current attempt. Returns the OK response (the caller owns its
 * body: read it to the end or `releaseBody` it), or `null` after falling forward (the caller loops to
 * the next attempt); throws the buyer's own error (4xx relayed, no other key burned) after releasing
 * the request's admissions.
 */
async function callAttempt(
  router: RouterService,
  upstream: UpstreamClient,
  session: RoutingSession,
  path: string,
  body: Json,
  signal: AbortSignal,
): Promise<UpstreamResponse | null> {
  const attempt = session.attempt;
  if (!attempt) throw new DomainError("internal_error", "no attempt");
  const res = await upstream.post(path, attempt.secret, body, { signal });
  if (res.ok) return res.value;
  await onFailure(router, session, res.failure);
  return null;
}

/**
 * An attempt's upstream failure: the buyer's own error (4xx) ends the request and is thrown (no other
 * key burned); anything else falls forward to the next attempt.
 */
async function onFailure(router: RouterService, session: RoutingSession, failure: UpstreamFailure): Promise<void> {
  const c = classifyFailure(failure);
  if (c instanceof DomainError) {
    await router.abort(session, c.code, "request_rejected");
    c.details.supportReference = session.supportReference;
    throw c;
  }
  await router.fallForward(session, c);
}

/** A request that failed: end it without a charge (idempotent) and tag the error with its support reference. */
async function endOnError(router: RouterService, session: RoutingSession, e: unknown): Promise<void> {
  if (!session.done) await router.abort(session, e instanceof DomainError ? e.code : "internal_error");
  if (e instanceof DomainError) e.details.supportReference ??= session.supportReference;
}

/**
 * The buffered attempt loop shared by chat and Responses: per attempt, an upstream call (the buyer
 * leaving or `UPSTREAM_TIMEOUT_MS` aborts it); an unreadable answer, one `refuse` names, or one
 * without usage falls forward; the first good answer is settled on its usage and returned with the
 * settlement. On any error the request is ended without a charge (its admissions released) and the
 * thrown DomainError carries the support reference.
 */
export async function runBuffered(
  router: RouterService,
  upstream: UpstreamClient,
  session: RoutingSession,
  o: { path: string; body: () => Json; signal: AbortSignal; refuse?: (answer: Json) => string | undefined },
): Promise<{ answer: Json; settled: Settled }> {
  try {
    for (;;) {
      const attempt = session.attempt;
      if (!attempt) throw new DomainError("internal_error", "no attempt");
      // the buyer leaving or UPSTREAM_TIMEOUT_MS cancels the call (its timer dies with the answer)
      const res = await upstream.postJson(o.path, attempt.secret, o.body(), {
        signal: o.signal,
        timeoutMs: UPSTREAM_TIMEOUT_MS,
      });
      if (o.signal.aborted) {
        await router.abort(session, "client_closed");
        throw new DomainError("invalid_request", "client closed the request");
      }
      if (!res.ok && res.failure.kind !== "invalid_response") {
        await onFailure(router, session, res.failure);
        continue;
      }
      const parsed = res.ok ? res.value.json : undefined;
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        // an unreadable answer falls forward like any upstream fault
        await router.fallForward(session, { kind: "retryable", detail: "invalid JSON from upstream" });
        continue;
      }
      const answer = parsed as Json;
      const refused = o.refuse?.(answer);
      const usage = usageOf(answer.usage);
      if (refused || !usage) {
        await router.fallForward(session, { kind: "retryable", detail: refused ?? "upstream answer without usage" });
        continue;
      }
      router.markFirstByte(session);
      return { answer, settled: await router.settle(session, usage) };
    }
  } catch (e) {
    await endOnError(router, session, e);
    throw e;
  }
}

/**
 * The streaming attempt loop shared by chat and Responses: per attempt, an upstream call that the
 * buyer leaving or a silent first-content timer aborts; fall-forward until a relay finishes; errors
 * before the stream starts are thrown (the transport answers JSON), after it in-band.
 */
export async function runStream(
  router: RouterService,
  upstream: UpstreamClient,
  session: RoutingSession,
  sink: StreamSink,
  o: {
    path: string;
    body: Json;
    /** reads the body through `relay.pump` (which releases it on every path) */
    relay: (relay: StreamRelay) => Promise<"retry" | "done">;
    /** the in-band frame for an error after the stream started */
    errorFrame: (e: unknown) => string;
  },
): Promise<void> {
  let started = false;
  try {
    for (;;) {
      const upstreamAbort = new AbortController();
      const onBuyerGone = () => upstreamAbort.abort();
      sink.signal.addEventListener("abort", onBuyerGone, { once: true });
      const firstTimer = setTimeout(() => upstreamAbort.abort(), FIRST_CONTENT_TIMEOUT_MS);
      try {
        const value = await callAttempt(router, upstream, session, o.path, o.body, upstreamAbort.signal);
        if (sink.closed) {
          if (value) releaseBody(value.body);
          await router.abort(session, "client_closed");
          return;
        }
        if (!value) continue;
        if (value.status === 204 || value.status === 205) {
          // null-body statuses (what fetch reported as no body)
          releaseBody(value.body, true);
          await router.fallForward(session, { kind: "retryable", detail: "empty upstream stream" });
          continue;
        }
        let outcome: "retry" | "done";
        try {
          outcome = await o.relay(
            new StreamRelay(router, session, sink, value.body, upstreamAbort, firstTimer, () => {
              started = true;
            }),
          );
        } catch (e) {
          releaseBody(value.body); // backstop (no-op when the relay already read or released it)
          throw e;
        }
        if (outcome === "retry") continue;
        return;
      } finally {
        clearTimeout(firstTimer);
        sink.signal.removeEventListener("abort", onBuyerGone);
      }
    }
  } catch (e) {
    await endOnError(router, session, e);
    if (!started) throw e;
    logger.error({ err: e, requestId: session.requestId, path: o.path }, "stream failed after start");
    if (!sink.closed) {
      sink.write(o.errorFrame(e));
      sink.end();
    }
  }
}

export function costHeaders(s: Settled, session: RoutingSession): Record<string, string> {
  return {
    "X-Svc-Request-Id": s.requestId,
    "X-Svc-Support-Reference": s.supportReference,
    "X-Svc-Cost-Usdc": formatDecimal6(s.costMicroUsdc),
    "X-Svc-Clearing-Price-Cents": String(s.clearingPriceCents),
    "X-Balance-Remaining": formatDecimal6(s.balanceRemainingMicroUsdc),
    "Server-Timing": serverTiming(session),
  };
}

/**
 * Chat completions over the router: the OpenAI-compatible request goes upstream with the admitted
 * completion cap and stream usage always on; failures fall forward before anything reaches the
 * buyer; the completion is settled before the buyer sees its cost.
 */
export class ChatService {
  constructor(
    private readonly router: RouterService,
    private readonly upstream: UpstreamClient,
  ) {}

  private upstreamBody(body: Json, session: RoutingSession, stream: boolean): Json {
    const {
      model: _m,
      max_tokens: _mt,
      max_completion_tokens: _mct,
      stream_options,
      user: _u,
      store: _s,
      metadata: _md,
      ...rest
    } = body;
    const out: Json = {
      ...rest,
      model: session.model.id,
      max_completion_tokens: session.plan.admittedMaxTokens,
      stream,
    };
    if (stream) out.stream_options = { ...((stream_options as Json | undefined) ?? {}), include_usage: true };
    out.venice_parameters = {
      include_venice_system_prompt: false,
      ...((rest.venice_parameters as Json | undefined) ?? {}),
    };
    return out;
  }

  private open(caller: Caller, req: ChatRequest, stream: boolean): Promise<RoutingSession> {
    return this.router.open({
      ...caller,
      route: "chat",
      model: bareModelId(req.model),
      stream,
      promptEstimate: estimatePromptTokens(req.messages, req.messages.length),
      requestedMaxTokens: req.maxTokens,
    });
  }

  /** Buffered chat: settles, then returns the completion and the cost headers. */
  async buffered(caller: Caller, raw: unknown, signal: AbortSignal): Promise<BufferedResult> {
    const req = parseChatBody(raw);
    const session = await this.open(caller, req, false);
    const { answer, settled } = await runBuffered(this.router, this.upstream, session, {
      path: "/chat/completions",
      body: () => this.upstreamBody(req.body, session, false),
      signal,
    });
    const { cost: _c, venice_parameters: _vp, prompt_logprobs: _pl, ...body } = answer;
    return { body, headers: costHeaders(settled, session) };
  }

  /**
   * Streaming chat (SPEC "Events" / Chat SSE): content is relayed as it arrives; the final usage chunk
   * and [DONE] are withheld until settlement commits, with the `svc.cost` frame between them. A stream
   * that ends without usage (truncation or the buyer leaving) is billed on estimated usage, capped at
   * the admitted max_tokens and the supplier's pre-call balance, then `stream_incomplete`, no [DONE].
   * Errors before the stream starts are thrown (the transport answers with JSON).
   */
  async stream(caller: Caller, raw: unknown, sink: StreamSink): Promise<void> {
    const req = parseChatBody(raw);
    const session = await this.open(caller, req, true);
    await runStream(this.router, this.upstream, session, sink, {
      path: "/chat/completions",
      body: this.upstreamBody(req.body, session, true),
      relay: (relay) => this.relay(session, req.messages, sink, relay),
      errorFrame: (e) =>
        `data: ${JSON.stringify({ error: { code: e instanceof DomainError ? e.code : "internal_error", message: (e as Error).message } })}\n\n`,
    });
  }

  /**
   * Relays one upstream stream. Returns "retry" when it failed before any content (fall forward),
   * "done" when the buyer's stream was finished (settled, incomplete, or settlement failure in-band).
   */
  private async relay(
    session: RoutingSession,
    messages: unknown[],
    sink: StreamSink,
    relay: StreamRelay,
  ): Promise<"retry" | "done"> {
    let usageChunk: Json | undefined;
    let relayedChars = 0;
    let lastChunk: Json | undefined;
    const verdict = await relay.pump(async (frame) => {
      if (frame.data === "[DONE]") return "finished";
      let chunk: Json;
      try {
        chunk = JSON.parse(frame.data) as Json;
      } catch {
        return;
      }
      if (chunk.error !== undefined) {
        // after content: treated as a truncated stream
        return relay.committed ? "stop" : relay.failBeforeContent("in-band upstream error before content");
      }
      const choices = Array.isArray(chunk.choices) ? (chunk.choices as Json[]) : [];
      if (chunk.usage && choices.length === 0) {
        usageChunk = chunk;
        return;
      }
      lastChunk = chunk;
      // relayed as the upstream sent it unless it carries the provider's own fields (one data line)
      const text =
        chunk.cost === undefined && chunk.venice_parameters === undefined && !frame.data.includes("\n")
          ? `data: ${frame.data}\n\n`
          : `data: ${JSON.stringify(withoutProviderFields(chunk))}\n\n`;
      const delta = (choices[0]?.delta ?? {}) as Json;
      const hasContent =
        (typeof delta.content === "string" && delta.content.length > 0) ||
        (typeof delta.reasoning_content === "string" && delta.reasoning_content.length > 0) ||
        Array.isArray(delta.tool_calls) ||
        (choices[0]?.finish_reason !== null && choices[0]?.finish_reason !== undefined);
      relayedChars +=
        (typeof delta.content === "string" ? delta.content.length : 0) +
        (typeof delta.reasoning_content === "string" ? delta.reasoning_content.length : 0);
      relay.emit(text, hasContent);
    });
    if (verdict === "retry") return "retry";
    if (!relay.committed) return relay.closeBeforeContent();

    const usage = verdict === "finished" && usageChunk ? usageOf(usageChunk.usage) : undefined;
    if (usage) {
      let settled: Settled;
      try {
        settled = await this.router.settle(session, usage);
      } catch (e) {
        const code = e instanceof DomainError ? e.code : "settle_failed";
        if (!sink.closed) {
          sink.write(
            `data: ${JSON.stringify({ error: { code, message: (e as Error).message, supportReference: session.supportReference } })}\n\n`,
          );
          sink.end();
        }
        return "done";
      }
      if (!sink.closed) {
        sink.write(`data: ${JSON.stringify(withoutProviderFields(usageChunk ?? {}))}\n\n`);
        sink.write(`data: ${JSON.stringify(this.costFrame(lastChunk ?? usageChunk ?? {}, settled))}\n\n`);
        sink.write("data: [DONE]\n\n");
        sink.end();
      }
      return "done";
    }

    // truncated, errored after content, or the buyer left: bill the estimate (SPEC Events 6)
    const estimated: Usage = {
      promptTokens: Math.min(approxPromptTokens(messages), session.plan.promptEstimate),
      completionTokens: Math.min(Math.ceil(relayedChars / 4), session.plan.admittedMaxTokens),
    };
    try {
      const settled = await this.router.settle(session, estimated, { incomplete: true });
      if (!sink.closed) {
        sink.write(`data: ${JSON.stringify(this.costFrame(lastChunk ?? {}, settled))}\n\n`);
        sink.write(
          `data: ${JSON.stringify({ error: { code: "stream_incomplete", message: "The stream ended before its final usage chunk; billed on estimated usage.", supportReference: session.supportReference } })}\n\n`,
        );
        sink.end();
      }
    } catch (e) {
      if (!sink.closed) {
        sink.write(
          `data: ${JSON.stringify({ error: { code: e instanceof DomainError ? e.code : "settle_failed", message: (e as Error).message, supportReference: session.supportReference } })}\n\n`,
        );
        sink.end();
      }
    }
    return "done";
  }

  /** `svc.cost`: chunk-shaped (choices: []) so OpenAI SDKs pass it through. */
  private costFrame(like: Json, s: Settled): Json {
    return {
      id: like.id ?? `chatcmpl-${s.requestId}`,
      object: "svc.cost",
      created: like.created ?? Math.floor(Date.now() / 1000),
      model: like.model,
      choices: [],
      costUsdc: formatDecimal6(s.costMicroUsdc),
      clearingPriceCents: s.clearingPriceCents,
      supportReference: s.supportReference,
    };
  }
}
