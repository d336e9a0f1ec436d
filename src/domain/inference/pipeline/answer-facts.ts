import type { InferenceSession, Settled } from "./session.js";

export type { AnswerFacts } from "../../../adapters/upstream/answer-facts.js";

/**
 * Where the service spent a request's time so far, in ms: `admitMs` (gates, plan, escrow),
 * `upstreamMs` (to the answer or the first content, fall-forwards included), `settleMs` (the
 * commit). A phase not reached yet is absent (a stream starts before its settlement).
 */
export interface PhaseTimings {
  admitMs?: number;
  upstreamMs?: number;
  settleMs?: number;
}

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

/** The request's phase timings so far (the settlement's, once settled). */
export function phaseTimings(session: Pick<InferenceSession, "admitMs" | "trail">, settleMs?: number): PhaseTimings {
  const { admitMs } = session;
  const { upstreamMs } = session.trail;
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
    timing: phaseTimings(session, s.settleMs),
    costMicroUsdc: s.costMicroUsdc,
    clearingPriceCents: s.clearingPriceCents,
    balanceRemainingMicroUsdc: s.balanceRemainingMicroUsdc,
    ...(s.uncharged ? { uncharged: s.uncharged } : {}),
    ...(s.flagged ? { flagged: s.flagged } : {}),
  };
}
