import { formatDecimal6 } from "../../../lib/money.js";
import { errorTypeOf, type SpanAttrs, startSpan, type TraceSpan, tracingOn, withSpan } from "../../../lib/tracing.js";
import type { Answered } from "../routing/lanes.js";
import type { AnswerFacts } from "./answer-facts.js";
import type { Lane } from "./attempt-loop.js";
import type { Attempt, AttemptingSession, InferenceSession, RouteKind, Settled, Usage } from "./session.js";

/**
 * The pipeline's spans (docs/operations.md "Traces"): `admission` around `InferencePipeline.open`,
 * and one CLIENT span per attempt of a request (`InferencePipeline.run`): the upstream call the
 * attempt makes runs with it active (its `traceparent` names it), and it ends with the attempt —
 * on a fall-forward with the reason (`svc.fall_forward.reason`: `retryable`, `supplier_exhausted`,
 * `supplier_auth`, as the `svc_fall_forwards_total` metric counts them), on the answer once it is
 * settled (usage, cost, what the upstream said of its answer), on a refusal with the error code.
 * GenAI semantic conventions (development status, in the `semantic-conventions-genai` registry: the
 * names are written here, not imported; docs/decisions.md "GenAI traces") plus the
 * service's own `svc.*` attributes; never the prompt, the answer or a key. The pipeline asks for
 * them only when tracing is on.
 */

/**
 * A GenAI operation: `gen_ai.operation.name`, and `gen_ai.output.type` when the route's output is
 * one of the conventions' defined values (`text`, `json`, `image`, `speech`; a video has none).
 */
export interface GenAiOperation {
  name: "chat" | "generate_content";
  output?: "text" | "json" | "image" | "speech";
}

/** Chat completions, Responses and Anthropic's Messages are all `chat` producing text. */
export const GENAI_CHAT: GenAiOperation = Object.freeze({ name: "chat", output: "text" });

/** The operation per route (a new route adds its row: Messages is `GENAI_CHAT`). */
const OPERATION: Record<RouteKind, GenAiOperation> = {
  chat: GENAI_CHAT,
  responses: GENAI_CHAT,
  messages: GENAI_CHAT,
  image: { name: "generate_content", output: "image" },
  images_openai: { name: "generate_content", output: "image" },
  video_queue: { name: "generate_content" },
};

/** The GenAI operation of a route's upstream calls. */
export function genAiOperation(route: RouteKind): GenAiOperation {
  return OPERATION[route];
}

/** The upstream provider (`gen_ai.provider.name`): one Venice-compatible API (CONTRACT `UPSTREAM_BASE_URL`). */
const PROVIDER = "venice";

/**
 * The GenAI attributes of a call as it starts: operation, provider, requested model and completion
 * cap; `gen_ai.request.stream` only on a streamed call (the conventions: unset means not streaming).
 */
export function genAiRequestAttributes(
  op: GenAiOperation,
  req: { model: string; maxTokens?: number | undefined; stream: boolean },
): SpanAttrs {
  return {
    "gen_ai.operation.name": op.name,
    "gen_ai.output.type": op.output,
    "gen_ai.provider.name": PROVIDER,
    "gen_ai.request.model": req.model,
    "gen_ai.request.max_tokens": req.maxTokens,
    "gen_ai.request.stream": req.stream ? true : undefined,
  };
}

/**
 * The GenAI attributes of an answer: what the upstream said of it (`facts`: id, model, finish
 * reasons, cache and reasoning breakdowns, a stream's time to first chunk) and the token counts it
 * reported (`usage`; none for a stream billed on an estimate). Each only when known.
 */
export function genAiResponseAttributes(facts: AnswerFacts | undefined, usage: Usage | undefined): SpanAttrs {
  return {
    "gen_ai.response.id": facts?.id,
    "gen_ai.response.model": facts?.model,
    "gen_ai.response.finish_reasons": facts?.finishReasons,
    "gen_ai.response.time_to_first_chunk": facts?.timeToFirstChunkSeconds,
    "gen_ai.usage.input_tokens": usage?.promptTokens,
    "gen_ai.usage.output_tokens": usage?.completionTokens,
    "gen_ai.usage.cache_read.input_tokens": facts?.cacheReadTokens,
    "gen_ai.usage.cache_creation.input_tokens": facts?.cacheCreationTokens,
    "gen_ai.usage.reasoning.output_tokens": facts?.reasoningTokens,
  };
}

type RequestRun<V> = { value: V; settled: Settled };

export class PipelineTracer {
  private readonly server: SpanAttrs;

  constructor(upstreamBaseUrl: string) {
    const u = new URL(upstreamBaseUrl);
    this.server = {
      "server.address": u.hostname,
      "server.port": u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80,
    };
  }

  /** `admit` in the request's `admission` span (off: `admit` alone). */
  admission(
    input: { model: string; route: RouteKind; stream: boolean },
    admit: () => Promise<AttemptingSession>,
  ): Promise<AttemptingSession> {
    if (!tracingOn()) return admit();
    const attrs = { "gen_ai.request.model": input.model, "svc.route": input.route, "svc.stream": input.stream };
    return withSpan("admission", attrs, async (span) => {
      const session = await admit();
      span.set({
        "svc.support_reference": session.supportReference,
        "svc.admitted_price_cents": session.attempt.priceCentsPerDollar,
      });
      return session;
    });
  }

  /**
   * The attempt loop's call and lane, traced: `call(attempt, fn)` runs `fn` in the attempt's span;
   * the lane ends each span as the attempt ends, then does what the request's lane does.
   */
  trace<V, C>(
    session: InferenceSession,
    lane: Lane<Attempt, Answered<V>, C, RequestRun<V>>,
  ): {
    call: <R>(attempt: Attempt, fn: () => Promise<R>) => Promise<R>;
    lane: Lane<Attempt, Answered<V>, C, RequestRun<V>>;
  } {
    const spans = new Map<Attempt, TraceSpan>();
    const op = genAiOperation(session.route);
    const end = (attempt: Attempt, attrs: SpanAttrs, failed?: string) => {
      const span = spans.get(attempt);
      if (!span) return;
      spans.delete(attempt);
      span.set(attrs);
      if (failed !== undefined) span.fail(failed);
      span.end();
    };
    return {
      call: (attempt, fn) => {
        const span = startSpan(
          `${op.name} ${session.model.id}`,
          {
            ...genAiRequestAttributes(op, {
              model: session.model.id,
              maxTokens: session.model.modality === "text" ? session.plan.admittedMaxTokens : undefined,
              stream: session.stream,
            }),
            ...this.server,
            "svc.attempt": attempt.ordinal,
            "svc.clearing_price_cents": attempt.priceCentsPerDollar,
            "svc.offer_id": attempt.offerId,
            "svc.upstream_key_id": attempt.upstreamKeyId,
            "svc.support_reference": session.supportReference,
          },
          { kind: "client" },
        );
        spans.set(attempt, span);
        return span.run(fn);
      },
      lane: {
        finish: async (attempt, answered) => {
          const done = await lane.finish(attempt, answered);
          const { ending } = answered;
          end(attempt, {
            "svc.outcome": ending.kind,
            "svc.uncharged_reason": ending.kind === "uncharged" ? ending.reason : undefined,
            "svc.flagged_reason": ending.kind === "flagged" ? ending.reason : undefined,
            // the provider's own count (an incomplete stream has none: its bill is an estimate)
            ...genAiResponseAttributes(
              answered.facts?.(),
              ending.kind === "settled" && session.model.modality === "text" ? ending.usage : undefined,
            ),
            "svc.cost_usdc": formatDecimal6(done.settled.costMicroUsdc),
            "svc.burn_diem": formatDecimal6(done.settled.burnMicroDiem),
          });
          return done;
        },
        fallForward: (attempt, failure) => {
          end(
            attempt,
            { "svc.fall_forward.reason": failure.kind, "http.response.status_code": failure.status },
            failure.kind,
          );
          return lane.fallForward(attempt, failure);
        },
        reject: (attempt, error) => {
          end(attempt, { "svc.outcome": "rejected" }, error.code);
          return lane.reject(attempt, error);
        },
        lost: (attempt, detail, error) => {
          end(attempt, { "svc.outcome": "lost" }, error.code);
          return lane.lost(attempt, detail, error);
        },
        closed: (attempt, value) => {
          end(attempt, { "svc.outcome": "client_closed" });
          return lane.closed(attempt, value);
        },
        cleanUp: (attempt, e) => {
          end(attempt, {}, errorTypeOf(e));
          return lane.cleanUp(attempt, e);
        },
      },
    };
  }
}
