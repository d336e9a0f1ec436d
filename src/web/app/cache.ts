import { type CacheExchangeOpts, cacheExchange } from "@urql/exchange-graphcache";
import { type ResultOf, readFragment } from "./lib/tada";
import { VideoJobsQuery, type VideoJobUpdatedSubscription } from "./views/buyer/documents";
import { VideoJobRowFragment } from "./views/buyer/video-jobs.gql";
import { clearSignature } from "./views/market/clears-feed";
import { FeedClearFragment } from "./views/market/clears-feed.gql";
import { type ClearsSubscription, FEED_LENGTH, RecentClearsQuery } from "./views/market/documents";

/** Objects with no identity of their own: stored inside their parent (a singleton, a page, an event). */
const EMBEDDED = [
  "AccountLedgerConnection",
  "AccountLedgerConnectionEdge",
  "AccountPaymentsConnection",
  "AccountPaymentsConnectionEdge",
  "BalanceChanged",
  "BuyerSavings",
  "CapacityChanged",
  "Clear",
  "CreateApiKeyPayload",
  "EarningsChanged",
  "InferenceRequestPage",
  "Limits",
  "Market",
  "MarketStats",
  "ModalityDay",
  "ModelDailyShare",
  "ModelStats",
  // a model's share belongs to a window: two windows must not share one `ModelUsage:<model>`
  "ModelUsage",
  "OfferPayload",
  // an event about an offer, not the offer (its `id` is the offer's)
  "OfferUpdated",
  "PageInfo",
  "PaymentConfirmed",
  "PriceLevel",
  "QueryMyOffersConnection",
  "QueryMyOffersConnectionEdge",
  "RevokeApiKeyPayload",
  "SetMaxPricePayload",
  "SupplierClearPage",
  "SupplierLedger",
  "UpdateApiKeyPayload",
  "UpstreamKeyPayload",
  "WebhookDeliveryPage",
  "WebhookUpdated",
  "WebhookWithSecret",
];

/** `VideoJobsQuery` reads `myVideoJobs(first: 20)`. */
const VIDEO_JOBS_SHOWN = 20;

type Keys = NonNullable<CacheExchangeOpts["keys"]>;

const keys: Keys = {
  ...Object.fromEntries(EMBEDDED.map((t) => [t, () => null])),
  Account: (a) => (a.accountId as string | undefined) ?? null,
  InferenceRequest: (r) => (r.requestId as string | undefined) ?? null,
  SupplierClear: (c) => (c.clearId as string | undefined) ?? null,
  VideoJob: (j) => (j.queueId as string | undefined) ?? null,
};

/**
 * The app's normalised cache (urql Graphcache). Entities with an identity (an account, a key, an
 * offer, a payment, a request, a video job) are stored once, so every query showing one sees its
 * latest fields. Events that carry what the page shows are written into the cache here, with no
 * query re-run: a clear is prepended to the live feed, a video job's new state replaces the old
 * (a new job joins the list). Events that only signal a change (balances, payments, capacity,
 * offers and earnings: the numbers are the server's sums) make the views re-read, throttled
 * (lib/live.ts `useCoalesced`).
 */
export function createCache() {
  return cacheExchange({
    keys,
    updates: {
      Subscription: {
        clears(result, _args, cache) {
          const event = (result as ResultOf<typeof ClearsSubscription>).clears;
          const sig = clearSignature(readFragment(FeedClearFragment, event));
          cache.updateQuery({ query: RecentClearsQuery, variables: { limit: FEED_LENGTH } }, (data) => {
            if (!data) return data;
            // one entry per clear even if the stream delivers it twice (a resubscription replays the
            // tick) or the seed already holds it
            if (data.recentClears.some((c) => clearSignature(readFragment(FeedClearFragment, c)) === sig)) return data;
            return { ...data, recentClears: [event, ...data.recentClears].slice(0, FEED_LENGTH) };
          });
        },
        videoJobUpdated(result, _args, cache) {
          const job = (result as ResultOf<typeof VideoJobUpdatedSubscription>).videoJobUpdated;
          // the job's entity is already written (keyed by queueId); a job queued since the list was
          // read joins it, newest first
          const queueId = readFragment(VideoJobRowFragment, job).queueId;
          cache.updateQuery({ query: VideoJobsQuery }, (data) => {
            if (!data) return data;
            const jobs = data.myVideoJobs;
            if (readFragment(VideoJobRowFragment, jobs).some((j) => j.queueId === queueId)) return data;
            return { ...data, myVideoJobs: [job, ...jobs].slice(0, VIDEO_JOBS_SHOWN) };
          });
        },
      },
    },
  });
}
