import { graphql } from "../../lib/tada.js";

/** One upstream key as the keys table and the offer form show it. */
export const UpstreamKeyRowFragment = graphql(`
  fragment UpstreamKeyRow on UpstreamKey {
    id
    label
    maskedKey
    status
    balance
    lastBalanceAt
    createdAt
    revokedAt
    liveOffer {
      id
    }
  }
`);

export const RegisterUpstreamKeyMutation = graphql(`
  mutation RegisterUpstreamKey($input: RegisterUpstreamKeyInput!) {
    registerUpstreamKey(input: $input) {
      upstreamKey {
        id
        label
        maskedKey
        status
      }
    }
  }
`);

export const RevokeUpstreamKeyMutation = graphql(`
  mutation RevokeUpstreamKey($input: RevokeUpstreamKeyInput!) {
    revokeUpstreamKey(input: $input) {
      cancelledOffers
      upstreamKey {
        id
        status
      }
    }
  }
`);
