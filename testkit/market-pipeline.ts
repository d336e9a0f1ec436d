// The inference pipeline over the market database (testkit/market-db.ts): the project's SQL stores
// on a database cloned from the migrated template, in-memory gates and events, a manual clock. For
// the pipeline's tests of its rules (test/unit/inference: fall-forward, admission, clearing, key
// budgets), which thereby run the stored functions themselves.
import { createPubSub } from "graphql-yoga";
import { afterAll, beforeAll } from "vitest";
import type { EventBus, Topics } from "../src/adapters/pubsub.js";
import { redisKeys } from "../src/adapters/redis/keys.js";
import { type Config, LOCAL_KEY_ENCRYPTION_KEY, loadConfig } from "../src/config.js";
import { textPricer } from "../src/domain/inference/pipeline/admission.js";
import { InferencePipeline } from "../src/domain/inference/pipeline/pipeline.js";
import type { AttemptingSession, KeyRules, RoutableModel } from "../src/domain/inference/pipeline/session.js";
import { DomainError } from "../src/lib/errors.js";
import { SecretBox } from "../src/lib/secret-box.js";
import { CLOCK_START, type ManualClock, manualClock } from "./manual-clock.js";
import { MarketDb } from "./market-db.js";

export { CLOCK_START, type ManualClock, manualClock } from "./manual-clock.js";

import { MemoryGates } from "./memory-gates.js";

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

/** The secrets box of the local world (what `addOffer` seals upstream keys with). */
export const localSecrets = () => new SecretBox(Buffer.from(LOCAL_KEY_ENCRYPTION_KEY, "hex"));

/**
 * One market database for a test file: cloned from the template before its tests, dropped after.
 * Each `marketPipeline` empties it first.
 */
export function useMarketDb(): () => MarketDb {
  let market: MarketDb | undefined;
  beforeAll(async () => {
    market = await MarketDb.open({ secrets: localSecrets(), clock: manualClock() });
  });
  afterAll(async () => {
    await market?.close();
  });
  return () => {
    if (!market) throw new Error("the market database is not open (useMarketDb runs in beforeAll)");
    return market;
  };
}

export interface MarketWorld {
  pipeline: InferencePipeline;
  market: MarketDb;
  gates: MemoryGates;
  clock: ManualClock;
  bus: EventBus;
  config: Config;
  /** balance refreshes asked after an upstream 402 (key ids) */
  refreshed: string[];
  /** keys confirmed after an unclear 401/403 (key ids) */
  confirmed: string[];
}

/**
 * Empties the market database, sets its clock back to CLOCK_START and builds the pipeline on its
 * SQL stores, in-memory gates and events; `env` overrides the config (e.g. PLATFORM_FEE_BPS). A key
 * confirmed after an unclear 401/403 is noted in `confirmed`; `revoked` names the keys whose
 * confirmation fails (they are marked auth_failed, as the balance read does).
 */
export async function marketPipeline(
  market: MarketDb,
  o: { env?: Record<string, string>; models?: RoutableModel[]; revoked?: (upstreamKeyId: string) => boolean } = {},
): Promise<MarketWorld> {
  const r = loadConfig({ ESCROW_LINGER_MS: "0", ...o.env }, { mode: "local", redisPrefix: "mem" });
  if (!r.ok) throw new Error(r.errors.join("\n"));
  const config = r.config;
  await market.reset();
  const clock = market.clock;
  clock.set(CLOCK_START);
  const gates = new MemoryGates();
  const bus = createPubSub<Topics>() as EventBus;
  const models = new Map((o.models ?? [TEXT_MODEL]).map((m) => [m.id, m]));
  const refreshed: string[] = [];
  const confirmed: string[] = [];
  const pipeline = new InferencePipeline({
    stores: market.stores(),
    config,
    clock,
    bus,
    gates,
    keys: redisKeys("mem"),
    secrets: market.secrets,
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
  world: MarketWorld,
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
