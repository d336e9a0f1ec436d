import type { AdmissionPlan, Usage } from "./session.js";

type Json = Record<string, unknown>;

/** Characters per token of the rough upstream-like count used to bill a stream without usage. */
const CHARS_PER_TOKEN = 4;
/** Per-item overhead of that count (role, separators). */
const ITEM_TOKENS = 4;

/**
 * Upstream usage → pipeline usage, for both shapes (chat `prompt_tokens`/`completion_tokens`,
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

/** What a stream that ended without usage showed: a rough prompt count and the characters relayed. */
export interface IncompleteStream {
  /** the modality's upstream-like prompt count (`approxItemTokens` per input item) */
  approxPromptTokens: number;
  /** content characters relayed to the buyer (text, reasoning, arguments) */
  relayedChars: number;
}

/** The rough upstream-like token count of one input item of `chars` characters. */
export function approxItemTokens(chars: number): number {
  return ITEM_TOKENS + Math.ceil(chars / CHARS_PER_TOKEN);
}

/**
 * THE usage estimate of a stream that ended without its usage (SPEC Events: chat `stream_incomplete`,
 * Responses `response.incomplete`): the rough prompt count, never above the admission's generous
 * estimate, and the relayed characters / 4, never above the admitted max_tokens. The pipeline's
 * `settleIncomplete` also caps the burn at the supplier's pre-call balance.
 */
export function estimateIncompleteUsage(
  plan: Pick<AdmissionPlan, "promptEstimate" | "admittedMaxTokens">,
  stream: IncompleteStream,
): Usage {
  return {
    promptTokens: Math.min(stream.approxPromptTokens, plan.promptEstimate),
    completionTokens: Math.min(Math.ceil(stream.relayedChars / CHARS_PER_TOKEN), plan.admittedMaxTokens),
  };
}
