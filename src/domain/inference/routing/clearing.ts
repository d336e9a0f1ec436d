import type { QueryRunner } from "../../../adapters/sql.js";
import type { Holder, Slice } from "../escrow/escrow.js";

/**
 * Clearing: which offer a request clears against. One module for the rule the router, the
 * capacity ladder and the market stats share (SPEC "What the service does" 3–4, "Capacity" 5).
 */

/** SPEC "What the service does" 4: a request tries at most this many distinct supplier keys. */
export const MAX_ATTEMPTS = 5;

/** One eligible offer as the router sees it (no supplier identity leaves the process). */
export interface BookEntry {
  offerId: string;
  upstreamKeyId: string;
  supplierAccountId: string;
  /** the offer's effective price when the book was read (`svc_effective_price`) */
  priceCentsPerDollar: number;
  /** when a price schedule may next move that price (epoch ms): the book is read again then; null: never */
  priceChangesAt: number | null;
  expiresAt: number;
  /** what nobody holds of it (`svc_routable`: reserved includes every holder's slices) */
  routableMicroDiem: bigint;
  /** the key's last known balance (caps a stream_incomplete estimate) */
  keyBalanceMicroDiem: bigint | null;
  /** false once a top-up found it no longer eligible (until the next read) */
  eligible: boolean;
  cooldownUntil: number | null;
  sealed: {
    ciphertext: Uint8Array<ArrayBuffer>;
    iv: Uint8Array<ArrayBuffer>;
    tag: Uint8Array<ArrayBuffer>;
    keyId: string;
  };
}

/**
 * The clearing order: cheapest effective price first (`svc_effective_price` at the query's `$1`,
 * its "now"), ties by age, then id (deterministic).
 */
export const CLEARING_ORDER_SQL = "svc_effective_price(o, $1) ASC, o.created_at ASC, o.id ASC";

/**
 * THE eligibility rule (SPEC "Capacity" rule 5: depth uses the same rule as the router), defined
 * once in SQL (the initial migration) and inlined by the planner wherever offers
 * are selected:
 *
 * - `svc_eligible(o, k, now)`: the offer is `active` and unexpired, its upstream key is `active`
 *   and not cooling down;
 * - `svc_routable(o, k)`: what could be cleared on it right now,
 *   `min(remaining, key's last known balance) − reserved`, where `reserved` is every router
 *   process's escrow slices of it (one live offer per key, so the offer's reservation is the key's);
 * - `svc_effective_price(o, now)`: its price now, its schedule's step that most recently passed
 *   today or its own price (`effectivePrice`, src/domain/supply/price-schedule.ts, is the same rule).
 *
 * Capacity, pool summary and market stats read offers through `eligibleOffers`; the router's offer
 * book and its escrow top-up (`svc_escrow_take`) use the same two functions.
 */
export interface EligibleOffer {
  offerId: string;
  upstreamKeyId: string;
  supplierAccountId: string;
  /** the effective price at the query's `now` */
  priceCentsPerDollar: number;
  routableMicroDiem: bigint;
}

const ELIGIBLE_SQL = `
  SELECT o.id AS offer_id, o.upstream_key_id, o.account_id, svc_effective_price(o, $1) AS price,
         svc_routable(o, k) AS routable
    FROM offers o
    JOIN upstream_keys k ON k.id = o.upstream_key_id
   WHERE svc_eligible(o, k, $1)
     AND svc_effective_price(o, $1) <= $2
     AND svc_routable(o, k) >= $3
     AND ($4::uuid[] IS NULL OR o.upstream_key_id <> ALL($4::uuid[]))
   ORDER BY ${CLEARING_ORDER_SQL}
   LIMIT $5`;

/** Which eligible offers to list (see `eligibleOffers`). */
export interface EligibleQuery {
  now: Date;
  maxPriceCents: number;
  /** at least this much routable (at least 1 micro-DIEM) */
  minRoutableMicroDiem?: bigint;
  /** offers on these supplier keys are left out */
  excludeKeyIds?: string[];
  limit?: number;
}

/**
 * Eligible offers whose effective price at `now` is at or below `maxPriceCents`, with at least
 * `minRoutableMicroDiem` routable, cheapest first; ties broken by age then id (deterministic).
 * `priceCentsPerDollar` is that effective price.
 */
export async function eligibleOffers(run: QueryRunner, q: EligibleQuery): Promise<EligibleOffer[]> {
  const min = q.minRoutableMicroDiem && q.minRoutableMicroDiem > 0n ? q.minRoutableMicroDiem : 1n;
  const exclude = q.excludeKeyIds && q.excludeKeyIds.length > 0 ? q.excludeKeyIds : null;
  const rows = await run<{
    offer_id: string;
    upstream_key_id: string;
    account_id: string;
    price: number;
    routable: bigint | string;
  }>(ELIGIBLE_SQL, [q.now, q.maxPriceCents, min.toString(), exclude, q.limit ?? 10_000]);
  return rows.map((r) => ({
    offerId: r.offer_id,
    upstreamKeyId: r.upstream_key_id,
    supplierAccountId: r.account_id,
    priceCentsPerDollar: Number(r.price),
    routableMicroDiem: BigInt(r.routable),
  }));
}

/**
 * Is a book entry routable at this ceiling now, as far as this process knows? The in-memory mirror
 * of `svc_eligible` plus the ceiling (the escrow top-up checks the real row under its lock).
 */
export function routable(entry: BookEntry, ceilingCents: number, nowMs: number): boolean {
  return (
    entry.eligible &&
    entry.priceCentsPerDollar <= ceilingCents &&
    entry.expiresAt > nowMs &&
    (entry.cooldownUntil === null || entry.cooldownUntil <= nowMs)
  );
}

/** The offer a request's next attempt clears against, and how much its slice is short. */
export interface OfferPick {
  entry: BookEntry;
  slice: Slice;
  /** what the offer's slice lacks for the request's maximum burn (≤ 0: admitted in memory) */
  short: bigint;
}

/**
 * Chooses the next offer (pure but for the holder's slice map): the cheapest routable entry of the
 * book, in clearing order, on a key the request has not tried and that is not at its in-flight
 * limit, whose slice covers the maximum burn or whose routable depth can top it up.
 * `waitingOnBusy` says a busy key was passed over (worth waiting for rather than refusing).
 */
export function chooseOffer(
  book: readonly BookEntry[],
  q: {
    holder: Holder;
    ceilingCents: number;
    maxBurnMicroDiem: bigint;
    tried: readonly string[];
    isBusy: (upstreamKeyId: string) => boolean;
    nowMs: number;
  },
): { pick: OfferPick | null; waitingOnBusy: boolean } {
  let waitingOnBusy = false;
  for (const entry of book) {
    if (!routable(entry, q.ceilingCents, q.nowMs)) continue;
    if (q.tried.includes(entry.upstreamKeyId)) continue;
    if (q.isBusy(entry.upstreamKeyId)) {
      waitingOnBusy = true;
      continue;
    }
    const slice = q.holder.slice("offer", entry.offerId);
    const short = q.maxBurnMicroDiem - slice.free;
    if (short > 0n && entry.routableMicroDiem < short) {
      q.holder.tidy(slice);
      continue;
    }
    return { pick: { entry, slice, short }, waitingOnBusy };
  }
  return { pick: null, waitingOnBusy };
}
