import { type Job, UnrecoverableError } from "bullmq";
import { isDomainError } from "../src/lib/errors.js";
import { logger } from "../src/lib/logger.js";

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
