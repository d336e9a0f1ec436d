import { graphql } from "../../lib/tada.js";

/** One offer as its table row shows it; the offer mutations answer with the same fields. */
export const OfferRowFragment = graphql(`
  fragment OfferRow on Offer {
    id
    priceCentsPerDollar
    effectivePriceCentsPerDollar
    repostDaily
    dailyQuantity
    schedule {
      fromUtc
      priceCentsPerDollar
    }
    repostedFromId
    quantity
    remaining
    reserved
    sold
    status
    keyStatus
    upstreamKeyId
    createdAt
    expiresAt
    endedAt
  }
`);

/** An offer's price bounds, as the server enforces them. */
export const OfferLimitsFragment = graphql(`
  fragment OfferLimits on Limits {
    offerPriceCentsMin
    offerPriceCentsMax
  }
`);

export const PostOfferMutation = graphql(
  `
  mutation PostOffer($input: PostOfferInput!) {
    postOffer(input: $input) {
      offer {
        ...OfferRow
      }
    }
  }
`,
  [OfferRowFragment],
);

export const UpdateOfferMutation = graphql(
  `
  mutation UpdateOffer($input: UpdateOfferInput!) {
    updateOffer(input: $input) {
      offer {
        ...OfferRow
      }
    }
  }
`,
  [OfferRowFragment],
);

export const CancelOfferMutation = graphql(
  `
  mutation CancelOffer($input: CancelOfferInput!) {
    cancelOffer(input: $input) {
      offer {
        ...OfferRow
      }
    }
  }
`,
  [OfferRowFragment],
);
