import type { Services } from "../src/services.js";
import type { Processor } from "./processor.js";

/**
 * Queue `video`: one sweep per tick (scheduler id `video-sweep`) — poll the rendering jobs that are
 * due, refund provider failures at once and finishes without media when due, expire jobs never
 * delivered. Every step is a conditional transition of the job's row, so a retried or concurrent
 * sweep (another worker process) never moves a job twice or refunds it twice.
 */
export function videoProcessor(services: Services): Processor {
  return async (job) => {
    switch (job.name) {
      case "video-sweep":
        return services.videoJobs.sweep();
      default:
        throw new Error(`unknown video job ${job.name}`);
    }
  };
}
