import { graphql } from "../../lib/tada.js";

/** One video job as the table shows it; `videoJobUpdated` carries the same fields into the cache. */
export const VideoJobRowFragment = graphql(`
  fragment VideoJobRow on VideoJob {
    queueId
    model
    status
    chargeUsdc
    clearingPriceCents
    quoteDiem
    createdAt
    deliveredAt
    refundedAt
    failureReason
    supportReference
  }
`);
