import type { IncomingHttpHeaders } from "node:http";
import { answerFacts, burnedOnKey } from "../../../adapters/upstream/answer-facts.js";
import {
  type BufferedCall,
  releaseBody,
  reportedDiemBalance,
  type StreamedCall,
  type UpstreamClient,
  type UpstreamFailure,
} from "../../../adapters/upstream/client.js";
import { DomainError } from "../../../lib/errors.js";
import { logger } from "../../../lib/logger.js";
import { type Answered, answered } from "../routing/lanes.js";
import { type EndRows, NO_ROWS } from "../settlement/end-item.js";
import type { AnswerFacts } from "./answer-facts.js";
import { Attempted, type AttemptResult } from "./attempt-loop.js";
import type { InferencePipeline } from "./pipeline.js";
import type { AttemptingSession, AttemptScope, Settled, Usage } from "./session.js";
import type { StreamSink } from "./sink.js";
import { type RelayOutcome, StreamRelay, type StreamRenderer } from "./stream-relay.js";

type Json = Record<string, unknown>;

/** Buffered upstream calls give up after this long (then fall forward), unless the modality says otherwise. */
export const UPSTREAM_TIMEOUT_MS = 120_000;

/**
 * What a buffered answer delivered, as the modality's `meter` reads it: its usage (settled on it),
 * with `rows` the modality writes with the charge (`EndRows`: its ending's transaction); why it is
 * no answer (`refused`: fall forward); why the provider flagged it (`flagged`: answered, charged
 * what the provider burned for it); or why its answer may be lost (`lost`: the work may be done
 * upstream without our knowing it — never retried, nothing charged, the call's `lostError`).
 */
export type Metered =
  | Usage
  | { usage: Usage; rows: EndRows }
  | { refused: string }
  | { flagged: string }
  | { lost: string };

/**
 * How a modality's buffered upstream call is made and what a failed one means (the defaults:
 * `BUFFERED_CALL`).
 */
export interface CallRules {
  /** the call gives up after this long */
  timeoutMs: number;
  /**
   * whether the buyer leaving cuts the call (and the request ends without a charge); false for a
   * call whose answer must not be lost on the way (a queued job's id): it runs to its end and settles
   */
  buyerCuts: boolean;
  /**
   * whether a failed call (or an answer that cannot be read) may have done its work upstream: its
   * answer is then lost — the request ends without a charge and the call is never retried on
   * another key (that could do the work, and charge for it, twice)
   */
  mayBeLost(failure: UpstreamFailure): boolean;
  /** the error a lost answer ends the request with */
  lostError(): DomainError;
}

/** A buffered call's rules unless the modality says otherwise: UPSTREAM_TIMEOUT_MS, cut by the buyer, never lost. */
export const BUFFERED_CALL: CallRules = {
  timeoutMs: UPSTREAM_TIMEOUT_MS,
  buyerCuts: true,
  mayBeLost: () => false,
  lostError: () => new DomainError("upstream_error", "The upstream's answer was lost. Nothing was charged."),
};

/** An answer that is not a JSON object (a 2xx the client could not parse, or another JSON value). */
const UNREADABLE: UpstreamFailure = { kind: "invalid_response", message: "invalid JSON from upstream" };

/** The streamed shape: the answer's frames relayed into the buyer's sink as the modality renders them. */
export interface Streamed {
  stream: true;
  sink: StreamSink;
  renderer: StreamRenderer;
}

/** The buffered shape: the answer read whole, metered by the modality (`meter`), returned once settled. */
export interface Buffered {
  stream: false;
  /** aborts when the buyer goes away (cuts the call where `call.buyerCuts`) */
  signal: AbortSignal;
  call: CallRules;
  meter(answer: Json, headers: IncomingHttpHeaders): Metered;
}

/** A settled buffered answer: the upstream's JSON, its settlement and the rows its `meter` wrote. */
export interface BufferedDone {
  answer: Json;
  settled: Settled;
  rows: EndRows;
}

/** What an attempt's answer gives once settled: a stream's last frames, or the buffered answer and its rows. */
type Given = { frames: (settled: Settled) => string } | { answer: Json; rows: EndRows };

/** One call: the upstream path, the body of the current attempt, the answer's shape. */
interface Call<S extends Streamed | Buffered> {
  path: string;
  body: () => Json;
  shape: S;
}

/**
 * An attempt's upstream call as the shape makes it: a stream's relay comes first, its signal cutting
 * the call (the buyer gone, no first content in time); a buffered call is cut after `call.timeoutMs`,
 * and by the buyer leaving only where `call.buyerCuts` (where that loses nothing).
 */
function callOf(
  shape: Streamed | Buffered,
  scope: AttemptScope,
  onStart: () => void,
): { streamed: Streamed; relay: StreamRelay; asked: StreamedCall } | { buffered: Buffered; asked: BufferedCall } {
  if (shape.stream) {
    const relay = new StreamRelay({ scope, sink: shape.sink, onStart });
    return { streamed: shape, relay, asked: relay.call };
  }
  const { call, signal } = shape;
  return {
    buffered: shape,
    asked: { stream: false, ...(call.buyerCuts ? { signal } : {}), timeoutMs: call.timeoutMs },
  };
}

/** An attempt's result: its answer (what it gives once settled), or none (the buyer gone). */
type AttemptOutcome = AttemptResult<Answered<Given>, null>;

/**
 * THE call path of an inference request, for every modality and both answer shapes, on the
 * pipeline's attempt loop (`InferencePipeline.run`). Per attempt: one upstream call
 * (`UpstreamClient.inference`), its failure handed to the loop (fall-forward, key marks); the
 * shape decides only how the call is cut and what a 2xx answer becomes.
 *
 * Streamed: the attempt's relay is made before its call (its signal cuts the call when the buyer
 * leaves or no first content comes in time); the buyer leaving while an attempt failed still has
 * that attempt acted on, then ends the request; fall-forward until a relay finishes; the last
 * frames are withheld until settlement commits. Errors before the stream starts are thrown (the
 * transport answers JSON), after it in-band (`errorFrame`).
 *
 * Buffered: the call is cut after `call.timeoutMs`, and by the buyer leaving unless
 * `call.buyerCuts` is false; a failure or an unreadable answer that may have done its work
 * (`call.mayBeLost`), or an answer the modality's `meter` calls lost, ends the request lost (never
 * retried, nothing charged); an unreadable answer, or one `meter` refuses (no usage, a failed
 * response), falls forward; the first good answer is settled on what `meter` read (its rows
 * written with the charge) and returned with the settlement. An answer the provider flagged is
 * charged what the provider burned on the key for it (`burnedOnKey`: the balance it reported before
 * the call less the key's balance read now), nothing when that is 0 or cannot be read. On any
 * error the request is ended without a charge and the thrown DomainError carries the support reference.
 */
export async function runCall(
  pipeline: InferencePipeline,
  upstream: UpstreamClient,
  session: AttemptingSession,
  o: Call<Streamed>,
): Promise<undefined>;
export async function runCall(
  pipeline: InferencePipeline,
  upstream: UpstreamClient,
  session: AttemptingSession,
  o: Call<Buffered>,
): Promise<BufferedDone>;
export async function runCall(
  pipeline: InferencePipeline,
  upstream: UpstreamClient,
  session: AttemptingSession,
  o: Call<Streamed | Buffered>,
): Promise<BufferedDone | undefined>;
export async function runCall(
  pipeline: InferencePipeline,
  upstream: UpstreamClient,
  session: AttemptingSession,
  o: Call<Streamed | Buffered>,
): Promise<BufferedDone | undefined> {
  const { shape } = o;
  let started = false;
  // the buyer left while a stream's attempt failed: that attempt is still acted on (key marks, fall-forward)
  let leftOnFailure = false;
  try {
    const done = await pipeline.run(session, async (scope): Promise<AttemptOutcome> => {
      if (leftOnFailure) return Attempted.closed(null);
      const { attempt } = scope;
      const made = callOf(shape, scope, () => {
        started = true;
      });
      try {
        const res = await upstream.inference(o.path, attempt.secret, o.body(), made.asked);
        if ("relay" in made) {
          // ── streamed: the answer's frames relayed into the buyer's sink ──
          const { relay } = made;
          const { sink, renderer } = made.streamed;
          if (!res.ok) {
            leftOnFailure = sink.closed;
            return Attempted.failed(res.failure);
          }
          if (!("body" in res.value)) throw new Error("a streamed call answered buffered");
          const { body, status, diemBalanceMicro } = res.value;
          if (sink.closed) {
            releaseBody(body);
            return Attempted.closed(null);
          }
          scope.preCallBalance(diemBalanceMicro);
          if (status === 204 || status === 205) {
            // null-body statuses (what fetch reported as no body)
            releaseBody(body, true);
            return Attempted.retry("empty upstream stream");
          }
          relay.receive(body);
          let outcome: RelayOutcome;
          try {
            outcome = await renderer.relayAttempt(relay);
          } catch (e) {
            releaseBody(body); // backstop (no-op when the relay already read or released it)
            throw e;
          }
          const { verdict, usage } = outcome;
          if (verdict === "retry") return Attempted.retry(relay.failedBeforeContent);
          if (usage && renderer.emptyAnswerIsResult && !sink.closed) relay.commit();
          if (!relay.committed) {
            if (sink.closed) return Attempted.closed(null);
            return Attempted.retry("upstream stream closed before its first content");
          }
          const facts = (): AnswerFacts => ({
            ...renderer.answerFacts?.(),
            timeToFirstChunkSeconds: relay.timeToFirstChunkSeconds,
          });
          if (usage) return answered({ kind: "settled", usage }, { frames: (s) => renderer.completedFrames(s) }, facts);
          const stream = renderer.incomplete();
          return answered({ kind: "incomplete", stream }, { frames: (s) => renderer.incompleteFrames(s) }, facts);
        }
        // ── buffered: the answer read whole and metered ──
        const { call, signal, meter } = made.buffered;
        if (call.buyerCuts && signal.aborted) return Attempted.closed(null);
        if (!res.ok && call.mayBeLost(res.failure)) return Attempted.lost(res.failure.message, call.lostError());
        if (!res.ok && res.failure.kind !== "invalid_response") return Attempted.failed(res.failure);
        const parsed = res.ok && "json" in res.value ? res.value.json : undefined;
        // an unreadable answer falls forward like any upstream fault (unless the work may be done)
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
          return call.mayBeLost(UNREADABLE)
            ? Attempted.lost(UNREADABLE.message, call.lostError())
            : Attempted.retry(UNREADABLE.message);
        }
        const answer = parsed as Json;
        const headers = res.ok ? res.value.headers : {};
        const metered = meter(answer, headers);
        if ("refused" in metered) return Attempted.retry(metered.refused);
        if ("lost" in metered) return Attempted.lost(metered.lost, call.lostError());
        const facts = () => answerFacts(answer);
        if ("flagged" in metered) {
          const after = await upstream.keyStatus(attempt.secret);
          const burned = burnedOnKey(reportedDiemBalance(headers), after.ok ? after.value.diemMicro : null);
          const reason = metered.flagged;
          return answered(
            burned !== null && burned > 0n
              ? { kind: "flagged", reason, burnMicroDiem: burned }
              : { kind: "uncharged", reason },
            { answer, rows: NO_ROWS },
            facts,
          );
        }
        const [usage, rows] = "usage" in metered ? [metered.usage, metered.rows] : [metered, NO_ROWS];
        return answered({ kind: "settled", usage, extra: rows }, { answer, rows }, facts);
      } finally {
        if ("relay" in made) made.relay.close();
      }
    });
    if (shape.stream) {
      if (done === null || shape.sink.closed) return undefined;
      if (!("frames" in done.value)) throw new Error("a stream settled without its last frames");
      shape.sink.write(done.value.frames(done.settled));
      shape.sink.end();
      return undefined;
    }
    if (done === null) {
      throw new DomainError("invalid_request", "client closed the request", {
        supportReference: session.supportReference,
      });
    }
    if (!("answer" in done.value)) throw new Error("a buffered call settled as a stream");
    return { answer: done.value.answer, settled: done.settled, rows: done.value.rows };
  } catch (e) {
    // the request was ended by the pipeline (a settlement that did not commit included)
    if (!shape.stream || !started) throw e;
    logger.error({ err: e, requestId: session.requestId, path: o.path }, "stream failed after start");
    if (!shape.sink.closed) {
      shape.sink.write(shape.renderer.errorFrame(e));
      shape.sink.end();
    }
    return undefined;
  }
}
