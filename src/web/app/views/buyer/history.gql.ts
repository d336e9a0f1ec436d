import { graphql } from "../../lib/tada.js";

/** One row of the history table. */
export const HistoryRowFragment = graphql(`
  fragment HistoryRow on InferenceRequest {
    requestId
    supportReference
    modality
    model
    status
    errorCode
    clearingPriceCents
    burn
    cost
    startedAt
  }
`);

/** Everything the detail dialog shows of one request. */
export const RequestDetailFragment = graphql(`
  fragment RequestDetail on InferenceRequest {
    requestId
    supportReference
    route
    modality
    model
    stream
    status
    errorCode
    maxPriceCents
    clearingPriceCents
    burn
    cost
    attempts
    startedAt
    completedAt
  }
`);

export const RequestDetailQuery = graphql(
  `
  query RequestDetail($supportReference: String!) {
    myInferenceRequest(supportReference: $supportReference) {
      ...RequestDetail
    }
  }
`,
  [RequestDetailFragment],
);
