import type { EventBus } from "../../adapters/pubsub.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { type CursorKey, encodeCursor, type Page } from "../../lib/cursor.js";
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

export type Keyset = {
  createdAt?: { lte: Date };
  OR?: ({ createdAt: { lt: Date } } | { createdAt: Date; id: { lt: string } })[];
};

/**
 * Keyset condition "strictly after the cursor" for a newest-first order on (createdAt, id). The time
 * bound (`lte`) is implied by the OR; said alone, an index on (…, createdAt) starts at the cursor and
 * a table partitioned by createdAt (clears) skips the months after it.
 */
export function keysetBefore(after: CursorKey | undefined): Keyset {
  if (!after) return {};
  return {
    createdAt: { lte: after.at },
    OR: [{ createdAt: { lt: after.at } }, { createdAt: after.at, id: { lt: after.id } }],
  };
}

export function pageOf<R, T>(rows: R[], take: number, map: (r: R) => T, key: (r: R) => CursorKey): Page<T> {
  const kept = rows.slice(0, take);
  const last = kept[kept.length - 1];
  return {
    items: kept.map(map),
    nextCursor: rows.length > take && last ? encodeCursor(key(last)) : null,
  };
}
