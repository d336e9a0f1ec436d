import { burnMicroDiem, grossMicroUsdc, type TextPricing } from "../../lib/money.js";

/**
 * Admission arithmetic (pure). A request is admitted with a completion-token cap we send upstream,
 * so its burn can never exceed what was reserved: maxBurn = burn(promptEstimate, admittedMaxTokens).
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

export interface AdmissionPlan {
  promptEstimate: number;
  admittedMaxTokens: number;
  maxBurnMicroDiem: bigint;
  /** the most the buyer can be charged: maxBurn at the ceiling price */
  maxChargeMicroUsdc: bigint;
}

/**
 * The completion cap and the reservation for a request, or `undefined` when the buyer cannot afford
 * even MIN_ADMITTED_TOKENS at the ceiling. The cap is the smallest of what the buyer asked, the
 * model's published cap, and what the available balance affords at the ceiling price.
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
    grossMicroUsdc(
      burnMicroDiem(input.pricing, { promptTokens: input.promptEstimate, completionTokens: tokens }),
      input.ceilingCents,
    );
  const affordable = (tokens: number) => charge(tokens) <= input.availableMicroUsdc;
  let admitted = cap;
  if (!affordable(admitted)) {
    // largest affordable cap by binary search (charge is monotone in tokens)
    let lo = 0;
    let hi = admitted;
    while (lo < hi) {
      const mid = Math.floor((lo + hi + 1) / 2);
      if (affordable(mid)) lo = mid;
      else hi = mid - 1;
    }
    admitted = lo;
    const floor = Math.min(MIN_ADMITTED_TOKENS, cap);
    if (admitted < floor || !affordable(admitted)) return undefined;
  }
  const maxBurnMicroDiem = burnMicroDiem(input.pricing, {
    promptTokens: input.promptEstimate,
    completionTokens: admitted,
  });
  return {
    promptEstimate: input.promptEstimate,
    admittedMaxTokens: admitted,
    maxBurnMicroDiem,
    maxChargeMicroUsdc: grossMicroUsdc(maxBurnMicroDiem, input.ceilingCents),
  };
}
