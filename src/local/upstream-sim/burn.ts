import type { SimTextPricing } from "./models.js";
import { ceilDiv, numberToMicro } from "./money.js";

/** Token usage as upstream reports it on chat completions (only the fields the burn needs). */
export interface SimUsageInput {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_creation_input_tokens?: number } | null;
}

/** Rates in micro-DIEM per 1M tokens. */
export interface TextRatesMicro {
  inputMicro: bigint;
  outputMicro: bigint;
  cacheInputMicro: bigint;
  cacheWriteMicro: bigint;
}

export interface TextPricingMicro {
  base: TextRatesMicro;
  extended: (TextRatesMicro & { contextTokenThreshold: number }) | null;
}

const TOKENS_PER_PRICE_UNIT = 1_000_000n;

/** Extra DIEM charged per request with Venice web search turned on (≈ $0.01, §1). */
export const WEB_SEARCH_FEE_MICRO_DIEM = 10_000n;
/** `enhance_prompt` on an image: the rewrite the reference says bills extra (about $0.04). */
export const ENHANCE_PROMPT_FEE_MICRO_DIEM = 40_000n;

const cache = new WeakMap<SimTextPricing, TextPricingMicro>();

/**
 * Converts catalog pricing (DIEM per 1M tokens, decimal numbers) into exact micro-DIEM rates.
 * Missing `cache_input` / `cache_write` fall back to the input rate (§3 "Computing the DIEM burn").
 */
export function textPricingToMicro(pricing: SimTextPricing): TextPricingMicro {
  const hit = cache.get(pricing);
  if (hit) return hit;
  const inputMicro = numberToMicro(pricing.input.diem);
  const base: TextRatesMicro = {
    inputMicro,
    outputMicro: numberToMicro(pricing.output.diem),
    cacheInputMicro: pricing.cache_input ? numberToMicro(pricing.cache_input.diem) : inputMicro,
    cacheWriteMicro: pricing.cache_write ? numberToMicro(pricing.cache_write.diem) : inputMicro,
  };
  let extended: TextPricingMicro["extended"] = null;
  if (pricing.extended) {
    const ext = pricing.extended;
    const extInput = numberToMicro(ext.input.diem);
    extended = {
      contextTokenThreshold: ext.context_token_threshold,
      inputMicro: extInput,
      outputMicro: numberToMicro(ext.output.diem),
      cacheInputMicro: ext.cache_input ? numberToMicro(ext.cache_input.diem) : extInput,
      cacheWriteMicro: ext.cache_write ? numberToMicro(ext.cache_write.diem) : extInput,
    };
  }
  const result = { base, extended };
  cache.set(pricing, result);
  return result;
}

/**
 * DIEM burn of one text request in micro-DIEM, exact integer arithmetic:
 *
 *   burn = ceil(((prompt − cached − cacheWrite)·input + cached·cache_input + cacheWrite·cache_write
 *                + completion·output) / 1_000_000)
 *
 * with rates in micro-DIEM per 1M tokens; the `extended` rates apply to the whole request when
 * prompt_tokens > extended.context_token_threshold. Returns 0 when the model has no pricing or when
 * no output tokens were produced (upstream does not bill such responses). Chat reports cache
 * writes on request (`[[sim:cache_write=N]]`, also `cache_write_tokens`; the Responses usage
 * documents none); the service prices them the same way (`burnMicroDiem`, src/lib/money.ts).
 */
export function computeBurnMicroDiem(pricing: SimTextPricing | null | undefined, usage: SimUsageInput): bigint {
  if (!pricing) return 0n;
  const completion = Math.max(0, Math.trunc(usage.completion_tokens));
  if (completion === 0) return 0n;
  const prompt = Math.max(0, Math.trunc(usage.prompt_tokens));
  const cached = Math.min(prompt, Math.max(0, Math.trunc(usage.prompt_tokens_details?.cached_tokens ?? 0)));
  const cacheWrite = Math.min(
    prompt - cached,
    Math.max(0, Math.trunc(usage.prompt_tokens_details?.cache_creation_input_tokens ?? 0)),
  );
  const micro = textPricingToMicro(pricing);
  const rates = micro.extended && prompt > micro.extended.contextTokenThreshold ? micro.extended : micro.base;
  const uncached = BigInt(prompt - cached - cacheWrite);
  const total =
    uncached * rates.inputMicro +
    BigInt(cached) * rates.cacheInputMicro +
    BigInt(cacheWrite) * rates.cacheWriteMicro +
    BigInt(completion) * rates.outputMicro;
  return ceilDiv(total, TOKENS_PER_PRICE_UNIT);
}
