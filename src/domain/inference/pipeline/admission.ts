import {
  burnMicroDiem,
  grossMicroUsdc,
  MIN_OFFER_PRICE_CENTS,
  minBig,
  type TextPricing,
  worstBurnMicroDiem,
} from "../../../lib/money.js";
import type { AdmissionPlan, BurnPricer, RoutableModel } from "./session.js";

/**
 * Admission arithmetic (pure). A request is admitted with a completion-token cap we send upstream,
 * so its burn can never exceed what was reserved: maxBurn = burn(promptEstimate, admittedMaxTokens),
 * every prompt token at the dearest of the input, cache-read and cache-write rates
 * (`worstBurnMicroDiem`: a cache write may cost more than an uncached token).
 * The prompt estimate is deliberately generous (bytes/3 + 16 per message) so it covers the
 * upstream's own count.
 */
export const PER_MESSAGE_TOKENS = 16;
export const BYTES_PER_TOKEN = 3;
/** Completion cap when neither the buyer nor the catalog gives one. */
export const DEFAULT_MAX_COMPLETION_TOKENS = 4096;
/** Below this many affordable completion tokens a request is refused (402) rather than truncated. */
export const MIN_ADMITTED_TOKENS = 16;

export function estimatePromptTokens(payload: unknown, messages: number): number {
  const bytes = Buffer.byteLength(typeof payload === "string" ? payload : JSON.stringify(payload ?? ""), "utf8");
  return Math.ceil(bytes / BYTES_PER_TOKEN) + PER_MESSAGE_TOKENS * Math.max(1, messages);
}

/**
 * THE prompt estimate of a text request (chat, Responses, Messages): the generous bytes/3 rule over
 * everything that goes upstream as prompt — its messages (or input) and the definitions sent beside
 * them (tools, a tool choice, a response format), which the provider renders into the prompt and
 * bills as prompt tokens — plus 16 per message. The charge is capped at the maximum this estimate
 * admits, so what it leaves out the supplier would pay. Absent or null definitions add nothing.
 */
export function textPromptEstimate(messages: unknown, count: number, definitions: Record<string, unknown>): number {
  const present = Object.entries(definitions).filter(([, v]) => v !== undefined && v !== null);
  return estimatePromptTokens(present.length === 0 ? messages : { messages, ...Object.fromEntries(present) }, count);
}

/** A request not planned yet: nothing admitted. */
export const NO_PLAN: AdmissionPlan = Object.freeze({
  promptEstimate: 0,
  admittedMaxTokens: 0,
  maxBurnMicroDiem: 0n,
  maxChargeMicroUsdc: 0n,
});

/** No balance known yet: plan as if unlimited (the escrow top-up checks the real one atomically). */
export const UNLIMITED_MICRO_USDC = 1n << 62n;
/** Plans per request: a stale cached ceiling or a balance too short for the uncapped plan re-plans. */
export const MAX_PLANS = 4;

/** THE maximum charge of a request: its maximum burn bought at the buyer's ceiling (gross, fee included). */
export function maxChargeFor(maxBurnMicroDiem: bigint, ceilingCents: number): bigint {
  return grossMicroUsdc(maxBurnMicroDiem, ceilingCents);
}

/**
 * When the balance cannot cover a request's full completion cap, the request reserves at most
 * 1/BALANCE_SHARE_DIVISOR of the available balance (the default per-key in-flight limit is 8)…
 */
export const BALANCE_SHARE_DIVISOR = 8n;
/** …or RESERVE_FLOOR_TOKENS completion tokens' worth, when that is more (and affordable). */
export const RESERVE_FLOOR_TOKENS = 1024;

/**
 * The completion cap and the reservation for a request, or `undefined` (402) when the buyer cannot
 * afford even MIN_ADMITTED_TOKENS at the ceiling. The cap is the smallest of what the buyer asked
 * and the model's published cap; when the available balance cannot pay that at the ceiling price,
 * the cap is sized to a share of the balance (`BALANCE_SHARE_DIVISOR`, `RESERVE_FLOOR_TOKENS`), so
 * one unbounded request never reserves the whole balance and concurrent ones are not refused.
 */
export function planAdmission(input: {
  pricing: TextPricing;
  promptEstimate: number;
  requestedMaxTokens: number | undefined;
  modelMaxCompletionTokens: number | null;
  ceilingCents: number;
  availableMicroUsdc: bigint;
}): AdmissionPlan | undefined {
  const cap = Math.min(
    input.requestedMaxTokens ?? Number.POSITIVE_INFINITY,
    input.modelMaxCompletionTokens ?? DEFAULT_MAX_COMPLETION_TOKENS,
  );
  const charge = (tokens: number) =>
    maxChargeFor(
      worstBurnMicroDiem(input.pricing, { promptTokens: input.promptEstimate, completionTokens: tokens }),
      input.ceilingCents,
    );
  let admitted = cap;
  if (charge(admitted) > input.availableMicroUsdc) {
    // the balance binds: 402 only when not even the floor is affordable
    const floor = Math.min(MIN_ADMITTED_TOKENS, cap);
    if (charge(floor) > input.availableMicroUsdc) return undefined;
    // an unbounded request must not take the whole balance: it reserves a share of what is
    // available (or a useful completion's worth, when that is more), so the buyer's concurrent
    // requests still fit; the cap sent upstream is sized to it, so no charge can exceed it
    const share = input.availableMicroUsdc / BALANCE_SHARE_DIVISOR;
    const useful = charge(Math.min(cap, RESERVE_FLOOR_TOKENS));
    const budget = minBig(input.availableMicroUsdc, share > useful ? share : useful);
    // largest cap within the budget by binary search (charge is monotone in tokens)
    let lo = floor;
    let hi = cap;
    while (lo < hi) {
      const mid = Math.floor((lo + hi + 1) / 2);
      if (charge(mid) <= budget) lo = mid;
      else hi = mid - 1;
    }
    admitted = lo;
  }
  const maxBurnMicroDiem = worstBurnMicroDiem(input.pricing, {
    promptTokens: input.promptEstimate,
    completionTokens: admitted,
  });
  return {
    promptEstimate: input.promptEstimate,
    admittedMaxTokens: admitted,
    maxBurnMicroDiem,
    maxChargeMicroUsdc: maxChargeFor(maxBurnMicroDiem, input.ceilingCents),
  };
}

/**
 * Text price rules: the maximum is the prompt estimate plus the admitted completion cap at the
 * catalog's token rates (`planAdmission`); the actual burn is the upstream's usage at the same rates.
 */
export function textPricer(
  model: Pick<RoutableModel, "pricing" | "maxCompletionTokens">,
  promptEstimate: number,
  requestedMaxTokens: number | undefined,
): BurnPricer {
  return {
    plan: (ceilingCents, availableMicroUsdc) =>
      planAdmission({
        pricing: model.pricing,
        promptEstimate,
        requestedMaxTokens,
        modelMaxCompletionTokens: model.maxCompletionTokens,
        ceilingCents,
        availableMicroUsdc,
      }),
    burn: (usage) => burnMicroDiem(model.pricing, usage),
  };
}

/**
 * THE plan of a flat-priced job (an image, a video job): its maximum and its actual burn are the
 * job's DIEM. Planned at the ceiling when the balance covers the job there; otherwise capped at the
 * highest offer price the balance covers (the job then clears only on an offer at or below it, so
 * a buyer whose balance covers the price the job clears at is never refused); unaffordable (402)
 * when not even the lowest offer price is covered.
 */
export function flatJobPricer(jobMicroDiem: bigint): BurnPricer {
  return {
    plan: (ceilingCents, availableMicroUsdc) => {
      let price = ceilingCents;
      while (price >= MIN_OFFER_PRICE_CENTS && maxChargeFor(jobMicroDiem, price) > availableMicroUsdc) price--;
      if (price < MIN_OFFER_PRICE_CENTS) return undefined;
      return {
        promptEstimate: 0,
        admittedMaxTokens: 0,
        maxBurnMicroDiem: jobMicroDiem,
        maxChargeMicroUsdc: maxChargeFor(jobMicroDiem, price),
        ...(price < ceilingCents ? { priceCapCents: price } : {}),
      };
    },
    burn: () => jobMicroDiem,
  };
}
