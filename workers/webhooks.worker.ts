import type { Services } from "../src/services.js";
import type { Processor } from "./processor.js";

/**
 * Queue `webhooks`: `deliver` (one attempt of one outbox row; the row says whether it is still due,
 * so a stale or doubled job does nothing) and `sweep` (queues the pending rows whose job was lost:
 * on worker start and every 30 s).
 */
export function webhooksProcessor(services: Services): Processor {
  return async (job) => {
    switch (job.name) {
      case "deliver":
        return services.webhooks.deliver(String(job.data.eventId), Number(job.data.attempt));
      case "sweep":
        return services.webhooks.sweep();
      default:
        throw new Error(`unknown webhooks job ${job.name}`);
    }
  };
}
