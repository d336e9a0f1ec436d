import { DomainError } from "../../../lib/errors.js";
import type { Metrics } from "../../../lib/metrics.js";
import type { AnswerFacts } from "../pipeline/answer-facts.js";
import type { Lane } from "../pipeline/attempt-loop.js";
import type { Attempts } from "../pipeline/attempts.js";
import { keyWaitTimeout } from "../pipeline/diagnostics.js";
import type { Attempt, InferenceSession, Settled } from "../pipeline/session.js";
import type { Ending, Endings } from "../settlement/ending.js";
import { MAX_ATTEMPTS } from "./clearing.js";
import type { BorrowedKey, SupplierKeys } from "./supplier-keys.js";

/**
 * What the pipeline does on each outcome of an attempt (the `Lane`s of `runAttempts`, the one
 * attempt loop): for a request (`InferencePipeline.run`) and for supplier keys lent outside one
 * (`InferencePipeline.runBorrowed`). The loop is `attempt-loop.ts`; these are its policies.
 */

/**
 * What a call answers with on the request's answer: the ending to settle, the call's own value, and
 * what the upstream said about the answer (read only by the attempt's span, when tracing is on).
 */
export interface Answered<V> {
  ending: Ending;
  value: V;
  facts?: (() => AnswerFacts) | undefined;
}

/** The call's answer: `run` settles `ending` and resolves with `value` and the settlement. */
export function answered<V>(ending: Ending, value: V, facts?: () => AnswerFacts): { kind: "ok"; value: Answered<V> } {
  return { kind: "ok", value: { ending, value, facts } };
}

/** What a request's lane acts through. */
export interface RequestLaneDeps {
  attempts: Attempts;
  endings: Endings;
  metrics: Metrics;
}

/**
 * A request's lane: an answer is settled on its `Ending`; a failure ends the attempt (its key acted
 * on) and admits the next; a reject, a lost answer or a buyer who left aborts the request (recorded,
 * everything released); anything thrown aborts it too. A thrown DomainError carries the support
 * reference.
 */
export function requestLane<V, C>(
  session: InferenceSession,
  { attempts, endings, metrics }: RequestLaneDeps,
): Lane<Attempt, Answered<V>, C, { value: V; settled: Settled }> {
  return {
    finish: async (attempt, { ending, value }) => {
      endings.firstByte(session);
      const settled = await endings.charge(session, attempt, ending);
      // paid per request: the payment settles the charge before the answer goes out
      return { value, settled: session.payment ? await session.payment.settle(settled) : settled };
    },
    fallForward: async (_attempt, failure) => {
      metrics.fallForward(failure.kind);
      await attempts.end(session, failure);
      return attempts.next(session);
    },
    reject: async (_attempt, error) => {
      await endings.abort(session, error.code, "request_rejected");
      error.details.supportReference = session.supportReference;
      return error;
    },
    lost: async (_attempt, detail, error) => {
      await attempts.end(session, { kind: "retryable", detail: `answer lost: ${detail}` });
      await endings.abort(session, "upstream_answer_lost");
      error.details.supportReference = session.supportReference;
      return error;
    },
    closed: async (_attempt, value) => {
      await endings.abort(session, "client_closed");
      return value;
    },
    cleanUp: async (_attempt, e) => {
      // an ending is once (`Endings.abort` is idempotent): a request ended before the throw stays so
      await endings.abort(session, e instanceof DomainError ? e.code : "internal_error");
      if (e instanceof DomainError) e.details.supportReference ??= session.supportReference;
    },
  };
}

/** How keys are lent outside a request (see `InferencePipeline.runBorrowed`). */
export interface BorrowOptions {
  ceilingCents: number;
  waitForKey: boolean;
  refuse: (why: "busy" | "none" | "exhausted") => DomainError;
}

/**
 * The lane of keys lent outside a request, and the first key: up to MAX_ATTEMPTS distinct keys,
 * each failed one acted on through the same key-health path as an attempt (`SupplierKeys.mark`)
 * and given back; every ending gives the key in hand back.
 */
export function borrowedLane<T>(
  keys: SupplierKeys,
  o: BorrowOptions,
): { first: () => Promise<BorrowedKey>; lane: Lane<BorrowedKey, T, never, T> } {
  const tried: string[] = [];
  const borrow = async (): Promise<BorrowedKey> => {
    const key = await keys.borrowKey(o.ceilingCents, tried, o.waitForKey);
    if (key === "busy") throw o.waitForKey ? keyWaitTimeout() : o.refuse("busy");
    if (key === "none") throw o.refuse(tried.length > 0 ? "exhausted" : "none");
    tried.push(key.upstreamKeyId);
    return key;
  };
  const lane: Lane<BorrowedKey, T, never, T> = {
    finish: async (key, value) => {
      key.release();
      return value;
    },
    fallForward: async (key, failure) => {
      await keys.mark(key.upstreamKeyId, failure);
      key.release();
      if (tried.length >= MAX_ATTEMPTS) throw o.refuse("exhausted");
      return borrow();
    },
    reject: async (key, error) => {
      key.release();
      return error;
    },
    lost: async (key, _detail, error) => {
      key.release();
      return error;
    },
    closed: async (key, value) => {
      key.release();
      return value;
    },
    cleanUp: async (key) => key.release(),
  };
  return { first: borrow, lane };
}
