import { graphql } from "../../lib/tada.js";

/** Usage shares by model over a window (withheld below the privacy threshold). */
export const ModelSharesFragment = graphql(`
  fragment ModelShares on ModelStats {
    window
    hasSufficientVolume
    models {
      id
      usageShare
    }
  }
`);
