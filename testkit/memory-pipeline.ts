// The inference pipeline built on in-memory stores (testkit/memory-stores.ts): no Postgres, no Redis.
// For unit tests of the pipeline's rules (test/unit/inference); the integration tests run the real one.
import { createPubSub } from "graphql-yoga";
import type { EventBus, Topics } from "../src/adapters/pubsub.js";
import { redisKeys } from "../src/adapters/redis/keys.js";
import { type Config, LOCAL_KEY_ENCRYPTION_KEY, loadConfig } from "../src/config.js";
import { textPricer } from "../src/domain/inference/admission.js";
import { InferencePipeline } from "../src/domain/inference/pipeline.js";
import type { AttemptingSession, KeyRules, RoutableModel } from "../src/domain/inference/session.js";
import type { Clock } from "../src/lib/clock.js";
import { DomainError } from "../src/lib/errors.js";
import { SecretBox } from "../src/lib/secret-box.js";
import { MemoryGates, MemoryMarket } from "./memory-stores.js";

/** A live text model: 1 DIEM per million prompt tokens, 4 per million completion tokens. */
export const TEXT_MODEL: RoutableModel = Object.freeze({
  id: "mem-text",
  modality: "text",
  status: "live",
  tier: "frontier",
  pricing: { inputMicroPerM: 1_000_000n, outputMicroPerM: 4_000_000n, cacheMicroPerM: null, extended: null },
  imagePricing: null,
  constraints: null,
  maxCompletionTokens: 4096,
});

/** A clock that stands still until moved (so cooldowns and expiries are exact). */
export function manualClock(start = new Date("2030-01-15T12:00:00.000Z")): Clock & { advance(ms: number): void } {
  let now = start.getTime();
  return {
    now: () => new Date(now),
    advance(ms: number) {
      now += ms;
    },
  };
}

export interface MemoryWorld {
  pipeline: InferencePipeline;
  market: MemoryMarket;
  gates: MemoryGates;
  clock: Clock & { advance(ms: number): void };
  bus: EventBus;
  config: Config;
  /** balance refreshes asked after an upstream 402 (key ids) */
  refreshed: string[];
  /** keys confirmed after an unclear 401/403 (key ids) */
  confirmed: string[];
}

/**
 * The pipeline on in-memory stores, gates and events; `env` overrides the config (e.g.
 * PLATFORM_FEE_BPS). A key confirmed after an unclear 401/403 is noted in `confirmed`; `revoked`
 * names the keys whose confirmation fails (they are marked auth_failed, as the balance read does).
 */
export function memoryPipeline(
  o: { env?: Record<string, string>; models?: RoutableModel[]; revoked?: (upstreamKeyId: string) => boolean } = {},
): MemoryWorld {
  const r = loadConfig({ ESCROW_LINGER_MS: "0", ...o.env }, { mode: "local", redisPrefix: "mem" });
  if (!r.ok) throw new Error(r.errors.join("\n"));
  const config = r.config;
  const clock = manualClock();
  const secrets = new SecretBox(Buffer.from(LOCAL_KEY_ENCRYPTION_KEY, "hex"));
  const market = new MemoryMarket(secrets, () => clock.now());
  const gates = new MemoryGates();
  const bus = createPubSub<Topics>() as EventBus;
  const models = new Map((o.models ?? [TEXT_MODEL]).map((m) => [m.id, m]));
  const refreshed: string[] = [];
  const confirmed: string[] = [];
  const pipeline = new InferencePipeline({
    stores: market.stores,
    config,
    clock,
    bus,
    gates,
    keys: redisKeys("mem"),
    secrets,
    keyHealth: market.keyHealth,
    resolveModel: async (id) => {
      const m = models.get(id);
      if (!m) throw new DomainError("model_not_found", `Unknown model ${id}.`);
      return m;
    },
    onKeyExhausted: async (id) => {
      refreshed.push(id);
    },
    confirmKey: async (id) => {
      confirmed.push(id);
      if (o.revoked?.(id)) await market.keyHealth.markAuthFailed(id);
    },
  });
  return { pipeline, market, gates, clock, bus, config, refreshed, confirmed };
}

/** Opens a chat request for `buyer` on TEXT_MODEL (a prompt estimate and an optional max_tokens). */
export function openText(
  world: MemoryWorld,
  buyer: { accountId: string; apiKeyId: string },
  o: {
    promptEstimate?: number;
    maxTokens?: number;
    stream?: boolean;
    model?: RoutableModel;
    key?: KeyRules;
    maxPriceCents?: number;
  } = {},
): Promise<AttemptingSession> {
  return world.pipeline.open({
    accountId: buyer.accountId,
    apiKeyId: buyer.apiKeyId,
    route: "chat",
    modality: "text",
    model: (o.model ?? TEXT_MODEL).id,
    stream: o.stream ?? false,
    price: (model) => textPricer(model, o.promptEstimate ?? 100, o.maxTokens),
    ...(o.key ? { key: o.key } : {}),
    ...(o.maxPriceCents !== undefined ? { maxPriceCents: o.maxPriceCents } : {}),
  });
}
