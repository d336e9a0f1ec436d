import { createUptoChainReads } from "./adapters/chain/upto-reads.js";
import type { ChainGateway } from "./adapters/chain/usdc-gateway.js";
import type { Db } from "./adapters/db.js";
import type { Facilitator } from "./adapters/facilitator/types.js";
import { createIdpVerifier } from "./adapters/idp/verify.js";
import type { EventBus } from "./adapters/pubsub.js";
import {
  type Queues,
  reconciliationProducer,
  requestPaymentReconciliationProducer,
  webhookProducer,
} from "./adapters/queues.js";
import type { ReadRouting } from "./adapters/read-replica.js";
import { createWebhookTestBudget } from "./adapters/redis/budget.js";
import { createSharedCache } from "./adapters/redis/cache.js";
import type { RedisClient } from "./adapters/redis/client.js";
import { createDeliveryLanes } from "./adapters/redis/delivery-lanes.js";
import { createEscrowUsageBoard } from "./adapters/redis/escrow-usage.js";
import { createSignupFuse } from "./adapters/redis/fuse.js";
import { GateLeases } from "./adapters/redis/gate-leases.js";
import { createInFlightRegistry } from "./adapters/redis/in-flight.js";
import type { RedisKeys } from "./adapters/redis/keys.js";
import { type Sql, sqlRunner } from "./adapters/sql.js";
import type { UpstreamClient } from "./adapters/upstream/client.js";
import { type PostWebhook, postWebhook } from "./adapters/webhooks/http-post.js";
import { type ResolveHost, systemResolveHost } from "./adapters/webhooks/resolve-host.js";
import type { Config } from "./config.js";
import { WEBHOOK_TESTS_PER_MINUTE } from "./contract/webhooks.js";
import { AccountService } from "./domain/accounts/account-service.js";
import { CatalogService } from "./domain/catalog/catalog-service.js";
import { FundingService } from "./domain/funding/funding-service.js";
import { PaymentReconciler } from "./domain/funding/reconciler.js";
import { IdentityService } from "./domain/identity/identity-service.js";
import { type ChatRequest, chatModality } from "./domain/inference/modalities/chat/chat.js";
import { type ImageRequest, imageModality, openAiImageModality } from "./domain/inference/modalities/image/image.js";
import {
  type MessagesRequest,
  MessagesTokenCounter,
  messagesModality,
} from "./domain/inference/modalities/messages/messages.js";
import { type ResponsesRequest, responsesModality } from "./domain/inference/modalities/responses/responses.js";
import { VideoQueue, videoQueueModality } from "./domain/inference/modalities/video/video-queue.js";
import { VideoQuotes } from "./domain/inference/modalities/video/video-quote.js";
import { InferenceEndpoint } from "./domain/inference/pipeline/endpoint.js";
import { createModelResolver } from "./domain/inference/pipeline/model-resolver.js";
import { InferencePipeline } from "./domain/inference/pipeline/pipeline.js";
import { OfferBook } from "./domain/inference/routing/offer-book.js";
import { sqlStores } from "./domain/inference/settlement/sql-stores.js";
import { ApiKeyService } from "./domain/keys/api-key-service.js";
import { MaintenanceService } from "./domain/maintenance/maintenance-service.js";
import { RetentionService } from "./domain/maintenance/retention.js";
import { MarketService } from "./domain/market/market-service.js";
import { RequestPaymentStore } from "./domain/pay-per-request/payment-store.js";
import { PayPerRequestService } from "./domain/pay-per-request/ppr-service.js";
import { RequestPaymentReconciler } from "./domain/pay-per-request/reconciler.js";
import { PaymentSettler } from "./domain/pay-per-request/settle.js";
import { EarningsService } from "./domain/supply/earnings.js";
import { KeyHealth } from "./domain/supply/key-health.js";
import { OfferService } from "./domain/supply/offers.js";
import { StandingOffers } from "./domain/supply/standing-offers.js";
import { SupplyService } from "./domain/supply/supply-service.js";
import { VideoJobs } from "./domain/video/video-jobs.js";
import { WEBHOOK_ACCOUNT_IN_FLIGHT } from "./domain/webhooks/delivery.js";
import { settlementWebhooks } from "./domain/webhooks/settlement-events.js";
import { WebhookService } from "./domain/webhooks/webhook-service.js";
import type { Clock } from "./lib/clock.js";
import type { Metrics } from "./lib/metrics.js";
import { SecretBox } from "./lib/secret-box.js";

/** Every domain service, built once per process and shared by REST, GraphQL, MCP and workers. */
export interface Services {
  market: MarketService;
  maintenance: MaintenanceService;
  /** retirement of old month partitions (RETENTION_MONTHS): closed, exported, dropped */
  retention: RetentionService;
  accounts: AccountService;
  apiKeys: ApiKeyService;
  identity: IdentityService;
  funding: FundingService;
  /** the chain side of funding: confirmations, reversals, reconciliation */
  payments: PaymentReconciler;
  /** pay-per-request inference under /x402/v1 (x402 `upto`): a buyer with no account pays each call */
  payPerRequest: PayPerRequestService;
  /** the chain side of pay-per-request payments: settles whose outcome was unknown, or never sent */
  requestPayments: RequestPaymentReconciler;
  /** supplier upstream keys and their balance sync */
  supply: SupplyService;
  /** supplier offers, their states and expiry */
  offers: OfferService;
  /** standing offers re-posted at UTC midnight, and price schedule steps announced (supply that runs itself) */
  standing: StandingOffers;
  /** supplier earnings and daily payouts */
  earnings: EarningsService;
  /** the one key-marking path (cooldown, auth failure, reopen) */
  keyHealth: KeyHealth;
  catalog: CatalogService;
  /** the inference pipeline every modality runs on */
  inference: InferencePipeline;
  chat: InferenceEndpoint<ChatRequest>;
  responses: InferenceEndpoint<ResponsesRequest>;
  /** `POST /v1/messages` (Anthropic's Messages API, translated onto chat) */
  messages: InferenceEndpoint<MessagesRequest>;
  /** `POST /v1/messages/count_tokens` (the admission estimate; free) */
  messageTokens: MessagesTokenCounter;
  /** `POST /v1/image/generate` */
  image: InferenceEndpoint<ImageRequest>;
  /** `POST /v1/images/generations` (OpenAI's shape, same engine and prices) */
  imagesOpenAi: InferenceEndpoint<ImageRequest>;
  /** `POST /v1/video/quote` */
  videoQuotes: VideoQuotes;
  /** `POST /v1/video/queue` */
  videoQueue: VideoQueue;
  /** `POST /v1/video/retrieve|complete`, the buyer's jobs, and the `video` worker */
  videoJobs: VideoJobs;
  /** webhook endpoints, the outbox every event is written to, and the `webhooks` worker */
  webhooks: WebhookService;
}

export interface ServiceDeps {
  config: Config;
  db: Db;
  sql: Sql;
  bus: EventBus;
  keys: RedisKeys;
  clock: Clock;
  redis: RedisClient;
  queues: Queues;
  chain: ChainGateway;
  payoutChain: ChainGateway | undefined;
  facilitator: Facilitator;
  upstream: UpstreamClient;
  /** operators' counters (GET /metrics); none by default */
  metrics?: Metrics;
  /** where read-only pages read (adapters/read-replica.ts); none: the primary (the workers' services) */
  reads?: ReadRouting;
  /** how webhook host names resolve (default node:dns; tests map names to addresses) */
  resolveHost?: ResolveHost;
  /** how a webhook is POSTed (default node:http/https, pinned to the checked address) */
  postWebhook?: PostWebhook;
}

export function createServices(deps: ServiceDeps): Services {
  const { config, db, bus, clock } = deps;
  const idp =
    config.idp.appId && (config.idp.verificationKeyPem || config.idp.jwksUrl)
      ? createIdpVerifier({
          appId: config.idp.appId,
          issuer: config.idp.issuer,
          verificationKeyPem: config.idp.verificationKeyPem,
          jwksUrl: config.idp.jwksUrl,
        })
      : null;
  const secrets = new SecretBox(config.secrets.keyEncryptionKey);
  const webhooks = new WebhookService({
    db,
    clock,
    bus,
    secrets,
    allowPrivate: config.webhooks.allowPrivate,
    retryScheduleMs: config.webhooks.retryScheduleMs,
    timeoutMs: config.webhooks.timeoutMs,
    resolveHost: deps.resolveHost ?? systemResolveHost,
    post: deps.postWebhook ?? postWebhook,
    queue: webhookProducer(deps.queues),
    lanes: createDeliveryLanes(deps.redis, deps.keys, WEBHOOK_ACCOUNT_IN_FLIGHT),
    testBudget: createWebhookTestBudget(deps.redis, deps.keys, WEBHOOK_TESTS_PER_MINUTE),
    metrics: deps.metrics,
  });
  const outbox = webhooks.outbox;
  const catalog = new CatalogService({ db, config, clock, upstream: deps.upstream, secrets });
  const apiKeys = new ApiKeyService(db, clock, deps.sql, bus, (ids) => catalog.listedIds(ids));
  // the in-flight gates this process leases; its holder names the streams it runs (in-flight records)
  const gates = new GateLeases(deps.redis, {
    holdersKey: deps.keys.gateHolders(),
    clock,
    // a process refused for want of slots another holds idle asks every process to give them back
    onPressure: (gate) => bus.publish("routingChanged", { kind: "gate_pressure", id: gate }),
  });
  const inFlight = createInFlightRegistry(deps.redis, deps.keys, () => gates.holder);
  // read-only pages (history, dashboards, market statistics) may read a replica; nothing else does
  const reader = deps.reads ? (accountId: string | null) => (deps.reads as ReadRouting).reader(accountId) : undefined;
  const market = new MarketService(
    db,
    sqlRunner(deps.sql),
    bus,
    clock,
    { store: createSharedCache(deps.redis), keys: deps.keys },
    reader,
  );
  const stores = sqlStores(deps.sql, settlementWebhooks(outbox));
  // the offer book a request routes on; a key marked here is read again before the next request
  const book = new OfferBook(stores.offers, clock);
  // the one key-marking path (cooldown, auth failure, reopen), for the pipeline and the supply side
  const keyHealth = new KeyHealth({
    db,
    clock,
    bus,
    market,
    webhooks: outbox,
    onSupplyChanged: () => book.invalidate(),
  });
  const supply = new SupplyService({ db, clock, bus, upstream: deps.upstream, secrets, keyHealth });
  const offers = new OfferService({ db, clock, bus, keyHealth, webhooks: outbox });
  const pipeline = new InferencePipeline({
    stores,
    book,
    config,
    clock,
    bus,
    gates,
    keys: deps.keys,
    secrets,
    keyHealth,
    resolveModel: createModelResolver(catalog, clock),
    // SPEC: a key the upstream called out of capacity gets its balance refreshed
    onKeyExhausted: async (upstreamKeyId) => {
      await supply.refreshKeyBalance(upstreamKeyId);
    },
    // an unclear 401/403 is confirmed by the same read (a key refused there is marked), so one
    // refused route does not take a working key out of routing
    confirmKey: async (upstreamKeyId) => {
      await supply.refreshKeyBalance(upstreamKeyId);
    },
    forgetApiKey: (apiKeyId) => apiKeys.forget(apiKeyId),
    inFlight,
    escrowUsage: createEscrowUsageBoard(deps.redis, deps.keys),
    metrics: deps.metrics,
    // a fold that sold an offer out: it becomes depleted, with its webhook
    soldOut: async (sold) => {
      for (const o of sold) await offers.markDepletedIfEmpty(o.offerId);
    },
  });
  const router = pipeline;
  const hosts = [...new Set([config.urls.base, config.urls.web].map((u) => new URL(u).host))];
  const videoQuotes = new VideoQuotes({
    pipeline,
    upstream: deps.upstream,
    run: sqlRunner(deps.sql),
    clock,
    keyHealth,
    markupBps: config.fees.videoMarkupBps,
  });
  const endpoints = {
    chat: new InferenceEndpoint(pipeline, deps.upstream, chatModality),
    image: new InferenceEndpoint(pipeline, deps.upstream, imageModality),
    imagesOpenAi: new InferenceEndpoint(pipeline, deps.upstream, openAiImageModality),
    responses: new InferenceEndpoint(pipeline, deps.upstream, responsesModality),
    messages: new InferenceEndpoint(pipeline, deps.upstream, messagesModality),
  };
  // pay per request: the same endpoints, funded by an x402 upto payment
  const requestPaymentStore = new RequestPaymentStore({ db, clock });
  const settler = new PaymentSettler({
    facilitator: deps.facilitator,
    store: requestPaymentStore,
    reconciliation: requestPaymentReconciliationProducer(deps.queues),
  });
  return {
    market,
    maintenance: new MaintenanceService(db, clock),
    retention: new RetentionService({
      sql: deps.sql,
      clock,
      months: config.retention.months,
      exportDir: config.retention.exportDir,
    }),
    accounts: new AccountService(
      db,
      bus,
      clock,
      (accountId) => pipeline?.forgetCeiling(accountId),
      inFlight,
      (accountId, holders) => router.escrow.inUse(accountId, holders),
      reader,
    ),
    apiKeys,
    keyHealth,
    offers,
    standing: new StandingOffers({ db, clock, bus, keyHealth, offers, balances: supply, market, webhooks: outbox }),
    earnings: new EarningsService({
      db,
      clock,
      bus,
      payoutChain: deps.payoutChain,
      confirmationBlocks: config.chain.confirmationBlocks,
      webhooks: outbox,
    }),
    identity: new IdentityService(db, clock, idp, {
      sessionSecret: config.secrets.sessionSecret,
      siweDomains: hosts,
      siweUri: config.urls.web,
      chainId: config.chain.id,
    }),
    funding: new FundingService({
      db,
      config,
      clock,
      bus,
      facilitator: deps.facilitator,
      apiKeys,
      fuse: createSignupFuse(deps.redis, deps.keys, config.signupFuse.max, config.signupFuse.windowSeconds),
      reconciliation: reconciliationProducer(deps.queues),
      chain: deps.chain,
    }),
    payments: new PaymentReconciler({
      db,
      clock,
      bus,
      chain: deps.chain,
      apiKeys,
      confirmationBlocks: config.chain.confirmationBlocks,
      webhooks: outbox,
    }),
    payPerRequest: new PayPerRequestService({
      config,
      clock,
      db,
      facilitator: deps.facilitator,
      chain: deps.chain,
      store: requestPaymentStore,
      settler,
      endpoints: {
        chat_completions: endpoints.chat,
        responses: endpoints.responses,
        messages: endpoints.messages,
        image_generate: endpoints.image,
        images_generations: endpoints.imagesOpenAi,
      },
    }),
    requestPayments: new RequestPaymentReconciler({
      store: requestPaymentStore,
      settler,
      reads: createUptoChainReads(deps.chain),
      chain: deps.chain,
      clock,
      confirmationBlocks: config.chain.confirmationBlocks,
    }),
    supply,
    catalog,
    inference: pipeline,
    chat: endpoints.chat,
    image: endpoints.image,
    imagesOpenAi: endpoints.imagesOpenAi,
    videoQuotes,
    videoQueue: new VideoQueue({
      endpoint: new InferenceEndpoint(
        pipeline,
        deps.upstream,
        videoQueueModality({ quotes: videoQuotes, markupBps: config.fees.videoMarkupBps }),
      ),
      clock,
      bus,
    }),
    videoJobs: new VideoJobs({
      db,
      upstream: deps.upstream,
      clock,
      bus,
      openKey: (id) => supply.openKey(id),
      metrics: deps.metrics,
      webhooks: outbox,
    }),
    webhooks,
    responses: endpoints.responses,
    messages: endpoints.messages,
    messageTokens: new MessagesTokenCounter(pipeline),
  };
}
