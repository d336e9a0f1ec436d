import type { Db } from "../../adapters/db.js";
import type { ClearRecordedEvent, EventBus } from "../../adapters/pubsub.js";
import type { ReadDb } from "../../adapters/read-replica.js";
import type { SharedCache } from "../../adapters/redis/cache.js";
import type { RedisKeys } from "../../adapters/redis/keys.js";
import type { QueryRunner } from "../../adapters/sql.js";
import type { Clock } from "../../lib/clock.js";
import { utcDay } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import {
  MAX_CEILING_CENTS,
  MAX_OFFER_PRICE_CENTS,
  MIN_CEILING_CENTS,
  MIN_OFFER_PRICE_CENTS,
  usdcForDiem,
} from "../../lib/money.js";
import { newestReadBound } from "../../lib/partitions.js";
import { SharedCalls } from "../../lib/shared-calls.js";
import { eligibleOffers } from "../inference/routing/clearing.js";
import type { Capacity, MarketLadder, MarketStats, ModalityDay, PriceLevel } from "./market-types.js";

/** SPEC "Capacity" rule 4: the whole response is cached for 30 seconds (shared by all processes). */
export const CAPACITY_CACHE_SECONDS = 30;

/**
 * Public market data. Depth comes from `eligibleOffers`, the router's own eligibility rule, so
 * capacity can never promise what the router would not clear; its prices are the offers' effective
 * prices now (`svc_effective_price`: price schedules). No supplier identity leaves here.
 */
export class MarketService {
  private readonly statsCalls = new SharedCalls<MarketStats>();

  constructor(
    private readonly db: Db,
    private readonly run: QueryRunner,
    private readonly bus: EventBus,
    private readonly clock: Clock,
    private readonly cache?: { store: SharedCache; keys: RedisKeys },
    /** where the public statistics (stats, recent clears) read: a replica when fresh enough */
    private readonly readDb?: ReadDb,
  ) {}

  /** the client of a public read-only page (adapters/read-replica.ts); the ladder stays on `run` */
  private read(): Promise<Db> {
    return this.readDb ? this.readDb(null) : Promise.resolve(this.db);
  }

  /**
   * The routable ladder at or below `maxPriceCents` (default: every price an offer may post), cheapest first.
   * @throws invalid_request `maxPriceCents` outside the offer price bounds
   */
  async getLadder(maxPriceCents = MAX_OFFER_PRICE_CENTS): Promise<MarketLadder> {
    if (
      !Number.isInteger(maxPriceCents) ||
      maxPriceCents < MIN_OFFER_PRICE_CENTS ||
      maxPriceCents > MAX_OFFER_PRICE_CENTS
    ) {
      throw new DomainError(
        "invalid_request",
        `maxPriceCents must be an integer ${MIN_OFFER_PRICE_CENTS}-${MAX_OFFER_PRICE_CENTS}.`,
        { field: "maxPriceCents" },
      );
    }
    const now = this.clock.now();
    const offers = await eligibleOffers(this.run, { now, maxPriceCents });
    const byPrice = new Map<number, bigint>();
    for (const o of offers)
      byPrice.set(o.priceCentsPerDollar, (byPrice.get(o.priceCentsPerDollar) ?? 0n) + o.routableMicroDiem);
    const prices: PriceLevel[] = [...byPrice.entries()]
      .sort(([a], [b]) => a - b)
      .map(([price, routable]) => ({
        priceCentsPerDollar: price,
        routableMicroDiem: routable,
        usdcToBuyAllMicro: usdcForDiem(routable, price),
      }));
    return {
      generatedAt: now,
      prices,
      routableMicroDiem: prices.reduce((a, p) => a + p.routableMicroDiem, 0n),
      usdcToBuyAllMicro: prices.reduce((a, p) => a + p.usdcToBuyAllMicro, 0n),
      cheapestPostedCents: prices[0]?.priceCentsPerDollar ?? null,
    };
  }

  /**
   * GET /v1/capacity. Without a filter: every eligible price up to the top of the corridor (80).
   * With `maxPriceCents` (integer 30–80, else 400, never clamped): the ladder and the totals narrow
   * to prices at or below it. Cached 30 s in Redis, per filter value.
   */
  async capacity(maxPriceCents?: number): Promise<Capacity> {
    if (
      maxPriceCents !== undefined &&
      (!Number.isInteger(maxPriceCents) || maxPriceCents < MIN_CEILING_CENTS || maxPriceCents > MAX_CEILING_CENTS)
    ) {
      throw new DomainError(
        "invalid_request",
        `maxPriceCents must be an integer ${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}.`,
        {
          field: "maxPriceCents",
        },
      );
    }
    const key = this.cache?.keys.capacityCache(maxPriceCents ?? "all");
    if (key && this.cache) {
      const hit = await this.cache.store.get<Capacity & { generatedAt: string }>(key);
      if (hit) return { ...hit, generatedAt: new Date(hit.generatedAt) };
    }
    const [ladder, live] = await Promise.all([
      this.getLadder(maxPriceCents ?? MAX_CEILING_CENTS),
      this.liveModelCounts(),
    ]);
    const depth = ladder.routableMicroDiem > 0n;
    const modality = (m: "text" | "image" | "video") => ({
      available: depth && (live[m] ?? 0) > 0,
      liveModels: live[m] ?? 0,
    });
    const capacity: Capacity = {
      ...ladder,
      modalities: { text: modality("text"), image: modality("image"), video: modality("video") },
    };
    if (key && this.cache) await this.cache.store.set(key, capacity, CAPACITY_CACHE_SECONDS);
    return capacity;
  }

  /**
   * GET /v1/market/stats (and GraphQL's): corridor depth, buyer savings, today's clears (aggregates
   * only). Public: it reads the market's day rows and the unfolded clears (svc_market_days), never
   * the whole table of clears; callers at once share one computation.
   */
  stats(): Promise<MarketStats> {
    return this.statsCalls.run("stats", () => this.computeStats());
  }

  private async computeStats(): Promise<MarketStats> {
    const now = this.clock.now();
    const day = utcDay(now);
    const db = await this.read();
    const [corridor, days] = await Promise.all([
      this.getLadder(MAX_CEILING_CENTS),
      // the market's clears by day and modality, refunds out: the folds' rows and the unfolded
      // clears (svc_market_days), summed into every day's and today's (or later: a writer's clock)
      db.$queryRaw<
        { today: boolean; modality: string | null; clears: bigint; burn: bigint; gross: bigint; weighted: bigint }[]
      >`
        SELECT (m.day >= ${day}::date) AS today, m.modality::text AS modality,
               sum(m.clears)::bigint AS clears, sum(m.burn_micro_diem)::bigint AS burn,
               sum(m.gross_micro_usdc)::bigint AS gross, sum(m.weighted)::bigint AS weighted
          FROM svc_market_days() m
         GROUP BY 1, 2`,
    ]);
    const todayRows = days.filter((r) => r.today);
    const total = (rows: typeof days, k: "clears" | "burn" | "gross" | "weighted") =>
      rows.reduce((a, r) => a + BigInt(r[k]), 0n);
    const s = { clears: total(days, "clears"), face: total(days, "burn"), paid: total(days, "gross") };
    const t = {
      clears: total(todayRows, "clears"),
      burn: total(todayRows, "burn"),
      gross: total(todayRows, "gross"),
      weighted: total(todayRows, "weighted"),
    };
    const ofModality = (m: "text" | "image" | "video"): ModalityDay => {
      const r = todayRows.find((x) => x.modality === m);
      return {
        clears: Number(r?.clears ?? 0n),
        burnMicroDiem: BigInt(r?.burn ?? 0n),
        grossMicroUsdc: BigInt(r?.gross ?? 0n),
      };
    };
    const face = s.face;
    const paid = s.paid;
    const burn = t.burn;
    return {
      generatedAt: now,
      corridor: { ...corridor, minCents: MIN_CEILING_CENTS, maxCents: MAX_CEILING_CENTS },
      savings: {
        clears: Number(s.clears),
        faceMicroUsdc: face,
        paidMicroUsdc: paid,
        savedMicroUsdc: face - paid,
        paidOfFaceBps: face > 0n ? Number((paid * 10_000n) / face) : null,
      },
      today: {
        day,
        clears: Number(t.clears),
        burnMicroDiem: burn,
        grossMicroUsdc: t.gross,
        averageClearingPriceCents: burn > 0n ? Number(t.weighted / burn) : null,
        byModality: { text: ofModality("text"), image: ofModality("image"), video: ofModality("video") },
      },
    };
  }

  /**
   * The latest clears, newest first, as the public `clears` feed carries them (refunded ones left
   * out). Public data: no buyer, supplier, key, offer or request identity is selected. The caller
   * bounds `limit` (the contract's `recentClearsArgs`).
   */
  async recentClears(limit: number): Promise<ClearRecordedEvent[]> {
    const rows = await (await this.read()).clear.findMany({
      // newest month first, the DEFAULT partition pruned (lib/partitions.ts)
      where: { refundedAt: null, createdAt: { lte: newestReadBound(this.clock.now()) } },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      take: limit,
      select: {
        createdAt: true,
        model: true,
        modality: true,
        priceCentsPerDollar: true,
        burnMicroDiem: true,
        grossMicroUsdc: true,
      },
    });
    return rows.map((r) => ({
      at: r.createdAt.toISOString(),
      model: r.model,
      modality: r.modality,
      priceCentsPerDollar: r.priceCentsPerDollar,
      burnMicroDiem: r.burnMicroDiem,
      grossMicroUsdc: r.grossMicroUsdc,
    }));
  }

  /**
   * Drops every cached capacity answer (each `maxPriceCents` filter and none), so the next
   * `capacity()` reads the ladder again: a price schedule's step moved a price.
   */
  async invalidateCapacityCache(): Promise<void> {
    if (!this.cache) return;
    const { store, keys } = this.cache;
    const filters: (number | "all")[] = ["all"];
    for (let p = MIN_CEILING_CENTS; p <= MAX_CEILING_CENTS; p++) filters.push(p);
    await store.delete(filters.map((f) => keys.capacityCache(f)));
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

  private async liveModelCounts(): Promise<Partial<Record<"text" | "image" | "video", number>>> {
    const rows = await this.db.catalogModel.groupBy({
      by: ["modality"],
      where: { status: "live", listed: true, disabled: false },
      _count: { _all: true },
    });
    return Object.fromEntries(rows.map((r) => [r.modality, r._count._all]));
  }
}
