import { createRedisEventTarget } from "@graphql-yoga/redis-event-target";
import { createPubSub } from "graphql-yoga";
import { logger } from "../lib/logger.js";
import type { RedisClient } from "./redis/client.js";

/**
 * Real-time events, fanned out to every process through Redis pub/sub (GraphQL subscriptions
 * over SSE). Topic payloads are plain JSON data; bigints travel tagged and come back as bigints.
 * Topics with an id are per-account channels (`balanceChanged:<accountId>`).
 */
export interface CapacityChangedEvent {
  generatedAt: string;
  cheapestPostedCents: number | null;
  routableMicroDiem: bigint;
  reason: string;
}

export interface ClearRecordedEvent {
  at: string;
  model: string;
  modality: string;
  priceCentsPerDollar: number;
  burnMicroDiem: bigint;
  grossMicroUsdc: bigint;
}

/** A buyer's video job changed state (queued, delivered, refunded, expired, …). */
export interface VideoJobEvent {
  accountId: string;
  queueId: string;
  status: string;
  at: string;
}

export interface AccountEvent {
  accountId: string;
  kind: string;
  at: string;
}

/**
 * One of an owner's offers or upstream keys changed status (`offerUpdated`): which one and its new
 * status, typed (the statuses are the domain's: a status it adds fails to compile at the publish).
 * `registered` is a key's event, not a stored status.
 */
export type SupplyChange =
  | { kind: "offer"; id: string; status: "active" | "paused" | "depleted" | "expired" | "cancelled" }
  | { kind: "key"; id: string; status: "registered" | "active" | "auth_failed" | "revoked" };

/** `SupplyChange` to its owner, and when. */
export type SupplyChangeEvent = SupplyChange & { accountId: string; at: string };

/**
 * Internal: keeps every router process's caches honest (an API key revoked, a ceiling changed, a
 * supplier key cooled down or marked) and its gate leases fair. Not exposed through GraphQL.
 */
export type RoutingChange =
  /** an API key was revoked, or its policy changed (its expiry may have moved): forget its cached authentication */
  | { kind: "api_key_revoked"; id: string }
  | { kind: "ceiling_changed"; id: string }
  | { kind: "supply_changed" }
  /** a process was refused slots of gate `id` while others held some: give back idle ones */
  | { kind: "gate_pressure"; id: string }
  /** a process was refused for want of buyer `id`'s balance: give back the idle part of its slices */
  | { kind: "escrow_pressure"; id: string }
  /** how much of buyer `id`'s slice do requests in flight use here? (answers go to `EscrowUsageBoard`) */
  | { kind: "escrow_usage"; id: string; query: string };

export type Topics = {
  routingChanged: [RoutingChange];
  capacityChanged: [CapacityChangedEvent];
  /** the clears one process settled in one tick (the `clears` subscription yields them one by one) */
  clearsRecorded: [ClearRecordedEvent[]];
  balanceChanged: [accountId: string, event: AccountEvent];
  paymentConfirmed: [accountId: string, event: AccountEvent];
  offerUpdated: [accountId: string, event: SupplyChangeEvent];
  earningsChanged: [accountId: string, event: AccountEvent];
  videoJobUpdated: [accountId: string, event: VideoJobEvent];
  /** a webhook delivery moved or an endpoint was disabled (`delivery:<id>:<status>`, `webhook:<id>:disabled`) */
  webhookUpdated: [accountId: string, event: AccountEvent];
};

const BIGINT_TAG = "__bigint:";

export const bigintJson = {
  stringify(value: unknown): string {
    return JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `${BIGINT_TAG}${v}` : v));
  },
  parse(text: string): unknown {
    return JSON.parse(text, (_k, v) =>
      typeof v === "string" && v.startsWith(BIGINT_TAG) ? BigInt(v.slice(BIGINT_TAG.length)) : v,
    );
  },
};

/**
 * redis-event-target calls publish/subscribe/unsubscribe without `.catch` (STACK_NOTES gotcha 7):
 * a broken connection would become an unhandledRejection. Route those promises through a logger.
 */
function guarded(client: RedisClient, methods: string[]): RedisClient {
  return new Proxy(client, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof prop === "string" && methods.includes(prop) && typeof value === "function") {
        return (...args: unknown[]) => {
          const out = value.apply(target, args);
          if (out && typeof (out as Promise<unknown>).catch === "function") {
            (out as Promise<unknown>).catch((e: unknown) =>
              logger.warn({ err: e, op: prop }, "redis pubsub call failed"),
            );
          }
          return out;
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** Prefixes channel names so deployments (and test files) sharing one Redis never cross. */
function prefixedTarget(inner: ReturnType<typeof createRedisEventTarget>, prefix: string) {
  const name = (topic: string) => `${prefix}:pubsub:${topic}`;
  return {
    addEventListener: (topic: string, cb: Parameters<typeof inner.addEventListener>[1]) =>
      inner.addEventListener(name(topic), cb),
    removeEventListener: (topic: string, cb: Parameters<typeof inner.removeEventListener>[1]) =>
      inner.removeEventListener(name(topic), cb),
    dispatchEvent: (event: Event & { detail?: unknown }) => {
      const renamed = new CustomEvent(name(event.type), { detail: event.detail });
      return inner.dispatchEvent(renamed);
    },
  };
}

export function createEventBus(opts: { publishClient: RedisClient; subscribeClient: RedisClient; prefix: string }) {
  const target = createRedisEventTarget({
    publishClient: guarded(opts.publishClient, ["publish"]),
    subscribeClient: guarded(opts.subscribeClient, ["subscribe", "unsubscribe"]),
    serializer: bigintJson,
  });
  return createPubSub<Topics>({ eventTarget: prefixedTarget(target, opts.prefix) as never });
}

export type EventBus = ReturnType<typeof createEventBus>;
