import type { CostFacts, PhaseTimings, StreamStartFacts } from "../domain/inference/pipeline/answer-facts.js";
import type { HeaderField } from "../lib/errors.js";
import { formatDecimal6 } from "../lib/money.js";

/**
 * The inference answers' HTTP headers, built here from what the domain hands over as data
 * (domain/inference/pipeline/answer-facts.ts): the cost headers of a buffered answer (SPEC "Inference"
 * response headers), a stream's start headers, and a paid answer's x402 receipt. The only place
 * these names are spelled for an answer; error answers' headers are error-response.ts's.
 */

/**
 * `Server-Timing` (W3C): where the service spent a request's time, in ms — `admit` (gates, plan,
 * escrow), `upstream` (to the answer or first content, fall-forwards included), `settle` (the commit).
 * Phases not reached yet are left out (a stream's headers leave before its settlement).
 */
export function serverTiming(t: PhaseTimings): string {
  const parts: string[] = [];
  for (const [name, ms] of [
    ["admit", t.admitMs],
    ["upstream", t.upstreamMs],
    ["settle", t.settleMs],
  ] as const) {
    if (ms !== undefined) parts.push(`${name};dur=${ms.toFixed(3)}`);
  }
  return parts.join(", ");
}

/** The request's ids and timings: what every answer's start carries (a stream's headers). */
export function streamStartHeaders(s: StreamStartFacts): Record<string, string> {
  return {
    "X-Svc-Request-Id": s.requestId,
    "X-Svc-Support-Reference": s.supportReference,
    "Server-Timing": serverTiming(s.timing),
  };
}

/**
 * A settled buffered answer's headers: its ids and timings, cost and clearing price, the balance
 * left (absent when a payment, not a balance, paid), and why it was not charged or was flagged.
 */
export function costHeaders(c: CostFacts): Record<string, string> {
  // the order Express has always sent them in (names compare case-insensitively; a client may list them)
  return {
    "X-Svc-Request-Id": c.requestId,
    "X-Svc-Support-Reference": c.supportReference,
    "X-Svc-Cost-Usdc": formatDecimal6(c.costMicroUsdc),
    "X-Svc-Clearing-Price-Cents": String(c.clearingPriceCents),
    ...(c.balanceRemainingMicroUsdc !== null
      ? { "X-Balance-Remaining": formatDecimal6(c.balanceRemainingMicroUsdc) }
      : {}),
    "Server-Timing": serverTiming(c.timing),
    ...(c.uncharged ? { "X-Svc-Uncharged": c.uncharged } : {}),
    ...(c.flagged ? { "X-Svc-Flagged": c.flagged } : {}),
  };
}

/** A paid answer's headers: the cost headers and the settle's receipt (x402 `PAYMENT-RESPONSE`). */
export function paidAnswerHeaders(c: CostFacts, receipt: HeaderField): Record<string, string> {
  return { ...costHeaders(c), [receipt.name]: receipt.value };
}

/** A buyer's SSE stream: its content type and the proxies told not to buffer or transform it. */
export const SSE_HEADERS = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache, no-transform",
} as const;
