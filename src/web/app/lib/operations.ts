/**
 * Every operation the app sends, in one list (test/integration/graphql/limits.test.ts checks each
 * against the API's per-operation limits). Each is written beside the view or component that uses
 * it, typed from `schema.graphql` by gql.tada (lib/tada.ts).
 */
export {
  CreateWebhookMutation,
  DeleteWebhookMutation,
  EnableWebhookMutation,
  RotateWebhookSecretMutation,
  SendTestWebhookMutation,
  WebhookDeliveriesQuery,
  WebhooksQuery,
  WebhookUpdatedSubscription,
} from "../components/webhooks/webhooks.gql.js";
export { CreateApiKeyMutation, RevokeApiKeyMutation, UpdateApiKeyMutation } from "../views/buyer/api-keys.gql.js";
export { SetMaxPriceMutation } from "../views/buyer/ceiling.gql.js";
export {
  BalanceChangedSubscription,
  BuyerMarketQuery,
  BuyerQuery,
  HistoryQuery,
  PaymentConfirmedSubscription,
  VideoJobsQuery,
  VideoJobUpdatedSubscription,
} from "../views/buyer/documents.js";
export { RequestDetailQuery } from "../views/buyer/history.gql.js";
export {
  CapacityChangedSubscription,
  ClearsSubscription,
  MarketQuery,
  MarketStatsQuery,
  ModelStatsQuery,
  RecentClearsQuery,
} from "../views/market/documents.js";
export { EarningsChangedSubscription, OfferUpdatedSubscription, SupplierQuery } from "../views/supplier/documents.js";
export { RegisterUpstreamKeyMutation, RevokeUpstreamKeyMutation } from "../views/supplier/keys.gql.js";
export { CancelOfferMutation, PostOfferMutation, UpdateOfferMutation } from "../views/supplier/offers.gql.js";
export { ViewerIdentityQuery } from "./viewer.js";
