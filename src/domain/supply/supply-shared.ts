import type { EventBus } from "../../adapters/pubsub.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { LIVE_OFFER_STATUSES } from "./supply-types.js";

/** What the supply side's parts (upstream keys, offers, earnings) share. */

export const LIVE = [...LIVE_OFFER_STATUSES];

export function isUniqueViolation(e: unknown): boolean {
  return e instanceof Prisma.PrismaClientKnownRequestError && e.code === "P2002";
}

/** `offerUpdated` to the owner; `kind` is `offer:<id>:<status>` or `key:<id>:<status>`. */
export function publishOwner(bus: EventBus, clock: Clock, accountId: string, kind: string): void {
  bus.publish("offerUpdated", accountId, { accountId, kind, at: clock.now().toISOString() });
}
