import { graphql } from "../../lib/tada.js";

/** One anonymised clear as the feed shows it (the `recentClears` seed and the `clears` event alike). */
export const FeedClearFragment = graphql(`
  fragment FeedClear on Clear {
    at
    model
    modality
    priceCentsPerDollar
    burnDiem
    grossUsdc
  }
`);
