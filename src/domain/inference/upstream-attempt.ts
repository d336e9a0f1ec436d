import type { UpstreamFailure } from "../../adapters/upstream/client.js";
import { DomainError } from "../../lib/errors.js";
import { classifyFailure } from "./failure.js";
import type { InferencePipeline } from "./pipeline.js";
import type { InferenceSession } from "./session.js";

/**
 * An attempt's upstream failure: the buyer's own error (4xx about the request) ends the request and
 * is thrown (no other key burned, no key marked); anything else falls forward to the next attempt.
 */
export async function failAttempt(
  pipeline: InferencePipeline,
  session: InferenceSession,
  failure: UpstreamFailure,
): Promise<void> {
  const c = classifyFailure(failure);
  if (c instanceof DomainError) {
    await pipeline.abort(session, c.code, "request_rejected");
    c.details.supportReference = session.supportReference;
    throw c;
  }
  await pipeline.fallForward(session, c);
}

/** A request that failed: end it without a charge (idempotent) and tag the error with its support reference. */
export async function endOnError(pipeline: InferencePipeline, session: InferenceSession, e: unknown): Promise<void> {
  if (!session.done) await pipeline.abort(session, e instanceof DomainError ? e.code : "internal_error");
  if (e instanceof DomainError) e.details.supportReference ??= session.supportReference;
}
