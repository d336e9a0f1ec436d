import type { UpstreamFailure } from "../../../adapters/upstream/client.js";
import { DomainError } from "../../../lib/errors.js";
import { type AttemptFailure, classifyFailure } from "./failure.js";

/**
 * THE attempt loop (docs/decisions.md "Inference pipeline"): every upstream call made with a
 * supplier key — a request's attempts (`InferencePipeline.run`) and a video quote's borrowed keys
 * (`InferencePipeline.runBorrowed`) — goes through `runAttempts`, the one `for` over attempts in
 * src/ (test/unit/lint/one-attempt-loop.test.ts fails on a second). A call answers what happened
 * (`Attempted`); the loop classifies upstream failures and hands each outcome to its `Lane`, which
 * owns key health, the next attempt, the clean-up and the ending.
 */

/** What one attempt's call answers. */
export type AttemptResult<T, C = never> =
  /** an answer: the run ends with it (a request settles it) */
  | { kind: "ok"; value: T }
  /** the upstream refused or failed: classified by the loop (the buyer's own 4xx is a reject, else fall forward) */
  | { kind: "failed"; failure: UpstreamFailure }
  /** no answer, nothing reached the buyer: end this attempt (its key acted on) and try the next */
  | { kind: "fallForward"; failure: AttemptFailure }
  /** the buyer's own fault, relayed: ends the run */
  | { kind: "reject"; error: DomainError }
  /** the answer may be lost (e.g. a queued video job): ends the run without retrying, nothing charged */
  | { kind: "lost"; detail: string; error: DomainError }
  /** the buyer left: ends the run without a charge, answering `answer` */
  | { kind: "closed"; answer: C };

/** The answers of a call (see `AttemptResult`). */
export const Attempted = {
  ok: <T>(value: T): { kind: "ok"; value: T } => ({ kind: "ok", value }),
  failed: (failure: UpstreamFailure): { kind: "failed"; failure: UpstreamFailure } => ({ kind: "failed", failure }),
  fallForward: (failure: AttemptFailure): { kind: "fallForward"; failure: AttemptFailure } => ({
    kind: "fallForward",
    failure,
  }),
  /** a retryable failure the modality saw in the answer (unreadable, no usage, closed before content) */
  retry: (detail: string): { kind: "fallForward"; failure: AttemptFailure } => ({
    kind: "fallForward",
    failure: { kind: "retryable", detail },
  }),
  reject: (error: DomainError): { kind: "reject"; error: DomainError } => ({ kind: "reject", error }),
  lost: (detail: string, error: DomainError): { kind: "lost"; detail: string; error: DomainError } => ({
    kind: "lost",
    detail,
    error,
  }),
  closed: <C>(answer: C): { kind: "closed"; answer: C } => ({ kind: "closed", answer }),
};

/**
 * How a run moves between attempts `A` and ends (a request's session, or borrowed keys). Every
 * method that ends the run is given the attempt in flight, so no ending can be written without one.
 */
export interface Lane<A, T, C, R> {
  /** the call answered: end the run with it */
  finish(attempt: A, value: T): Promise<R>;
  /** end the attempt on `failure` (its key acted on), and give the next one (throws when there is none) */
  fallForward(attempt: A, failure: AttemptFailure): Promise<A>;
  /** end the run on the buyer's own error; the error to throw */
  reject(attempt: A, error: DomainError): Promise<DomainError>;
  /** end the run on an answer that may be lost; the error to throw */
  lost(attempt: A, detail: string, error: DomainError): Promise<DomainError>;
  /** end the run for a buyer who left */
  closed(attempt: A, value: C): Promise<C>;
  /** anything thrown: end the run (idempotent) before the error goes on */
  cleanUp(attempt: A, error: unknown): Promise<void>;
}

/** The one attempt loop (see the module comment). */
export async function runAttempts<A, T, C, R>(
  first: A,
  call: (attempt: A) => Promise<AttemptResult<T, C>>,
  lane: Lane<A, T, C, R>,
): Promise<R | C> {
  let attempt = first;
  try {
    for (;;) {
      const r = await call(attempt);
      if (r.kind === "ok") return await lane.finish(attempt, r.value);
      if (r.kind === "closed") return await lane.closed(attempt, r.answer);
      if (r.kind === "reject") throw await lane.reject(attempt, r.error);
      if (r.kind === "lost") throw await lane.lost(attempt, r.detail, r.error);
      const failure = r.kind === "failed" ? classifyFailure(r.failure) : r.failure;
      if (failure instanceof DomainError) throw await lane.reject(attempt, failure);
      attempt = await lane.fallForward(attempt, failure);
    }
  } catch (e) {
    await lane.cleanUp(attempt, e);
    throw e;
  }
}
