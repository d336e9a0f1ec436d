/**
 * Every Redis key and channel, declared once. All carry the deployment prefix (`svc` by default;
 * tests use their own) so runs never collide. Never build a key string inline elsewhere.
 *
 * On a Redis Cluster (`cluster: true`) the keys one script or transaction touches together carry
 * the same hash tag (`{…}`: only that part picks the slot), so each lands in one slot
 * (docs/decisions.md "Redis Cluster"):
 * - every BullMQ queue has a prefix of its own, `<p>:bull:{<queue>}` (BullMQ's scripts touch many
 *   keys of one queue, never two queues);
 * - every gate and the gate holders' set share `{<p>:gate}` (the grow script reads the holders);
 * - an account's webhook lanes share `{<p>:wh:<account id>}` (take/release touch both lanes).
 * Every other key stands alone (one key per command). On one Redis the names are unchanged from
 * before keys were grouped for a cluster, so a running deployment keeps its queues and gates across
 * the upgrade.
 */
export interface RedisKeys {
  readonly prefix: string;
  /** pub/sub channel prefix for GraphQL subscription fan-out */
  pubsubChannel(topic: string): string;
  /** BullMQ prefix on one Redis (queues live under `<prefix>:bull:<queue>`) */
  bullPrefix(): string;
  /** the BullMQ prefix of one queue: `bullPrefix()` on one Redis, `<prefix>:bull:{<queue>}` on a cluster */
  queuePrefix(queue: string): string;
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
  /** the webhook delivery attempt of one endpoint (of `accountId`) in flight (its lease token, with a TTL) */
  webhookEndpointLane(accountId: string, endpointId: string): string;
  /** `POST /v1/webhooks/{id}/test` calls of one account in a fixed one-minute window */
  webhookTests(accountId: string, windowStart: number): string;
}

export function redisKeys(prefix: string, opts: { cluster?: boolean } = {}): RedisKeys {
  const p = prefix.replace(/:+$/, "");
  const cluster = opts.cluster === true;
  // on a cluster: `{<p>:gate}` before the gate's own name; on one Redis: nothing (names as before)
  const gate = cluster ? `${p}:{${p}:gate}:gate` : `${p}:gate`;
  const lane = (accountId: string) => (cluster ? `${p}:{${p}:wh:${accountId}}:webhook:lane` : `${p}:webhook:lane`);
  return {
    prefix: p,
    pubsubChannel: (topic) => `${p}:pubsub:${topic}`,
    bullPrefix: () => `${p}:bull`,
    queuePrefix: (queue) => (cluster ? `${p}:bull:{${queue}}` : `${p}:bull`),
    capacityCache: (maxPriceCents) => `${p}:capacity:${maxPriceCents}`,
    apiKeyInFlight: (apiKeyId) => `${gate}:apikey:${apiKeyId}`,
    walletInFlight: (accountId) => `${gate}:wallet:${accountId}`,
    upstreamKeyInFlight: (upstreamKeyId) => `${gate}:upstream:${upstreamKeyId}`,
    smallModelGate: () => `${gate}:small-model-tier`,
    gateHolders: () => (cluster ? `${p}:{${p}:gate}:gate-holders` : `${p}:gate-holders`),
    inFlightRequest: (ref) => `${p}:inflight:request:${ref}`,
    escrowUsage: (query) => `${p}:escrow-usage:${query}`,
    walletImageGate: (accountId) => `${gate}:image:${accountId}`,
    signupFuse: (windowStart) => `${p}:fuse:signup:${windowStart}`,
    graphqlCost: (subject, windowStart) => `${p}:budget:graphql:${subject}:${windowStart}`,
    lock: (name) => `${p}:lock:${name}`,
    webhookAccountLane: (accountId) => `${lane(accountId)}:account:${accountId}`,
    webhookEndpointLane: (accountId, endpointId) => `${lane(accountId)}:endpoint:${endpointId}`,
    webhookTests: (accountId, windowStart) => `${p}:budget:webhook-test:${accountId}:${windowStart}`,
  };
}
