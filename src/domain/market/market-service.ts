import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Clock } from "../../lib/clock.js";
import { usdcForDiem } from "../../lib/money.js";
import type { MarketLadder, PriceLevel } from "./market-types.js";

/** Corridor bounds of the buyer ceiling (SPEC "Limits"). */
export const MIN_CEILING_CENTS = 30;
export const MAX_CEILING_CENTS = 80;

interface LevelRow {
  price: number;
  routable: bigint;
  offers: bigint;
}

/**
 * Market depth read from Postgres. The routable DIEM of an offer is what the router could clear
 * right now: min(remaining − reserved, the key's last known balance), for active offers on active
 * keys that are not cooling down. This is the one eligibility rule (capacity uses it too).
 */
export class MarketService {
  constructor(
    private readonly db: Db,
    private readonly bus: EventBus,
    private readonly clock: Clock,
  ) {}

  /**
   * The routable ladder at or below `maxPriceCents` (default: the whole 1–80 book), cheapest first.
   * Reads only; locks nothing.
   */
  async getLadder(maxPriceCents = MAX_CEILING_CENTS): Promise<MarketLadder> {
    const now = this.clock.now();
    const rows = await this.db.$queryRaw<LevelRow[]>`
      SELECT o.price_cents_per_dollar AS price,
             SUM(LEAST(o.remaining_micro_diem - o.reserved_micro_diem,
                       COALESCE(k.last_balance_micro_diem, o.remaining_micro_diem - o.reserved_micro_diem)))::bigint AS routable,
             COUNT(*)::bigint AS offers
        FROM offers o
        JOIN upstream_keys k ON k.id = o.upstream_key_id
       WHERE o.status = 'active'
         AND k.status = 'active'
         AND (k.cooldown_until IS NULL OR k.cooldown_until <= ${now})
         AND o.expires_at > ${now}
         AND o.price_cents_per_dollar <= ${maxPriceCents}
         AND o.remaining_micro_diem - o.reserved_micro_diem > 0
         AND COALESCE(k.last_balance_micro_diem, 1) > 0
       GROUP BY o.price_cents_per_dollar
       ORDER BY o.price_cents_per_dollar ASC`;
    const prices: PriceLevel[] = rows.map((r) => ({
      priceCentsPerDollar: Number(r.price),
      routableMicroDiem: BigInt(r.routable),
      usdcToBuyAllMicro: usdcForDiem(BigInt(r.routable), Number(r.price)),
      offers: Number(r.offers),
    }));
    return {
      generatedAt: now,
      prices,
      routableMicroDiem: prices.reduce((a, p) => a + p.routableMicroDiem, 0n),
      usdcToBuyAllMicro: prices.reduce((a, p) => a + p.usdcToBuyAllMicro, 0n),
      cheapestPostedCents: prices[0]?.priceCentsPerDollar ?? null,
    };
  }

  /** Recomputes the ladder and tells every process's subscribers (public data only). */
  async publishCapacityChanged(reason: string): Promise<void> {
    const ladder = await this.getLadder();
    this.bus.publish("capacityChanged", {
      generatedAt: ladder.generatedAt.toISOString(),
      cheapestPostedCents: ladder.cheapestPostedCents,
      routableMicroDiem: ladder.routableMicroDiem,
      reason,
    });
  }
}
