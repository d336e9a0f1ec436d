import { bareModelId } from "../../contract/model-id.js";
import type { MaxPrice, RequestControls } from "../../contract/request-controls.js";
import type { ExactDecimal } from "../../lib/decimal.js";
import { DomainError, type ErrorCode } from "../../lib/errors.js";
import { CENTS_PER_DOLLAR, formatDecimal6, MICRO, maxBig, mulDivCeil, type TextPricing } from "../../lib/money.js";
import { type Caller, capOf, type KeyRules, type RoutableModel } from "./session.js";

/**
 * OpenRouter's request controls acted on (docs/decisions.md "OpenRouter request controls"):
 * `provider.max_price` mapped to a ceiling per model (`maxPriceCeilingCents`, used by
 * `InferencePipeline.open`) and the `models` fallbacks (`modelsToTry`, `eachModel`, used by
 * `InferenceEndpoint`). The contract parses them (src/contract/request-controls.ts).
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

/** The models a request tries, in order: `model`, then `models` (the contract's: catalog ids, each once). */
export function modelsToTry(req: { model: string; controls?: RequestControls | undefined }): string[] {
  const first = bareModelId(req.model);
  return req.controls ? [first, ...req.controls.models] : [first];
}

/**
 * Why the next model is tried: the model cannot be served to this buyer now and nothing reached
 * them — unknown (here or upstream), not live, of another modality, outside the key's models, no
 * offer at the ceiling (max_price mapped for it included) or none deep enough, or every key failed
 * before the first byte. Not: the buyer's own errors, budgets and balance, concurrency limits, a
 * market with nothing posted, a key wait, anything after the first byte.
 */
const NEXT_MODEL: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "model_not_found",
  "model_not_live",
  "unsupported_modality",
  "model_not_allowed",
  "no_eligible_supply",
  "insufficient_routable_at_price",
  "upstream_error",
]);

/** Whether a model's refusal passes the request to its next model (`NEXT_MODEL`). */
export function passesToNextModel(e: unknown): boolean {
  return e instanceof DomainError && NEXT_MODEL.has(e.code);
}

/**
 * Serves a request on each model in turn (`models` fallbacks) until one answers: each is a fresh
 * request (`serve` opens, runs and ends it: everything it held is released before the next model
 * is tried). A model refused for a NEXT_MODEL reason, with the buyer still there, passes to the
 * next; the last model's error (or any other) is thrown, naming the models passed over in
 * `fallbacks`. The request id names one record: the first model that opened one takes the
 * caller's, later ones a fresh id.
 */
export async function eachModel<T>(
  caller: Caller,
  models: readonly string[],
  serve: (caller: Caller, model: string) => Promise<T>,
  buyerGone: () => boolean,
): Promise<T> {
  const passed: { model: string; code: ErrorCode; supportReference?: string }[] = [];
  let who = caller;
  for (let i = 0; ; i++) {
    const model = models[i] as string;
    try {
      return await serve(who, model);
    } catch (e) {
      const next = e instanceof DomainError && NEXT_MODEL.has(e.code) && i + 1 < models.length && !buyerGone();
      if (!(e instanceof DomainError)) throw e;
      const ref = e.details.supportReference;
      if (!next) {
        if (passed.length > 0) e.details.fallbacks = passed;
        throw e;
      }
      passed.push({ model, code: e.code, ...(typeof ref === "string" ? { supportReference: ref } : {}) });
      if (ref !== undefined && who.requestId !== undefined) {
        const { requestId: _taken, ...rest } = who;
        who = rest;
      }
    }
  }
}
