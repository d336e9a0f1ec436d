import type { EventBus, SupplyChange } from "../../adapters/pubsub.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { LIVE_OFFER_STATUSES } from "./supply-types.js";

/** What the supply side's parts (upstream keys, offers, earnings) share. */

export const LIVE = [...LIVE_OFFER_STATUSES];

export function isUniqueViolation(e: unknown): boolean {
  return e instanceof Prisma.PrismaClientKnownRequestError && e.code === "P2002";
}

/** `offerUpdated` to the owner: which of its offers or keys changed, and to what. */
export function publishOwner(bus: EventBus, clock: Clock, accountId: string, change: SupplyChange): void {
  bus.publish("offerUpdated", accountId, { ...change, accountId, at: clock.now().toISOString() });
}
