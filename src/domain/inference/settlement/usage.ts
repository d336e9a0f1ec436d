import { formatDecimal6, maxBig, minBig } from "../../../lib/money.js";
import type { AdmissionPlan, PreCallBalance, Settled, Usage } from "../pipeline/session.js";

type Json = Record<string, unknown>;

/** Characters per token of the rough upstream-like count used to bill a stream without usage. */
const CHARS_PER_TOKEN = 4;
/** Per-item overhead of that count (role, separators). */
const ITEM_TOKENS = 4;

/**
 * Upstream usage → pipeline usage, for both shapes (chat `prompt_tokens`/`completion_tokens`,
 * Responses `input_tokens`/`output_tokens`, with their `…_details`: `cached_tokens`, the cache
 * reads, and `cache_creation_input_tokens`, the cache writes, both part of the prompt). Cache reads
 * are at most the prompt, cache writes at most what is left of it (as the upstream bills them).
 * Anything that is not a finite non-negative count is no usage at all (the answer falls forward,
 * never a bad charge); an unreadable cache count is 0.
 */
export function usageOf(u: unknown): Usage | undefined {
  if (typeof u !== "object" || u === null) return undefined;
  const x = u as Json;
  const prompt = x.prompt_tokens ?? x.input_tokens;
  const completion = x.completion_tokens ?? x.output_tokens;
  const count = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0;
  if (!count(prompt) || !count(completion)) return undefined;
  const details = (x.prompt_tokens_details ?? x.input_tokens_details) as Json | null | undefined;
  const detail = (key: string): number => {
    const v = typeof details === "object" && details !== null ? details[key] : undefined;
    return count(v) ? Math.floor(v) : 0;
  };
  const promptTokens = Math.floor(prompt);
  const cachedTokens = Math.min(detail("cached_tokens"), promptTokens);
  const cacheWriteTokens = Math.min(detail("cache_creation_input_tokens"), promptTokens - cachedTokens);
  return {
    promptTokens,
    completionTokens: Math.floor(completion),
    cachedTokens,
    ...(cacheWriteTokens > 0 ? { cacheWriteTokens } : {}),
  };
}

/**
 * How a pay-per-request charge was settled, where a stream's cost frame says it:
 * `payment: {status, amountUsdc, transaction, paymentResponse}` (`settled`, or `reconciling` while
 * the chain decides; `paymentResponse` is the x402 `PAYMENT-RESPONSE` value, the headers having left
 * before the settle). Nothing for a request paid from the balance.
 */
export function paymentFields(s: Settled): Json {
  const p = s.payment;
  if (!p) return {};
  return {
    payment: {
      status: p.status,
      amountUsdc: formatDecimal6(p.amountMicroUsdc),
      transaction: p.transaction,
      paymentResponse: p.header.value,
    },
  };
}

/**
 * THE cost where OpenAI-compatible tooling reads it (OpenRouter's `usage.cost`): the answer's `usage`
 * object plus `cost` (USD, the charged amount as a JSON number — the same figure as
 * `X-Svc-Cost-Usdc`, which stays the exact one) and `cost_details` (`cost_usdc`, that amount as the
 * exact six-decimal string; `clearing_price_cents`; `upstream_burn_diem`, six decimals;
 * `cached_tokens` and `cache_write_tokens`, the prompt tokens the burn priced at the cache-read and
 * cache-write rates). A `usage` that is not an object is left as it is (nothing to attach the cost to).
 */
export function usageWithCost(usage: unknown, s: Settled): unknown {
  if (typeof usage !== "object" || usage === null || Array.isArray(usage)) return usage;
  const costUsdc = formatDecimal6(s.costMicroUsdc);
  return {
    ...(usage as Json),
    // presentation only: a six-decimal string read as a number round-trips to the same string
    cost: Number(costUsdc),
    cost_details: {
      cost_usdc: costUsdc,
      clearing_price_cents: s.clearingPriceCents,
      upstream_burn_diem: formatDecimal6(s.burnMicroDiem),
      cached_tokens: s.cachedTokens ?? 0,
      cache_write_tokens: s.cacheWriteTokens ?? 0,
    },
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

/** The definitions' share of a rough prompt count (tools, a tool choice, a response format): chars / 4. */
export function approxDefinitionTokens(definitions: Record<string, unknown>): number {
  let chars = 0;
  for (const v of Object.values(definitions)) if (v !== undefined && v !== null) chars += JSON.stringify(v).length;
  return Math.ceil(chars / CHARS_PER_TOKEN);
}

/**
 * THE bill of a stream that ended without its usage (SPEC "Events" Chat SSE 6 `stream_incomplete`,
 * Responses SSE 4 `response.incomplete`), every cap in one place:
 * - usage: the rough prompt count, never above the admission's generous estimate; the relayed
 *   characters / 4, never above the admitted max_tokens;
 * - burn: that usage's price, never above the admitted maximum burn, nor above the supplier's
 *   pre-call balance — the balance the upstream reported on the attempt (else the last known one)
 *   less what the other requests in flight on the key may burn (their admitted maxima), never below 0.
 *   No known balance at all: no balance cap (the upstream reports none, so nothing can bound it).
 */
export function billIncomplete(
  plan: Pick<AdmissionPlan, "promptEstimate" | "admittedMaxTokens" | "maxBurnMicroDiem">,
  burnOf: (usage: Usage) => bigint,
  stream: IncompleteStream,
  balance: PreCallBalance,
): { usage: Usage; burnMicroDiem: bigint } {
  const usage: Usage = {
    promptTokens: Math.min(stream.approxPromptTokens, plan.promptEstimate),
    completionTokens: Math.min(Math.ceil(stream.relayedChars / CHARS_PER_TOKEN), plan.admittedMaxTokens),
  };
  let burn = minBig(burnOf(usage), plan.maxBurnMicroDiem);
  const preCall = balance.reportedMicroDiem ?? balance.knownMicroDiem;
  if (preCall !== null) burn = minBig(burn, maxBig(preCall - balance.othersInFlightMicroDiem, 0n));
  return { usage, burnMicroDiem: burn };
}
