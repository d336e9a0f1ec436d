import { graphql } from "../../lib/tada.js";
import { ApiKeyLimitsFragment, ApiKeyRowFragment } from "./api-keys.gql.js";
import { CeilingLimitsFragment, CeilingMarketFragment } from "./ceiling.gql.js";
import { HistoryRowFragment } from "./history.gql.js";
import { PaymentRowFragment } from "./payments.gql.js";
import { SpendChartRequestFragment } from "./spend-chart.gql.js";
import { VideoJobRowFragment } from "./video-jobs.gql.js";

/** The buyer's account: balances, ceiling and its bounds, keys with their spend, recent payments, savings (~1,500 cost points). */
export const BuyerQuery = graphql(
  `
  query Buyer {
    viewer {
      accountId
      walletAddress
      maxPriceCentsPerDollar
      confirmedUsdc
      pendingUsdc
      reservedUsdc
      availableUsdc
      hasEverFunded
      firstFundedAt
      apiKeys {
        ...ApiKeyRow
      }
      payments(first: 10) {
        edges {
          node {
            ...PaymentRow
          }
        }
      }
    }
    limits {
      ...CeilingLimits
      ...ApiKeyLimits
    }
    mySavings {
      clears
      faceValue
      paid
      atCeiling
      savedVsFace
      savedVsCeiling
    }
  }
`,
  [ApiKeyRowFragment, PaymentRowFragment, CeilingLimitsFragment, ApiKeyLimitsFragment],
);

export const HistoryQuery = graphql(
  `
  query History($limit: Int!, $cursor: String) {
    myInferenceHistory(limit: $limit, cursor: $cursor) {
      items {
        requestId
        ...HistoryRow
        ...SpendChartRequest
      }
      nextCursor
    }
  }
`,
  [HistoryRowFragment, SpendChartRequestFragment],
);

/** The ladder as the ceiling panel reads it (re-read on `capacityChanged`, throttled). */
export const BuyerMarketQuery = graphql(
  `
  query BuyerMarket {
    market {
      ...CeilingMarket
    }
  }
`,
  [CeilingMarketFragment],
);

export const VideoJobsQuery = graphql(
  `
  query VideoJobs {
    myVideoJobs(first: 20) {
      ...VideoJobRow
    }
  }
`,
  [VideoJobRowFragment],
);

/** Written into the cache as it comes (cache.ts): no re-read of the list. */
export const VideoJobUpdatedSubscription = graphql(
  `
  subscription VideoJobUpdated {
    videoJobUpdated {
      ...VideoJobRow
    }
  }
`,
  [VideoJobRowFragment],
);

/** A signal only: the balances are the server's sums, so the account is re-read, throttled. */
export const BalanceChangedSubscription = graphql(`
  subscription BalanceChanged {
    balanceChanged {
      at
      kind
    }
  }
`);

/** A signal only, like `balanceChanged`. */
export const PaymentConfirmedSubscription = graphql(`
  subscription PaymentConfirmed {
    paymentConfirmed {
      at
      paymentId
    }
  }
`);
