import { graphql } from "../../lib/tada.js";

export const PaymentRowFragment = graphql(`
  fragment PaymentRow on Payment {
    id
    kind
    status
    amount
    transaction
    confirmations
    confirmationsRequired
    createdAt
    confirmedAt
  }
`);
