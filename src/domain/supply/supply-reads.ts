import type { Prisma } from "../../generated/prisma/client.js";
import { LIVE_OFFER_STATUSES } from "./supply-types.js";

/**
 * The read rules of the supply side, one function each, for every reader: the REST views
 * (SupplyService/OfferService → http/routes/supply.ts) and the GraphQL fields and `where`s
 * (graphql/schema/supply.ts, which keeps plugin-prisma's selections). Ownership and visibility
 * live only here; the record's derived fields (`maskedKey`, `soldMicroDiem`) beside its schema in
 * contract/supply.ts.
 */

/** Prisma `where` for the viewer's own upstream keys (revoked included). */
export function upstreamKeyScopeFor(viewer: { accountId: string }): { accountId: string } {
  return { accountId: viewer.accountId };
}

/** Prisma `where` for offers the viewer owns, whatever their status (a mutation's answer). */
export function offerOwnerScopeFor(viewer: { accountId: string }): { accountId: string } {
  return { accountId: viewer.accountId };
}

/** Offers a supplier sees in lists (SPEC "Supplier (session)"): every status but cancelled. */
export function listedOffers(): Prisma.OfferWhereInput {
  return { status: { not: "cancelled" } };
}

/** Prisma `where` for the viewer's own listed offers, cancelled excluded. */
export function offerScopeFor(viewer: { accountId: string }): Prisma.OfferWhereInput {
  return { ...offerOwnerScopeFor(viewer), ...listedOffers() };
}

/** A key's live offer: active or paused (at most one per key, `offers_one_live_per_key`). */
export function liveOffers(): Prisma.OfferWhereInput {
  return { status: { in: [...LIVE_OFFER_STATUSES] } };
}

/** Lists are newest first, ties by id (the keyset cursors' order). */
export function newestFirst(): [{ createdAt: "desc" }, { id: "desc" }] {
  return [{ createdAt: "desc" }, { id: "desc" }];
}
