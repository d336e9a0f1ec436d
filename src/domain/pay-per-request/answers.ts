import type { PayPerRequestId } from "../../contract/paid-routes.js";
import { DomainError, ERROR_TABLE, type ErrorCode, type HeaderField } from "../../lib/errors.js";
import type { RecordedResponse } from "../funding/payment-identifier.js";
import type { CostFacts, StreamStartFacts } from "../inference/pipeline/answer-facts.js";
import type { StreamSink } from "../inference/pipeline/sink.js";
import type { PaidChallenge } from "./challenge.js";

/**
 * What a pay-per-request call answers, and how an answer is recorded for the duplicates of its
 * payment (the same `PAYMENT-SIGNATURE` again, or the same payment-identifier): the status, the
 * answer's facts (its cost, or a stream's start) and the settle's receipt (x402 `PAYMENT-RESPONSE`)
 * as data, and the body — a JSON answer, a stream's text, or an error. The transport renders the
 * facts (REST: http/answer-headers.ts), a fresh answer and its replay alike.
 */

/** One call of a pay-per-request route, as a transport hands it over (REST today, MCP next). */
export interface PaidCall {
  route: PayPerRequestId;
  /** the JSON body as received: the route's /v1 twin's body */
  body: unknown;
  /** `PAYMENT-SIGNATURE` as sent, or the payload itself (x402's MCP binding); none: the 402 */
  payment: { header: string } | { payload: unknown } | undefined;
  /** an `X-PAYMENT` (x402 v1) was sent: `upto` is x402 v2 only */
  v1Payment?: boolean;
  /** the transport's request id (`X-Svc-Request-Id`): the request's record takes it */
  requestId?: string;
  /** the transport's stream for a `stream: true` body; absent: the transport does not stream (400) */
  openStream?: () => StreamSink;
  /** the buyer went away (a buffered call) */
  signal: AbortSignal;
}

/** A call's answer (errors are thrown as DomainError, the receipt in `details.paymentResponse`). */
export type PaidOutcome =
  | PaidChallenge
  /** a buffered answer (fresh or replayed): the body is released only once the charge settled */
  | { type: "answer"; status: number; cost: PaidCost; receipt: HeaderField; body: Record<string, unknown> }
  /** a stream written to the transport's sink (the settle's outcome in its last frames) */
  | { type: "streamed" }
  /** a recorded stream, sent again whole (`start` absent: it ended before it started) */
  | { type: "replayed_stream"; start?: StreamStartFacts | undefined; text: string };

/** A paid answer's cost: no balance left to tell (the payment, not a prepaid balance, paid). */
export type PaidCost = CostFacts & { balanceRemainingMicroUsdc: null };

/** `PaidCost` as JSON keeps it: the amount as an integer string of micro-USDC. */
type RecordedCost = Omit<PaidCost, "costMicroUsdc"> & { costMicroUsdc: string };

/** An answer as recorded on its payment (`request_payments.response`): JSON-safe. */
export type RecordedPaidAnswer =
  | { kind: "json"; status: number; cost: RecordedCost; receipt: HeaderField; body: Record<string, unknown> }
  | { kind: "sse"; start?: StreamStartFacts | undefined; text: string }
  | { kind: "error"; code: ErrorCode; message: string; details: Record<string, unknown> };

/** The recorded form of an outcome that is an answer; undefined for a 402 (nothing is recorded). */
export function recordedOf(o: PaidOutcome, streamed?: StreamCapture): RecordedPaidAnswer | undefined {
  if (o.type === "answer") {
    const cost = { ...o.cost, costMicroUsdc: o.cost.costMicroUsdc.toString() };
    return { kind: "json", status: o.status, cost, receipt: o.receipt, body: o.body };
  }
  if (o.type === "replayed_stream") return { kind: "sse", ...(o.start ? { start: o.start } : {}), text: o.text };
  if (o.type === "streamed" && streamed) {
    return { kind: "sse", ...(streamed.start ? { start: streamed.start } : {}), text: streamed.text };
  }
  return undefined;
}

/** The recorded form of an error answer (its receipt header kept in `details.paymentResponse`). */
export function recordedError(e: DomainError): RecordedPaidAnswer {
  return { kind: "error", code: e.code, message: e.message, details: { ...e.details } };
}

/** A recorded answer, given again: the same status, headers and body (an error is thrown again). */
export function replay(r: RecordedPaidAnswer): PaidOutcome {
  if (r.kind === "json") {
    // recorded by an earlier version (answers with their headers; kept 24 hours): the duplicate is
    // refused, as any other conflicting reuse of a payment, and nothing moves
    if (!r.cost)
      throw new DomainError(
        "conflict",
        "This payment was already used; its answer was recorded by an earlier version and cannot be sent again. Nothing was charged twice.",
      );
    const cost = { ...r.cost, costMicroUsdc: BigInt(r.cost.costMicroUsdc) };
    return { type: "answer", status: r.status, cost, receipt: r.receipt, body: r.body };
  }
  if (r.kind === "sse") return { type: "replayed_stream", ...(r.start ? { start: r.start } : {}), text: r.text };
  throw new DomainError(r.code, r.message, {
    ...r.details,
    ...(r.details.paymentResponse ? { paymentResponse: r.details.paymentResponse as HeaderField } : {}),
  });
}

/** A recorded answer as the payment-identifier table keeps it (payment-identifier.ts). */
export function asIdentifierRecord(r: RecordedPaidAnswer): RecordedResponse {
  const status = r.kind === "json" ? r.status : r.kind === "sse" ? 200 : ERROR_TABLE[r.code].status;
  return { status, body: { answer: r }, headers: [] };
}

export function fromIdentifierRecord(r: RecordedResponse): RecordedPaidAnswer {
  return r.body.answer as RecordedPaidAnswer;
}

/** What a stream sent: its start (absent until it started) and every frame, in order. */
export interface StreamCapture {
  start: StreamStartFacts | undefined;
  text: string;
}

/**
 * A sink that also keeps what it was given (the recorded answer of a paid stream); what the buyer
 * did not receive after leaving is kept too: the payment paid for the whole answer. The stream's
 * end is held until `release()`: its answer is recorded before the buyer sees it end, so a
 * duplicate sent on its heels gets the answer, not a 409.
 */
export function capturingSink(sink: StreamSink) {
  const capture: StreamCapture = { start: undefined, text: "" };
  let ended = false;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    if (ended) sink.end();
  };
  const wrapped: StreamSink = {
    start(facts) {
      capture.start = facts;
      sink.start(facts);
    },
    write(text) {
      capture.text += text;
      sink.write(text);
    },
    end() {
      ended = true;
      if (released) sink.end();
    },
    get closed() {
      return sink.closed;
    },
    get signal() {
      return sink.signal;
    },
  };
  return { sink: wrapped, capture, release };
}
