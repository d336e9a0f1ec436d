import type { IncomingHttpHeaders } from "node:http";
import { reportedDiemBalance, type UpstreamClient } from "../../adapters/upstream/client.js";
import { DomainError } from "../../lib/errors.js";
import { answerFacts } from "./answer-facts.js";
import { Attempted } from "./attempt-loop.js";
import { answered } from "./lanes.js";
import type { InferencePipeline } from "./pipeline.js";
import type { AttemptingSession, Settled, Usage } from "./session.js";
import { burnedOnKey } from "./usage.js";

type Json = Record<string, unknown>;

/** Buffered upstream calls give up after this long (then fall forward). */
export const UPSTREAM_TIMEOUT_MS = 120_000;

/**
 * The buffered call, for every modality, on the pipeline's attempt loop (`InferencePipeline.run`):
 * per attempt, an upstream call (the buyer leaving or UPSTREAM_TIMEOUT_MS aborts it); an unreadable
 * answer, or one the modality's `meter` refuses (no usage, a failed response), falls forward; the
 * first good answer is settled on what `meter` read and returned with the settlement. An answer the
 * provider flagged (`meter` says why) is charged what the provider burned on the key for it
 * (`burnedOnKey`: the balance it reported before the call less the key's balance read now), nothing
 * when that is 0 or cannot be read. On any error
 * the request is ended without a charge (its admissions released) and the thrown DomainError
 * carries the support reference.
 */
export async function runBuffered(
  pipeline: InferencePipeline,
  upstream: UpstreamClient,
  session: AttemptingSession,
  o: {
    path: string;
    /** the upstream body for the current attempt */
    body: () => Json;
    signal: AbortSignal;
    /**
     * what the answer delivered; why it is no answer (`refused`: fall forward); or why the provider
     * flagged it (`flagged`: answered, charged what the provider burned for it)
     */
    meter: (answer: Json, headers: IncomingHttpHeaders) => Usage | { refused: string } | { flagged: string };
  },
): Promise<{ answer: Json; settled: Settled }> {
  const done = await pipeline.run(session, async ({ attempt }) => {
    // the buyer leaving or UPSTREAM_TIMEOUT_MS cancels the call (its timer dies with the answer)
    const res = await upstream.postJson(o.path, attempt.secret, o.body(), {
      signal: o.signal,
      timeoutMs: UPSTREAM_TIMEOUT_MS,
    });
    if (o.signal.aborted) return Attempted.closed(null);
    if (!res.ok && res.failure.kind !== "invalid_response") return Attempted.failed(res.failure);
    const parsed = res.ok ? res.value.json : undefined;
    // an unreadable answer falls forward like any upstream fault
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      return Attempted.retry("invalid JSON from upstream");
    }
    const answer = parsed as Json;
    const headers = res.ok ? res.value.headers : {};
    const metered = o.meter(answer, headers);
    if ("refused" in metered) return Attempted.retry(metered.refused);
    const facts = () => answerFacts(answer);
    if ("flagged" in metered) {
      const after = await upstream.keyStatus(attempt.secret);
      const burned = burnedOnKey(reportedDiemBalance(headers), after.ok ? after.value.diemMicro : null);
      const reason = metered.flagged;
      return answered(
        burned !== null && burned > 0n
          ? { kind: "flagged", reason, burnMicroDiem: burned }
          : { kind: "uncharged", reason },
        answer,
        facts,
      );
    }
    return answered({ kind: "settled", usage: metered }, answer, facts);
  });
  if (done === null) {
    throw new DomainError("invalid_request", "client closed the request", {
      supportReference: session.supportReference,
    });
  }
  return { answer: done.value, settled: done.settled };
}
