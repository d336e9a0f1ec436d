import type { Services } from "../src/services.js";
import type { Processor } from "./processor.js";

/** Queue `retention`: the monthly partitions' retirement (RETENTION_MONTHS), one run per job. */
export function retentionProcessor(services: Services): Processor {
  return async (job) => {
    if (job.name !== "retention") throw new Error(`unknown retention job ${job.name}`);
    return services.retention.run();
  };
}

/** Queue `maintenance`: housekeeping, one service call per job. */
export function maintenanceProcessor(services: Services): Processor {
  return async (job) => {
    switch (job.name) {
      case "purge-expired":
        return services.maintenance.purgeExpired();
      case "release-expired-holds":
        return services.inference.escrow.releaseExpired();
      case "ensure-partitions":
        return services.maintenance.ensurePartitions();
      default:
        throw new Error(`unknown maintenance job ${job.name}`);
    }
  };
}
