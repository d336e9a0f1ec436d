import { graphql } from "../../lib/tada.js";

/** What the chart sums: a request's cost and burn, bucketed by when it started. */
export const SpendChartRequestFragment = graphql(`
  fragment SpendChartRequest on InferenceRequest {
    startedAt
    cost
    burn
  }
`);
