import type { Services } from "../src/services.js";
import type { Processor } from "./processor.js";

/** Queue `confirmations`: pending credit → confirmed at CONFIRMATION_BLOCKS depth. */
export function confirmationsProcessor(services: Services): Processor {
  return async (job) => {
    if (job.name !== "confirm-pending") throw new Error(`unknown confirmations job ${job.name}`);
    return services.payments.confirmPending();
  };
}

/**
 * Queue `reconciliation`: one funding payment (queued by the 409 path) or one pay-per-request
 * payment (queued by a settle whose outcome is unknown), each retried with backoff until the chain
 * decides, and the periodic scan of every uncredited or unsettled payment.
 */
export function reconciliationProcessor(services: Services): Processor {
  return async (job) => {
    switch (job.name) {
      case "reconcile-payment": {
        const outcome = await services.payments.reconcilePayment(String(job.data.paymentId));
        if (outcome === "waiting") throw new Error("settlement not visible on chain yet; retrying");
        return outcome;
      }
      case "reconcile-request-payment": {
        const outcome = await services.requestPayments.reconcile(String(job.data.paymentId));
        if (outcome === "waiting") throw new Error("pay-per-request settlement not decided on chain yet; retrying");
        return outcome;
      }
      case "scan-chain":
        return {
          funding: await services.payments.reconcileOutstanding(),
          perRequest: await services.requestPayments.reconcileOutstanding(),
        };
      default:
        throw new Error(`unknown reconciliation job ${job.name}`);
    }
  };
}
