import type { Services } from "../src/services.js";
import type { Processor } from "./processor.js";

/** Queue `maintenance`: housekeeping, one service call per job. */
export function maintenanceProcessor(services: Services): Processor {
  return async (job) => {
    switch (job.name) {
      case "purge-expired":
        return services.maintenance.purgeExpired();
      case "release-expired-holds":
        return services.inference.escrow.releaseExpired();
      default:
        throw new Error(`unknown maintenance job ${job.name}`);
    }
  };
}
