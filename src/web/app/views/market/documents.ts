import { DepthChartLimitsFragment, DepthChartPriceFragment } from "../../components/depth-chart.gql.js";
import { graphql } from "../../lib/tada.js";
import { FeedClearFragment } from "./clears-feed.gql.js";
import { ModelSharesFragment } from "./model-shares.gql.js";

/** The live feed's length: the `recentClears` seed and the events prepended to it in the cache. */
export const FEED_LENGTH = 30;

export const MarketQuery = graphql(
  `
  query Market {
    market {
      generatedAt
      cheapestPostedCents
      routableDiem
      usdcToBuyAll
      prices {
        priceCentsPerDollar
        routableDiem
        usdcToBuyAll
        ...DepthChartPrice
      }
    }
    limits {
      offerPriceCentsMin
      offerPriceCentsMax
      ...DepthChartLimits
    }
  }
`,
  [DepthChartPriceFragment, DepthChartLimitsFragment],
);

export const MarketStatsQuery = graphql(`
  query MarketStats {
    marketStats {
      generatedAt
      clears
      faceValue
      paid
      saved
      paidOfFaceBps
      todayClears
      todayBurn
      todayGross
      todayAverageClearingPriceCents
      todayByModality {
        modality
        clears
        burn
        gross
      }
    }
  }
`);

export const ModelStatsQuery = graphql(
  `
  query ModelStats($window: String!) {
    modelStats(window: $window) {
      generatedAt
      ...ModelShares
    }
  }
`,
  [ModelSharesFragment],
);

export const RecentClearsQuery = graphql(
  `
  query RecentClears($limit: Int!) {
    recentClears(limit: $limit) {
      ...FeedClear
    }
  }
`,
  [FeedClearFragment],
);

/** Each clear as it settles; the client's cache prepends it to `recentClears` (cache.ts). */
export const ClearsSubscription = graphql(
  `
  subscription Clears {
    clears {
      ...FeedClear
    }
  }
`,
  [FeedClearFragment],
);

/** A signal only (the ladder's levels are not in it): the views re-read `market`, throttled. */
export const CapacityChangedSubscription = graphql(`
  subscription CapacityChanged {
    capacityChanged {
      generatedAt
      cheapestPostedCents
      routableDiem
      reason
    }
  }
`);
