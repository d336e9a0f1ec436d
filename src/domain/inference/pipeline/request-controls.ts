import type { MaxPrice } from "../../../contract/request-controls.js";
import type { ExactDecimal } from "../../../lib/decimal.js";
import { CENTS_PER_DOLLAR, formatDecimal6, MICRO, maxBig, mulDivCeil, type TextPricing } from "../../../lib/money.js";
import { capOf, type KeyRules, type RoutableModel } from "./session.js";

/**
 * OpenRouter's request controls acted on (docs/decisions.md "OpenRouter request controls"):
 * `provider.max_price` mapped to a ceiling per model (`maxPriceCeilingCents`, used by
 * `InferencePipeline.open`); the `models` fallbacks are the endpoint's (`modelsToTry`, `eachModel`,
 * endpoint.ts). The contract parses them (src/contract/request-controls.ts).
 */

/** The highest ceiling a max_price maps to: above every price the market takes, so it never binds alone. */
const NO_BINDING_CEILING = 100n;

/**
 * The highest rate (micro-DIEM per 1M tokens) a prompt token and a completion token of a model can
 * be billed at: the input rate (or its cache-write rate, when higher) and the output rate, of
 * whichever tier (base or long-context) is higher. A max_price mapped with them holds for every
 * token the request can be billed for.
 */
export function highestRates(pricing: TextPricing): { prompt: bigint; completion: bigint } {
  let prompt = 0n;
  let completion = 0n;
  for (const tier of pricing.extended ? [pricing, pricing.extended] : [pricing]) {
    // the cache-write rate, where the catalog carries one (cache writes are prompt tokens)
    const write = (tier as { cacheWriteMicroPerM?: bigint | null }).cacheWriteMicroPerM ?? 0n;
    prompt = maxBig(prompt, tier.inputMicroPerM, write);
    completion = maxBig(completion, tier.outputMicroPerM);
  }
  return { prompt, completion };
}

/**
 * The ceiling one price bound allows at a rate: the buyer pays P/100 × rate per 1M tokens at a
 * clearing price of P cents per dollar, so P ≤ 100 × max / rate, i.e. (max = units / 10^scale USD,
 * rate in micro-DIEM = USD / 10^6) P = floor(100 × units × 10^6 / (10^scale × rate)). A free token
 * (rate 0) bounds nothing (null).
 */
function ceilingAt(max: ExactDecimal, rateMicro: bigint): bigint | null {
  if (rateMicro <= 0n) return null;
  return (CENTS_PER_DOLLAR * max.units * MICRO) / (10n ** BigInt(max.scale) * rateMicro);
}

/**
 * THE mapping of `provider.max_price` (USD per 1M tokens) for a model to a ceiling in cents per
 * dollar of upstream usage: the lower of floor(100 × prompt / prompt rate) and floor(100 ×
 * completion / completion rate) at the model's highest rates (`highestRates`), at most 100; null
 * when it bounds nothing (neither price sent, or the rates it bounds are zero). Integers throughout.
 */
export function maxPriceCeilingCents(maxPrice: MaxPrice, pricing: TextPricing): number | null {
  const rates = highestRates(pricing);
  let cap: bigint | null = null;
  for (const [max, rate] of [
    [maxPrice.prompt, rates.prompt],
    [maxPrice.completion, rates.completion],
  ] as const) {
    if (max === null) continue;
    const c = ceilingAt(max, rate);
    if (c !== null && (cap === null || c < cap)) cap = c;
  }
  if (cap === null) return null;
  return Number(cap < NO_BINDING_CEILING ? cap : NO_BINDING_CEILING);
}

/**
 * A request's own ceilings for its resolved model: `capCents`, the lowest of the calling key's,
 * `svc.maxPriceCentsPerDollar` and what `provider.max_price` maps to for the model (the effective
 * ceiling is the lower of it and the account's: `effectiveCeiling`), and that mapping alone.
 */
export function requestCaps(
  input: { key?: KeyRules | undefined; maxPriceCents?: number | undefined; maxPrice?: MaxPrice | null | undefined },
  model: Pick<RoutableModel, "pricing">,
): { capCents: number | null; maxPriceCeilingCents: number | null } {
  const mapped = input.maxPrice ? maxPriceCeilingCents(input.maxPrice, model.pricing) : null;
  return {
    capCents: capOf(capOf(input.key?.maxPriceCents, input.maxPriceCents), mapped),
    maxPriceCeilingCents: mapped,
  };
}

/**
 * The max_price (USD per 1M tokens, six decimals, rounded up) that maps to at least `cents` for a
 * model: what a 503 advises sending.
 */
export function maxPriceFor(cents: number, pricing: TextPricing): { prompt: string; completion: string } {
  const rates = highestRates(pricing);
  const usd = (rate: bigint) => formatDecimal6(mulDivCeil(BigInt(cents), rate, CENTS_PER_DOLLAR));
  return { prompt: usd(rates.prompt), completion: usd(rates.completion) };
}
