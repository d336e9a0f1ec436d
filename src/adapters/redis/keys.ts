/**
 * Every Redis key and channel, declared once. All carry the deployment prefix (`svc` by default;
 * tests use their own) so runs never collide. Never build a key string inline elsewhere.
 */
export interface RedisKeys {
  readonly prefix: string;
  /** pub/sub channel prefix for GraphQL subscription fan-out */
  pubsubChannel(topic: string): string;
  /** BullMQ prefix (queues live under `<prefix>:bull:<queue>`) */
  bullPrefix(): string;
  /** capacity response cache (30 s) */
  capacityCache(maxPriceCents: number | "all"): string;
  /** in-flight gate of one buyer API key (hash: holder process → slots; see GateLeases) */
  apiKeyInFlight(apiKeyId: string): string;
  /** in-flight gate of one wallet's pay-per-request calls (no key: the wallet's account stands in) */
  walletInFlight(accountId: string): string;
  /** in-flight gate of one supplier upstream key */
  upstreamKeyInFlight(upstreamKeyId: string): string;
  /** global in-flight gate of small-tier models (throttling) */
  smallModelGate(): string;
  /** the processes holding gate slots, scored by lease expiry */
  gateHolders(): string;
  /** a streamed request in flight, by support reference (until its record is written) */
  inFlightRequest(supportReference: string): string;
  /** the answers to one question "how much of this buyer's slice do your requests in flight use?" */
  escrowUsage(query: string): string;
  /** per-wallet image gate */
  walletImageGate(accountId: string): string;
  /** global signup fuse window counter */
  signupFuse(windowStart: number): string;
  /** GraphQL cost points one caller spent in a fixed one-minute window (graphql/limits.ts) */
  graphqlCost(subject: string, windowStart: number): string;
  /** one-shot locks for periodic jobs */
  lock(name: string): string;
  /** webhook delivery attempts of one account in flight (zset lease token → expiry ms; delivery-lanes.ts) */
  webhookAccountLane(accountId: string): string;
  /** the webhook delivery attempt of one endpoint in flight (its lease token, with a TTL) */
  webhookEndpointLane(endpointId: string): string;
  /** `POST /v1/webhooks/{id}/test` calls of one account in a fixed one-minute window */
  webhookTests(accountId: string, windowStart: number): string;
}

export function redisKeys(prefix: string): RedisKeys {
  const p = prefix.replace(/:+$/, "");
  return {
    prefix: p,
    pubsubChannel: (topic) => `${p}:pubsub:${topic}`,
    bullPrefix: () => `${p}:bull`,
    capacityCache: (maxPriceCents) => `${p}:capacity:${maxPriceCents}`,
    apiKeyInFlight: (apiKeyId) => `${p}:gate:apikey:${apiKeyId}`,
    walletInFlight: (accountId) => `${p}:gate:wallet:${accountId}`,
    upstreamKeyInFlight: (upstreamKeyId) => `${p}:gate:upstream:${upstreamKeyId}`,
    smallModelGate: () => `${p}:gate:small-model-tier`,
    gateHolders: () => `${p}:gate-holders`,
    inFlightRequest: (ref) => `${p}:inflight:request:${ref}`,
    escrowUsage: (query) => `${p}:escrow-usage:${query}`,
    walletImageGate: (accountId) => `${p}:gate:image:${accountId}`,
    signupFuse: (windowStart) => `${p}:fuse:signup:${windowStart}`,
    graphqlCost: (subject, windowStart) => `${p}:budget:graphql:${subject}:${windowStart}`,
    lock: (name) => `${p}:lock:${name}`,
    webhookAccountLane: (accountId) => `${p}:webhook:lane:account:${accountId}`,
    webhookEndpointLane: (endpointId) => `${p}:webhook:lane:endpoint:${endpointId}`,
    webhookTests: (accountId, windowStart) => `${p}:budget:webhook-test:${accountId}:${windowStart}`,
  };
}
