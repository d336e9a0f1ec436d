import { releaseBody, type UpstreamClient } from "../../adapters/upstream/client.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { InferencePipeline } from "./pipeline.js";
import type { InferenceSession, Settled, Usage } from "./session.js";
import type { StreamSink } from "./sink.js";
import { type FrameVerdict, StreamRelay } from "./stream-relay.js";
import { endOnError, failAttempt } from "./upstream-attempt.js";
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
}

/**
 * The streamed ending, for every modality: per attempt, an upstream call that the buyer leaving or
 * a silent first-content timer aborts; fall-forward until a relay finishes; the last frames are
 * withheld until settlement commits. Errors before the stream starts are thrown (the transport
 * answers JSON), after it in-band.
 */
export async function runStream(
  pipeline: InferencePipeline,
  upstream: UpstreamClient,
  session: InferenceSession,
  sink: StreamSink,
  o: { path: string; body: () => Json; renderer: StreamRenderer },
): Promise<void> {
  let started = false;
  try {
    for (;;) {
      const attempt = session.attempt;
      if (!attempt) throw new DomainError("internal_error", "no attempt");
      const upstreamAbort = new AbortController();
      const onBuyerGone = () => upstreamAbort.abort();
      sink.signal.addEventListener("abort", onBuyerGone, { once: true });
      const firstTimer = setTimeout(() => upstreamAbort.abort(), FIRST_CONTENT_TIMEOUT_MS);
      try {
        const res = await upstream.post(o.path, attempt.secret, o.body(), { signal: upstreamAbort.signal });
        // a failed attempt is acted on (key marks, fall-forward) even when the buyer left meanwhile
        if (!res.ok) await failAttempt(pipeline, session, res.failure);
        if (sink.closed) {
          if (res.ok) releaseBody(res.value.body);
          await pipeline.abort(session, "client_closed");
          return;
        }
        if (!res.ok) continue;
        const value = res.value;
        pipeline.notePreCallBalance(session, value.diemBalanceMicro);
        if (value.status === 204 || value.status === 205) {
          // null-body statuses (what fetch reported as no body)
          releaseBody(value.body, true);
          await pipeline.fallForward(session, { kind: "retryable", detail: "empty upstream stream" });
          continue;
        }
        const relay = new StreamRelay(pipeline, session, sink, value.body, upstreamAbort, firstTimer, () => {
          started = true;
        });
        let outcome: "retry" | "done";
        try {
          outcome = await endAttempt(pipeline, session, sink, relay, o.renderer);
        } catch (e) {
          releaseBody(value.body); // backstop (no-op when the relay already read or released it)
          throw e;
        }
        if (outcome === "retry") continue;
        return;
      } finally {
        clearTimeout(firstTimer);
        sink.signal.removeEventListener("abort", onBuyerGone);
      }
    }
  } catch (e) {
    await endOnError(pipeline, session, e);
    if (!started) throw e;
    logger.error({ err: e, requestId: session.requestId, path: o.path }, "stream failed after start");
    if (!sink.closed) {
      sink.write(o.renderer.errorFrame(e));
      sink.end();
    }
  }
}

/**
 * One attempt's stream to its end. "retry" when it failed before any content (fall forward);
 * "done" when the buyer's stream was finished: settled on the upstream's usage, billed on estimated
 * usage (`settleIncomplete`), or — settlement not committed — ended with the in-band error.
 */
async function endAttempt(
  pipeline: InferencePipeline,
  session: InferenceSession,
  sink: StreamSink,
  relay: StreamRelay,
  renderer: StreamRenderer,
): Promise<"retry" | "done"> {
  const { verdict, usage } = await renderer.relayAttempt(relay);
  if (verdict === "retry") return "retry";
  if (usage && renderer.emptyAnswerIsResult && !sink.closed) relay.commit();
  if (!relay.committed) return relay.closeBeforeContent();
  let last: string;
  try {
    last = usage
      ? renderer.completedFrames(await pipeline.settle(session, usage))
      : renderer.incompleteFrames(await pipeline.settleIncomplete(session, renderer.incomplete()));
  } catch (e) {
    last = renderer.errorFrame(e);
  }
  if (!sink.closed) {
    sink.write(last);
    sink.end();
  }
  return "done";
}
