import { type Job, UnrecoverableError } from "bullmq";
import { jobTrace } from "../src/adapters/queues.js";
import { isDomainError } from "../src/lib/errors.js";
import { logger } from "../src/lib/logger.js";
import { tracingOn, withSpan } from "../src/lib/tracing.js";

export type Processor = (job: Job) => Promise<unknown>;

/**
 * Wraps a processor with the error policy of STYLE §4: a non-retryable DomainError stops
 * retries (UnrecoverableError); anything else is rethrown for retry with backoff. Logged once here.
 */
export function withErrorPolicy(queue: string, fn: Processor): Processor {
  return async (job) => {
    try {
      return await fn(job);
    } catch (e) {
      const final = isDomainError(e) && !e.retryable;
      logger.error({ err: e, queue, job: job.name, jobId: job.id, attempt: job.attemptsMade + 1, final }, "job failed");
      if (final) throw new UnrecoverableError(`${(e as Error).message}`);
      throw e;
    }
  };
}

/**
 * Runs each job in a CONSUMER span (docs/operations.md "Traces"), the child of the span that added
 * it when its data carries one (`jobTrace`, adapters/queues.ts: a webhook delivery queued in a
 * request continues that request's trace), else the root of a trace of its own (a scheduler's run).
 * Messaging semantic conventions; no job data beyond its name, id and attempt. Off: `fn` itself.
 */
export function withJobSpan(queue: string, fn: Processor): Processor {
  return (job) => {
    if (!tracingOn()) return fn(job);
    return withSpan(
      `process ${queue}`,
      {
        "messaging.system": "bullmq",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": queue,
        "messaging.message.id": job.id,
        "svc.job.name": job.name,
        "svc.job.attempt": job.attemptsMade + 1,
      },
      () => fn(job),
      { kind: "consumer", from: jobTrace(job.data) ?? {} },
    );
  };
}
