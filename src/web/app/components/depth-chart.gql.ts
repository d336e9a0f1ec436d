import { graphql } from "../lib/tada.js";

/** One level of the routable ladder, as the chart draws it. */
export const DepthChartPriceFragment = graphql(`
  fragment DepthChartPrice on PriceLevel {
    priceCentsPerDollar
    routableDiem
  }
`);

/** The buyer corridor: ceilings run from the lowest to the highest ceiling the server allows (SPEC "Limits"). */
export const DepthChartLimitsFragment = graphql(`
  fragment DepthChartLimits on Limits {
    ceilingCentsMin
    ceilingCentsMax
  }
`);
