import { graphql } from "../../lib/tada.js";
import { UpstreamKeyRowFragment } from "./keys.gql.js";
import { OfferLimitsFragment, OfferRowFragment } from "./offers.gql.js";

/**
 * The supplier's dashboard in one read (~6,400 cost points as urql sends it, `__typename` included:
 * re-read at most every 3 s). The offers page is 30 long: at 50, the offers' standing fields (issue
 * 30) took the operation past the API's per-operation limit of 10,000.
 */
export const SupplierQuery = graphql(
  `
  query Supplier {
    myUpstreamKeys {
      ...UpstreamKeyRow
    }
    myOffers(first: 30) {
      edges {
        node {
          ...OfferRow
        }
      }
    }
    limits {
      ...OfferLimits
    }
    mySupplierLedger(limit: 20) {
      payable
      held
      paidOut
      payoutPending
      payoutMinimum
      entries {
        id
        book
        kind
        amount
        createdAt
        transactionKind
      }
      recentPayouts {
        id
        period
        amount
        status
        transaction
        createdAt
        confirmedAt
      }
    }
    mySupplierInferenceHistory(limit: 20) {
      items {
        clearId
        createdAt
        model
        modality
        priceCentsPerDollar
        burn
        gross
        fee
        earned
        refundedAt
      }
    }
  }
`,
  [UpstreamKeyRowFragment, OfferRowFragment, OfferLimitsFragment],
);

/** A signal only (fills move sold and remaining, which the event does not carry): re-read, throttled. */
export const OfferUpdatedSubscription = graphql(`
  subscription OfferUpdated {
    offerUpdated {
      at
      id
      status
      subject
    }
  }
`);

/** A signal only: the ledger's sums are the server's. */
export const EarningsChangedSubscription = graphql(`
  subscription EarningsChanged {
    earningsChanged {
      at
      kind
    }
  }
`);
