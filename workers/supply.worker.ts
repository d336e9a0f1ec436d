import type { Services } from "../src/services.js";
import type { Processor } from "./processor.js";

/**
 * Queue `expiry`: DIEM expires at UTC midnight; offers expire exactly once across processes,
 * standing offers are posted again for the new day once, and each price schedule step that took
 * effect is announced once (issue 30).
 */
export function expiryProcessor(services: Services): Processor {
  return async (job) => {
    switch (job.name) {
      case "expire-offers":
        return services.offers.expireDue();
      case "repost-offers":
        return services.standing.repostDue();
      case "price-steps":
        return services.standing.announcePriceSteps();
      default:
        throw new Error(`unknown expiry job ${job.name}`);
    }
  };
}

/** Queue `sync`: upstream key balances and the model catalog. */
export function syncProcessor(services: Services): Processor {
  return async (job) => {
    switch (job.name) {
      case "sync-key-balances":
        return services.supply.syncKeyBalances();
      case "sync-catalog":
        return services.catalog.sync();
      default:
        throw new Error(`unknown sync job ${job.name}`);
    }
  };
}

/** Queue `payouts`: the daily supplier payout run. */
export function payoutsProcessor(services: Services): Processor {
  return async (job) => {
    if (job.name !== "daily-payouts") throw new Error(`unknown payouts job ${job.name}`);
    return services.earnings.runDailyPayouts();
  };
}
