import { releaseBody, type UpstreamClient } from "../../adapters/upstream/client.js";
import { logger } from "../../lib/logger.js";
import type { AnswerFacts } from "./answer-facts.js";
import { Attempted, type AttemptResult } from "./attempt-loop.js";
import { type Answered, answered } from "./lanes.js";
import type { InferencePipeline } from "./pipeline.js";
import type { AttemptingSession, Settled, Usage } from "./session.js";
import type { StreamSink } from "./sink.js";
import { type FrameVerdict, StreamRelay } from "./stream-relay.js";
import type { IncompleteStream } from "./usage.js";

type Json = Record<string, unknown>;

/** A stream that sends no first content within this long is a failed attempt. */
export const FIRST_CONTENT_TIMEOUT_MS = 60_000;

/** How one upstream attempt's stream ended, as the modality read it. */
export interface RelayOutcome {
  verdict: FrameVerdict;
  /** the upstream's usage, when it finished with one */
  usage?: Usage | undefined;
}

/**
 * One streamed request as its modality renders it: the modality reads the upstream's frames and
 * writes its own; the pipeline's streamed ending decides what is billed and when the last frames go.
 */
export interface StreamRenderer {
  /** Relays one upstream attempt through `relay` (emit, commit, failBeforeContent); state is per attempt. */
  relayAttempt(relay: StreamRelay): Promise<RelayOutcome>;
  /** A finished answer with usage and no content still starts the buyer's stream (an empty answer is a result). */
  readonly emptyAnswerIsResult: boolean;
  /** What the buyer was shown, to bill a stream that ended without usage. */
  incomplete(): IncompleteStream;
  /** The last frames of a settled stream (usage, cost, terminator). */
  completedFrames(settled: Settled): string;
  /** The last frames of a stream billed on estimated usage. */
  incompleteFrames(settled: Settled): string;
  /** The in-band error after content, when settlement (or the request) failed. */
  errorFrame(e: unknown): string;
  /** What the upstream said about the attempt's answer so far (id, model, finish reasons, usage breakdowns), for its span. */
  answerFacts?(): AnswerFacts;
}

/**
 * The streamed call, for every modality, on the pipeline's attempt loop (`InferencePipeline.run`):
 * per attempt, an upstream call that the buyer leaving or a silent first-content timer aborts;
 * fall-forward until a relay finishes; the last frames are withheld until settlement commits.
 * Errors before the stream starts are thrown (the transport answers JSON), after it in-band.
 */
export async function runStream(
  pipeline: InferencePipeline,
  upstream: UpstreamClient,
  session: AttemptingSession,
  sink: StreamSink,
  o: { path: string; body: () => Json; renderer: StreamRenderer },
): Promise<void> {
  let started = false;
  // the buyer left while an attempt failed: that attempt is still acted on (key marks, fall-forward)
  let leftOnFailure = false;
  try {
    const done = await pipeline.run(session, async (scope): Promise<AttemptResult<Answered<LastFrames>, null>> => {
      if (leftOnFailure) return Attempted.closed(null);
      const upstreamAbort = new AbortController();
      const onBuyerGone = () => upstreamAbort.abort();
      sink.signal.addEventListener("abort", onBuyerGone, { once: true });
      const firstTimer = setTimeout(() => upstreamAbort.abort(), FIRST_CONTENT_TIMEOUT_MS);
      try {
        const issuedAt = performance.now();
        const res = await upstream.post(o.path, scope.attempt.secret, o.body(), { signal: upstreamAbort.signal });
        if (!res.ok) {
          leftOnFailure = sink.closed;
          return Attempted.failed(res.failure);
        }
        const value = res.value;
        if (sink.closed) {
          releaseBody(value.body);
          return Attempted.closed(null);
        }
        scope.preCallBalance(value.diemBalanceMicro);
        if (value.status === 204 || value.status === 205) {
          // null-body statuses (what fetch reported as no body)
          releaseBody(value.body, true);
          return Attempted.retry("empty upstream stream");
        }
        const relay = new StreamRelay({
          scope,
          sink,
          body: value.body,
          upstreamAbort,
          firstTimer,
          onStart: () => {
            started = true;
          },
          issuedAt,
        });
        try {
          return await relayAttempt(sink, relay, o.renderer);
        } catch (e) {
          releaseBody(value.body); // backstop (no-op when the relay already read or released it)
          throw e;
        }
      } finally {
        clearTimeout(firstTimer);
        sink.signal.removeEventListener("abort", onBuyerGone);
      }
    });
    if (done === null || sink.closed) return;
    sink.write(done.value(done.settled));
    sink.end();
  } catch (e) {
    // the request was ended by the pipeline (a settlement that did not commit included)
    if (!started) throw e;
    logger.error({ err: e, requestId: session.requestId, path: o.path }, "stream failed after start");
    if (!sink.closed) {
      sink.write(o.renderer.errorFrame(e));
      sink.end();
    }
  }
}

/** The last frames of a settled stream, given its settlement. */
type LastFrames = (settled: Settled) => string;

/**
 * One attempt's stream to its end: a failure before any content falls forward (or, the buyer gone,
 * ends the request); a committed stream is settled on the upstream's usage, or billed on estimated
 * usage (`incomplete`) when it ended without it, and answers its last frames.
 */
async function relayAttempt(
  sink: StreamSink,
  relay: StreamRelay,
  renderer: StreamRenderer,
): Promise<AttemptResult<Answered<LastFrames>, null>> {
  const { verdict, usage } = await renderer.relayAttempt(relay);
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
  if (usage) return answered({ kind: "settled", usage }, (s: Settled) => renderer.completedFrames(s), facts);
  return answered(
    { kind: "incomplete", stream: renderer.incomplete() },
    (s: Settled) => renderer.incompleteFrames(s),
    facts,
  );
}
