import { type AnswerFacts, answerFacts } from "../../../../adapters/upstream/answer-facts.js";
import { documentedBody } from "../../../../adapters/upstream/reference.js";
import { type ChatRequest, type Json, parseChatRequest } from "../../../../contract/inference.js";
import { DomainError } from "../../../../lib/errors.js";
import { formatDecimal6 } from "../../../../lib/money.js";
import { dataFrame, errorFrame } from "../../../../lib/sse.js";
import { textPricer, textPromptEstimate } from "../../pipeline/admission.js";
import type { InferenceModality } from "../../pipeline/endpoint.js";
import type { InferenceSession, Settled } from "../../pipeline/session.js";
import type { StreamRelay, StreamRenderer } from "../../pipeline/stream-relay.js";
import {
  approxDefinitionTokens,
  approxItemTokens,
  paymentFields,
  usageOf,
  usageWithCost,
} from "../../settlement/usage.js";

export type { ChatRequest };

/** A chunk without the provider's own fields (`cost`, `venice_parameters`), which buyers never see. */
function withoutProviderFields(chunk: Json): Json {
  const { cost: _c, venice_parameters: _v, ...clean } = chunk;
  return clean;
}

/** `svc.cost`: chunk-shaped (choices: []) so OpenAI SDKs pass it through. */
function costFrame(like: Json, s: Settled, createdAt: Date): Json {
  return {
    id: like.id ?? `chatcmpl-${s.requestId}`,
    object: "svc.cost",
    created: like.created ?? Math.floor(createdAt.getTime() / 1000),
    model: like.model,
    choices: [],
    costUsdc: formatDecimal6(s.costMicroUsdc),
    clearingPriceCents: s.clearingPriceCents,
    supportReference: s.supportReference,
    ...paymentFields(s),
  };
}

/**
 * Chat SSE (SPEC "Events" Chat SSE): content chunks relayed as they arrive; the final usage chunk
 * and [DONE] withheld until settlement commits, with the `svc.cost` frame between them. A stream
 * that ends without usage is billed on estimated usage, then `svc.cost` and `stream_incomplete`,
 * no [DONE].
 */
class ChatStream implements StreamRenderer {
  readonly emptyAnswerIsResult = false;
  private usageChunk: Json | undefined;
  private lastChunk: Json | undefined;
  private relayedChars = 0;
  /** each choice's finish_reason as its chunk carried it (by choice index) */
  private finishReasons: string[] = [];

  constructor(
    private readonly req: ChatRequest,
    private readonly session: InferenceSession,
  ) {}

  async relayAttempt(relay: StreamRelay) {
    this.usageChunk = undefined;
    this.lastChunk = undefined;
    this.relayedChars = 0;
    this.finishReasons = [];
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
        this.usageChunk = chunk;
        return;
      }
      this.lastChunk = chunk;
      // relayed as the upstream sent it unless it carries the provider's own fields (one data line)
      const text =
        chunk.cost === undefined && chunk.venice_parameters === undefined && !frame.data.includes("\n")
          ? `data: ${frame.data}\n\n`
          : dataFrame(withoutProviderFields(chunk));
      for (const c of choices) {
        if (typeof c?.finish_reason === "string")
          this.finishReasons[typeof c.index === "number" ? c.index : 0] = c.finish_reason;
      }
      const delta = (choices[0]?.delta ?? {}) as Json;
      const hasContent =
        (typeof delta.content === "string" && delta.content.length > 0) ||
        (typeof delta.reasoning_content === "string" && delta.reasoning_content.length > 0) ||
        Array.isArray(delta.tool_calls) ||
        (choices[0]?.finish_reason !== null && choices[0]?.finish_reason !== undefined);
      this.relayedChars +=
        (typeof delta.content === "string" ? delta.content.length : 0) +
        (typeof delta.reasoning_content === "string" ? delta.reasoning_content.length : 0);
      relay.emit(text, hasContent);
    });
    const usageChunk = this.usageChunk as Json | undefined; // set by the frames above
    return { verdict, usage: verdict === "finished" && usageChunk ? usageOf(usageChunk.usage) : undefined };
  }

  answerFacts(): AnswerFacts {
    const like = this.usageChunk ?? this.lastChunk ?? {};
    const reasons = this.finishReasons.filter((r) => r !== undefined);
    return {
      ...answerFacts({ id: like.id, model: like.model, usage: this.usageChunk?.usage }),
      finishReasons: reasons.length > 0 ? reasons : undefined,
    };
  }

  incomplete() {
    let approxPromptTokens = 0;
    for (const m of this.req.messages) approxPromptTokens += approxItemTokens(JSON.stringify(m?.content ?? "").length);
    approxPromptTokens += approxDefinitionTokens(chatDefinitions(this.req));
    return { approxPromptTokens, relayedChars: this.relayedChars };
  }

  completedFrames(settled: Settled): string {
    const usage = this.usageChunk ?? {};
    return (
      dataFrame({ ...withoutProviderFields(usage), usage: usageWithCost(usage.usage, settled) }) +
      dataFrame(costFrame(this.lastChunk ?? usage, settled, this.session.startedAt)) +
      "data: [DONE]\n\n"
    );
  }

  incompleteFrames(settled: Settled): string {
    return (
      dataFrame(costFrame(this.lastChunk ?? {}, settled, this.session.startedAt)) +
      errorFrame(
        "stream_incomplete",
        "The stream ended before its final usage chunk; billed on estimated usage.",
        this.session.supportReference,
      )
    );
  }

  /** A settlement that did not commit (`settle_failed`) or any failure after the stream started. */
  errorFrame(e: unknown): string {
    const ref = this.session.supportReference;
    return e instanceof DomainError
      ? errorFrame(e.code, e.message, ref)
      : errorFrame("internal_error", "The request failed after the stream started.", ref);
  }
}

/** What a chat request sends beside its messages that the provider bills as prompt. */
function chatDefinitions(req: ChatRequest): Record<string, unknown> {
  return { tools: req.body.tools, tool_choice: req.body.tool_choice, response_format: req.body.response_format };
}

/** The admission estimate of a chat request: its messages and its definitions (`textPromptEstimate`). */
export function chatPromptEstimate(req: ChatRequest): number {
  return textPromptEstimate(req.messages, req.messages.length, chatDefinitions(req));
}

/**
 * Chat completions (SPEC "Inference" POST /v1/chat/completions) as a modality: the fields of the
 * OpenAI-compatible body that the upstream documents go upstream with the admitted completion cap,
 * stream usage always on, and the provider's system prompt off; priced by tokens × the catalog's rates.
 */
export const chatModality: InferenceModality<ChatRequest> = {
  route: "chat",
  modality: "text",
  path: "/chat/completions",
  parse: parseChatRequest,
  price: (req, model) => textPricer(model, chatPromptEstimate(req), req.maxTokens),
  upstreamBody(req, session, stream) {
    // only what the reference documents (undocumented fields dropped); `fallbacks` is refused by the
    // contract, so here it is at most an empty list
    const {
      model: _m,
      max_tokens: _mt,
      max_completion_tokens: _mct,
      stream_options,
      user: _u,
      store: _s,
      metadata: _md,
      fallbacks: _f,
      ...rest
    } = documentedBody("/chat/completions", req.body);
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
  },
  meter: (answer) => usageOf(answer.usage) ?? { refused: "upstream answer without usage" },
  answer(answer, _req, _session, settled) {
    const { cost: _c, venice_parameters: _vp, prompt_logprobs: _pl, ...body } = answer;
    return { ...body, usage: usageWithCost(body.usage, settled) };
  },
  renderer: (req, session) => new ChatStream(req, session),
};
