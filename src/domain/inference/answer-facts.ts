import type { InferenceSession, RequestTiming, Settled } from "./session.js";

type Json = Record<string, unknown>;

/**
 * What the upstream said about an answer besides the usage it is billed on: its id, the model that
 * answered, why it stopped, the token breakdowns of its usage, and (a stream) how soon its first
 * chunk came — each only when the upstream reported it. Read for the attempt's span only
 * (pipeline-trace.ts, the GenAI conventions' `gen_ai.response.*` and `gen_ai.usage.*` details): never
 * billed on, never shown to the buyer, never prompt or answer text.
 */
export interface AnswerFacts {
  /** the upstream's id of the answer (`chatcmpl-…`, `resp_…`) */
  id?: string | undefined;
  /** the model that answered, as the upstream named it */
  model?: string | undefined;
  /** per choice (chat), or the Responses status / incomplete reason */
  finishReasons?: string[] | undefined;
  /** prompt tokens read from the provider's cache (`cached_tokens`) */
  cacheReadTokens?: number | undefined;
  /** prompt tokens written to the provider's cache (`cache_creation_input_tokens`) */
  cacheCreationTokens?: number | undefined;
  /** completion tokens spent reasoning (`reasoning_tokens`) */
  reasoningTokens?: number | undefined;
  /** seconds from issuing the upstream call to the first chunk of its stream */
  timeToFirstChunkSeconds?: number | undefined;
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function text(v: unknown): string | undefined {
  return typeof v === "string" && v.length > 0 ? v : undefined;
}

function count(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined;
}

/**
 * The token breakdowns of an upstream usage object, both shapes: chat (`prompt_tokens_details`,
 * `completion_tokens_details`) and Responses (`input_tokens_details`, `output_tokens_details`); a
 * `cache_creation_input_tokens` at the top level (Anthropic's shape) is read too. A breakdown the
 * upstream did not send stays undefined (not 0).
 */
export function usageDetailsOf(
  u: unknown,
): Pick<AnswerFacts, "cacheReadTokens" | "cacheCreationTokens" | "reasoningTokens"> {
  if (!isObject(u)) return {};
  const prompt = u.prompt_tokens_details ?? u.input_tokens_details;
  const completion = u.completion_tokens_details ?? u.output_tokens_details;
  const p = isObject(prompt) ? prompt : {};
  const c = isObject(completion) ? completion : {};
  return {
    cacheReadTokens: count(p.cached_tokens),
    cacheCreationTokens: count(p.cache_creation_input_tokens) ?? count(u.cache_creation_input_tokens),
    reasoningTokens: count(c.reasoning_tokens),
  };
}

/** Responses statuses that end a response (`in_progress`, `queued` do not). */
const RESPONSES_ENDED = new Set(["completed", "incomplete", "failed", "cancelled"]);

/**
 * Why an answer stopped: chat's `choices[].finish_reason` (one per choice, in choice order); a
 * Responses object's `incomplete_details.reason` when incomplete, else its final status.
 */
export function finishReasonsOf(answer: Json): string[] | undefined {
  if (Array.isArray(answer.choices)) {
    const reasons = (answer.choices as unknown[])
      .map((c) => (isObject(c) ? text(c.finish_reason) : undefined))
      .filter((r): r is string => r !== undefined);
    return reasons.length > 0 ? reasons : undefined;
  }
  const status = text(answer.status);
  if (status === undefined || !RESPONSES_ENDED.has(status)) return undefined;
  const incomplete = isObject(answer.incomplete_details) ? text(answer.incomplete_details.reason) : undefined;
  return [status === "incomplete" ? (incomplete ?? status) : status];
}

/** The facts of an upstream answer object (a chat completion, a Responses object, an image answer). */
export function answerFacts(answer: Json): AnswerFacts {
  return {
    id: text(answer.id),
    model: text(answer.model),
    finishReasons: finishReasonsOf(answer),
    ...usageDetailsOf(answer.usage),
  };
}

/**
 * Where the service spent a request's time so far, in ms: `admitMs` (gates, plan, escrow),
 * `upstreamMs` (to the answer or the first content, fall-forwards included), `settleMs` (the
 * commit). A phase not reached yet is absent (a stream starts before its settlement).
 */
export type PhaseTimings = Omit<RequestTiming, "start">;

/**
 * What the start of a buyer's stream says besides its frames: the request's ids and where its time
 * went so far. Data, not headers: the transport renders it (REST: the stream's response headers).
 * JSON-safe: a paid stream's start is recorded as it is for its payment's duplicates.
 */
export interface StreamStartFacts {
  requestId: string;
  supportReference: string;
  timing: PhaseTimings;
}

/**
 * What a settled answer says besides its body: what it cost, at which price, what the payer has
 * left, and the request's ids and timings. Data, not headers: REST renders it as the cost headers
 * (http/answer-headers.ts), MCP as the paid tools' fields.
 */
export interface CostFacts extends StreamStartFacts {
  costMicroUsdc: bigint;
  clearingPriceCents: number;
  /** the payer's confirmed USDC after settlement; null when a payment, not a balance, paid */
  balanceRemainingMicroUsdc: bigint | null;
  /** why the provider did not charge for a delivered answer */
  uncharged?: string | undefined;
  /** why the provider flagged a delivered answer it charged for */
  flagged?: string | undefined;
}

/** The session's phase timings now (a copy: the session's keep running). */
export function phaseTimings(session: Pick<InferenceSession, "timing">): PhaseTimings {
  const { admitMs, upstreamMs, settleMs } = session.timing;
  return {
    ...(admitMs !== undefined ? { admitMs } : {}),
    ...(upstreamMs !== undefined ? { upstreamMs } : {}),
    ...(settleMs !== undefined ? { settleMs } : {}),
  };
}

/** A stream's start, as the buyer is told it when its first content commits it. */
export function streamStartFacts(session: InferenceSession): StreamStartFacts {
  return { requestId: session.requestId, supportReference: session.supportReference, timing: phaseTimings(session) };
}

/** A settled answer's facts (SPEC "Inference" response headers, as data). */
export function costFacts(s: Settled, session: InferenceSession): CostFacts {
  return {
    requestId: s.requestId,
    supportReference: s.supportReference,
    timing: phaseTimings(session),
    costMicroUsdc: s.costMicroUsdc,
    clearingPriceCents: s.clearingPriceCents,
    balanceRemainingMicroUsdc: s.balanceRemainingMicroUsdc,
    ...(s.uncharged ? { uncharged: s.uncharged } : {}),
    ...(s.flagged ? { flagged: s.flagged } : {}),
  };
}
