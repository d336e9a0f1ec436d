import { graphql } from "../../lib/tada.js";

/** What the ceiling panel needs of the market: is anything posted at or below the ceiling. */
export const CeilingMarketFragment = graphql(`
  fragment CeilingMarket on Market {
    cheapestPostedCents
    prices {
      priceCentsPerDollar
      routableDiem
    }
  }
`);

/** The ceiling's bounds, as the server enforces them. */
export const CeilingLimitsFragment = graphql(`
  fragment CeilingLimits on Limits {
    ceilingCentsMin
    ceilingCentsMax
  }
`);

export const SetMaxPriceMutation = graphql(`
  mutation SetMaxPrice($input: SetMaxPriceInput!) {
    setMaxPrice(input: $input) {
      maxPriceCentsPerDollar
      walletAddress
    }
  }
`);
