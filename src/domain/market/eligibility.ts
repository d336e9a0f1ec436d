import type { QueryRunner } from "../../adapters/sql.js";

/**
 * THE eligibility rule (SPEC "Capacity" rule 5: depth uses the same rule as the router). An offer is
 * eligible when it is `active`, its DIEM has not expired, and its upstream key is `active` and not
 * cooling down. Its routable DIEM is what could be cleared on it right now:
 *
 *     routable = min(remaining, key's last known balance) − reserved
 *
 * where `reserved` holds the maximum burn of requests in flight on it (one live offer per key, so
 * the offer's reservation is the key's). Capacity, pool summary, market stats and the router all
 * read offers through `eligibleOffers`; the stored function `svc_hold` re-checks the same
 * condition when it takes the hold.
 */
export const ROUTABLE_SQL =
  "(LEAST(o.remaining_micro_diem, COALESCE(k.last_balance_micro_diem, o.remaining_micro_diem)) - o.reserved_micro_diem)";

export interface EligibleOffer {
  offerId: string;
  upstreamKeyId: string;
  supplierAccountId: string;
  priceCentsPerDollar: number;
  routableMicroDiem: bigint;
}

const ELIGIBLE_SQL = `
  SELECT o.id AS offer_id, o.upstream_key_id, o.account_id, o.price_cents_per_dollar AS price,
         ${ROUTABLE_SQL}::bigint AS routable
    FROM offers o
    JOIN upstream_keys k ON k.id = o.upstream_key_id
   WHERE o.status = 'active'
     AND k.status = 'active'
     AND (k.cooldown_until IS NULL OR k.cooldown_until <= $1)
     AND o.expires_at > $1
     AND o.price_cents_per_dollar <= $2
     AND ${ROUTABLE_SQL} >= $3
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
