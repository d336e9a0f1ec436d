import { maxBig } from "../../lib/money.js";

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
 * THE burn of an answer the provider flagged (a content-policy answer, docs/decisions.md "Venice as
 * documented: cache writes and content-policy answers"): what it took from the supplier's key for
 * it — the key's balance before the call as the upstream reported it (`x-venice-balance-diem`) less
 * its balance read after the answer (`GET /api_keys/rate_limits`), never below 0. Null when either
 * is unknown (nothing can be shown to have been burned). The caller caps it at the admitted maximum,
 * which also bounds what other calls on the key may have burned in between.
 */
export function burnedOnKey(beforeMicroDiem: bigint | null, afterMicroDiem: bigint | null): bigint | null {
  if (beforeMicroDiem === null || afterMicroDiem === null) return null;
  return maxBig(beforeMicroDiem - afterMicroDiem, 0n);
}
