import type { EndItem } from "../src/domain/inference/settlement/end-item.js";

/**
 * An ended request as the pipeline sends it to the settlement (`endItem`'s answer): failed, no charge,
 * no attempts, no rows, no payment, a chat request on model `m` at a 50-cent ceiling ended now,
 * unless `o` says otherwise. The ids name the request.
 */
export function endedItem(
  o: Pick<EndItem, "requestId" | "supportReference" | "accountId"> & Partial<EndItem>,
): EndItem {
  const now = new Date();
  return {
    apiKeyId: null,
    route: "chat",
    modality: "text",
    model: "m",
    stream: false,
    status: "failed",
    errorCode: "test",
    ceilingCents: 50,
    admittedMaxTokens: null,
    attemptCount: 0,
    startedAt: now,
    firstByteAt: null,
    endedAt: now,
    charge: null,
    returns: [],
    attempts: [],
    rows: {},
    paymentId: null,
    ...o,
  };
}
