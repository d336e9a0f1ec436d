import type { QueryRunner } from "../../adapters/sql.js";

/**
 * THE eligibility rule (SPEC "Capacity" rule 5: depth uses the same rule as the router), defined
 * once in SQL (migration `router_single_definitions`) and inlined by the planner wherever offers
 * are selected:
 *
 * - `svc_eligible(o, k, now)`: the offer is `active` and unexpired, its upstream key is `active`
 *   and not cooling down;
 * - `svc_routable(o, k)`: what could be cleared on it right now,
 *   `min(remaining, key's last known balance) − reserved`, where `reserved` is every router
 *   process's escrow slices of it (one live offer per key, so the offer's reservation is the key's).
 *
 * Capacity, pool summary and market stats read offers through `eligibleOffers`; the router's offer
 * book and its escrow top-up (`svc_escrow_take`) use the same two functions.
 */
export interface EligibleOffer {
  offerId: string;
  upstreamKeyId: string;
  supplierAccountId: string;
  priceCentsPerDollar: number;
  routableMicroDiem: bigint;
}

const ELIGIBLE_SQL = `
  SELECT o.id AS offer_id, o.upstream_key_id, o.account_id, o.price_cents_per_dollar AS price,
         svc_routable(o, k) AS routable
    FROM offers o
    JOIN upstream_keys k ON k.id = o.upstream_key_id
   WHERE svc_eligible(o, k, $1)
     AND o.price_cents_per_dollar <= $2
     AND svc_routable(o, k) >= $3
     AND ($4::uuid[] IS NULL OR o.upstream_key_id <> ALL($4::uuid[]))
   ORDER BY o.price_cents_per_dollar ASC, o.created_at ASC, o.id ASC
   LIMIT $5`;

/**
 * Eligible offers priced at or below `maxPriceCents` with at least `minRoutableMicroDiem` routable,
 * cheapest first; ties broken by age then id (deterministic).
 */
export async function eligibleOffers(
  run: QueryRunner,
  q: { now: Date; maxPriceCents: number; minRoutableMicroDiem?: bigint; excludeKeyIds?: string[]; limit?: number },
): Promise<EligibleOffer[]> {
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
