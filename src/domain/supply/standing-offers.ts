import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import { MAX_OFFER_QUANTITY_MICRO_DIEM } from "../../contract/supply.js";
import type { Prisma } from "../../generated/prisma/client.js";
import { type Clock, nextUtcMidnight } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import type { MarketService } from "../market/market-service.js";
import type { WebhookOutbox } from "../webhooks/outbox.js";
import { offerData } from "../webhooks/payloads.js";
import type { KeyHealth } from "./key-health.js";
import { lockKeyWithOffers } from "./key-lock.js";
import type { OfferService } from "./offers.js";
import { effectivePrice, storedSchedule } from "./price-schedule.js";
import type { SupplyService } from "./supply-service.js";
import { isUniqueViolation, publishOwner } from "./supply-shared.js";
import type { OfferStatusName } from "./supply-types.js";

export interface StandingOfferDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  keyHealth: Pick<KeyHealth, "capacityChanged">;
  /** the one expiry path, run before a repost */
  offers: Pick<OfferService, "expireDue">;
  /** reads a key's balance from the upstream when no read happened since the UTC midnight */
  balances: Pick<SupplyService, "refreshKeyBalance">;
  market: Pick<MarketService, "invalidateCapacityCache">;
  /** the webhook outbox: `offer.reposted` and `offer.price_stepped` commit with what they tell */
  webhooks?: Pick<WebhookOutbox, "emitEach" | "dispatch">;
}

/** What one `repostDue` run did. */
export interface RepostRun {
  /** offers posted again (one new offer each) */
  reposted: number;
  /** candidates left for a later run: the key's balance is not known since midnight, or is 0 */
  waiting: number;
  /** candidates another run or the supplier got to first (a unique constraint said no) */
  raced: number;
}

/** A standing offer posted again (the hook for `offer.reposted`). */
export interface RepostedOffer {
  accountId: string;
  upstreamKeyId: string;
  /** the expired offer */
  fromOfferId: string;
  /** the new one */
  offerId: string;
  priceCentsPerDollar: number;
  effectivePriceCentsPerDollar: number;
  quantityMicroDiem: bigint;
  expiresAt: Date;
}

/** A schedule step that took effect (the hook for `offer.price_stepped`). */
export interface SteppedPrice {
  accountId: string;
  offerId: string;
  status: OfferStatusName;
  /** the effective price announced before (null: never announced) */
  fromPriceCentsPerDollar: number | null;
  toPriceCentsPerDollar: number;
}

/** A standing offer whose DIEM expired and that has not been posted again. */
interface Candidate {
  id: string;
  account_id: string;
  upstream_key_id: string;
  balance: bigint | null;
  balance_at: Date | null;
}

/** How many candidates one run looks at (the next run takes the rest). */
const REPOST_BATCH = 500;

/**
 * A standing offer that could not be posted again for this long (its key refused by the upstream,
 * its balance unknown or 0 every day) stops standing: the job looks no further back, so what it
 * reads each minute stays bounded however long offers have been standing.
 */
export const REPOST_WINDOW_MS = 7 * 86_400_000;

type OfferRow = Prisma.OfferGetPayload<object>;

/**
 * Supply that runs itself (docs/decisions.md "Standing offers and price schedules"):
 *
 * - `repostDue` (worker `repost-offers`, every minute and once when a worker starts): each standing
 *   offer whose DIEM expired is posted again on its key, for the new UTC day;
 * - `announcePriceSteps` (worker `price-steps`, every minute): each schedule step that took effect
 *   since the last run moves the ladder live and drops the cached capacity.
 *
 * Both are clock-driven and idempotent: run them as often as you like, in as many processes as you
 * like; a repost happens once per offer (`offers.reposted_from_id` is unique, `offers_one_live_per_key`
 * keeps one live offer per key) and a step is announced once (`offers.announced_price_cents`).
 */
export class StandingOffers {
  constructor(private readonly deps: StandingOfferDeps) {}

  /**
   * Posts again every standing offer whose DIEM expired (in the last REPOST_WINDOW_MS): an
   * `expired` offer with `repostDaily`, on an `active` key, that is its key's newest offer (a later
   * offer — the supplier's own, or a repost — supersedes it). The new offer has the old one's price, schedule, `repostDaily` and
   * `dailyQuantityMicroDiem`; its quantity is the key's balance read from the upstream since the
   * last UTC midnight (read now when the sync has not yet), capped by `dailyQuantityMicroDiem`.
   * Runs the expiry first, so an offer past its midnight is `expired` (and one paused then no
   * longer stands). Not reposted: a cancelled offer, a revoked key (its offers are cancelled), a
   * key failing upstream auth (until it authenticates again), a key whose balance is unknown or 0
   * (waiting: the next run tries again).
   */
  async repostDue(): Promise<RepostRun> {
    const { db, clock } = this.deps;
    await this.deps.offers.expireDue();
    const now = clock.now();
    const candidates = await db.$queryRaw<Candidate[]>`
      SELECT o.id, o.account_id, o.upstream_key_id, k.last_balance_micro_diem AS balance, k.last_balance_at AS balance_at
        FROM offers o
        JOIN upstream_keys k ON k.id = o.upstream_key_id
       WHERE o.repost_daily AND o.status = 'expired'
         AND o.expires_at <= ${now} AND o.expires_at > ${new Date(now.getTime() - REPOST_WINDOW_MS)}
         AND k.status = 'active'
         AND NOT EXISTS (SELECT 1 FROM offers r WHERE r.reposted_from_id = o.id)
         AND NOT EXISTS (SELECT 1 FROM offers n
                          WHERE n.upstream_key_id = o.upstream_key_id AND n.created_at > o.created_at)
       ORDER BY o.expires_at, o.id
       LIMIT ${REPOST_BATCH}`;
    const run: RepostRun = { reposted: 0, waiting: 0, raced: 0 };
    for (const c of candidates) {
      const outcome = await this.repostOne(c);
      run[outcome] += 1;
    }
    if (run.reposted > 0) await this.deps.keyHealth.capacityChanged("offers_reposted");
    return run;
  }

  /**
   * Announces the schedule steps that took effect: every live offer with a schedule whose effective
   * price now (`svc_effective_price`) differs from the one last announced. One statement marks them
   * announced under their row locks (a concurrent run waits, re-checks and skips them), then the
   * capacity cache is dropped and `capacityChanged` tells the ladder subscribers and every router
   * process. Pricing never waits for this: the router, capacity and the ladder compute the
   * effective price at the instant they read; this only makes the change heard at once.
   */
  async announcePriceSteps(): Promise<{ stepped: number }> {
    const now = this.deps.clock.now();
    const { rows, hooks } = await this.deps.db.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<
        { id: string; account_id: string; status: OfferStatusName; before: number | null; after: number }[]
      >`
      WITH due AS (
        SELECT o.id, o.announced_price_cents AS before, svc_effective_price(o, ${now}) AS after
          FROM offers o
         WHERE o.status IN ('active', 'paused') AND o.schedule IS NOT NULL AND o.expires_at > ${now}
           AND o.announced_price_cents IS DISTINCT FROM svc_effective_price(o, ${now})
         ORDER BY o.id
           FOR NO KEY UPDATE OF o)
      UPDATE offers o SET announced_price_cents = due.after
        FROM due
       WHERE o.id = due.id
      RETURNING o.id, o.account_id, o.status::text AS status, due.before, due.after`;
      const hooks =
        (await this.deps.webhooks?.emitEach(
          tx,
          "offer.price_stepped",
          rows.map((r) => ({
            accountId: r.account_id,
            data: {
              id: r.id,
              status: r.status,
              fromPriceCentsPerDollar: r.before === null ? null : Number(r.before),
              effectivePriceCentsPerDollar: Number(r.after),
              at: now.toISOString(),
            },
            dedupeKey: `offer.price_stepped:${r.id}:${now.toISOString().slice(0, 16)}:${Number(r.after)}`,
          })),
        )) ?? [];
      return { rows, hooks };
    });
    await this.deps.webhooks?.dispatch(hooks);
    if (rows.length === 0) return { stepped: 0 };
    await this.deps.market.invalidateCapacityCache();
    for (const r of rows) {
      this.priceStepped({
        accountId: r.account_id,
        offerId: r.id,
        status: r.status,
        fromPriceCentsPerDollar: r.before === null ? null : Number(r.before),
        toPriceCentsPerDollar: Number(r.after),
      });
    }
    await this.deps.keyHealth.capacityChanged("price_stepped");
    return { stepped: rows.length };
  }

  /** One candidate: its fresh balance, then the new offer in one transaction. */
  private async repostOne(c: Candidate): Promise<"reposted" | "waiting" | "raced"> {
    const { db, clock } = this.deps;
    const dayStart = startOfUtcDay(clock.now());
    let balance = c.balance;
    if (c.balance_at === null || c.balance_at < dayStart) {
      const read = await this.deps.balances.refreshKeyBalance(c.upstream_key_id).catch((e: unknown) => {
        logger.warn({ err: e, upstreamKeyId: c.upstream_key_id }, "standing offer: key balance not read");
        return null;
      });
      // the stored balance as it is after this read: read since midnight by this run, or by another
      // that read it at the same moment (the sync, the scheduler's run) while the upstream refused
      // this one (429 on concurrent reads of a key): either way a balance of the new day
      if (!read || read.lastBalanceAt === null || read.lastBalanceAt < dayStart) return "waiting";
      balance = read.balanceMicroDiem;
    }
    if (balance === null || balance <= 0n) return "waiting";
    const now = clock.now();
    let posted: { row: OfferRow; from: OfferRow; hooks: string[] } | null;
    try {
      posted = await db.$transaction(async (tx) => {
        // locked as postOffer locks it: the key's live offers, then the key
        if ((await lockKeyWithOffers(tx, c.upstream_key_id, "post"))?.status !== "active") return null;
        const from = await tx.offer.findUnique({ where: { id: c.id } });
        if (from?.status !== "expired" || !from.repostDaily) return null;
        const daily = from.dailyQuantityMicroDiem;
        let quantity = daily !== null && daily < balance ? daily : balance;
        if (quantity > MAX_OFFER_QUANTITY_MICRO_DIEM) quantity = MAX_OFFER_QUANTITY_MICRO_DIEM;
        const schedule = storedSchedule(from.schedule);
        const row = await tx.offer.create({
          data: {
            accountId: from.accountId,
            upstreamKeyId: from.upstreamKeyId,
            priceCentsPerDollar: from.priceCentsPerDollar,
            quantityMicroDiem: quantity,
            remainingMicroDiem: quantity,
            status: "active",
            expiresAt: nextUtcMidnight(now),
            repostDaily: true,
            dailyQuantityMicroDiem: daily,
            ...(schedule ? { schedule: schedule as unknown as Prisma.InputJsonArray } : {}),
            repostedFromId: from.id,
            announcedPriceCents: effectivePrice({ priceCentsPerDollar: from.priceCentsPerDollar, schedule }, now),
          },
        });
        const hooks =
          (await this.deps.webhooks?.emitEach(tx, "offer.reposted", [
            {
              accountId: row.accountId,
              data: {
                ...offerData({ ...row, status: row.status as string }),
                repostedFromId: from.id,
                effectivePriceCentsPerDollar: row.announcedPriceCents ?? row.priceCentsPerDollar,
              },
              dedupeKey: `offer.reposted:${row.id}`,
            },
          ])) ?? [];
        return { row, from, hooks };
      });
    } catch (e) {
      // another run posted it again, or the supplier posted on the key: either way one live offer
      if (isUniqueViolation(e)) return "raced";
      throw e;
    }
    if (!posted) return "raced";
    const { row, from, hooks } = posted;
    await this.deps.webhooks?.dispatch(hooks);
    this.reposted({
      accountId: row.accountId,
      upstreamKeyId: row.upstreamKeyId,
      fromOfferId: from.id,
      offerId: row.id,
      priceCentsPerDollar: row.priceCentsPerDollar,
      effectivePriceCentsPerDollar: row.announcedPriceCents ?? row.priceCentsPerDollar,
      quantityMicroDiem: row.quantityMicroDiem,
      expiresAt: row.expiresAt,
    });
    return "reposted";
  }

  /** A standing offer was posted again, once (after its transaction committed). */
  private reposted(r: RepostedOffer): void {
    // event: offer.reposted
    publishOwner(this.deps.bus, this.deps.clock, r.accountId, { kind: "offer", id: r.offerId, status: "active" });
  }

  /** A schedule step took effect on one offer, announced once. */
  private priceStepped(s: SteppedPrice): void {
    // event: offer.price_stepped
    publishOwner(this.deps.bus, this.deps.clock, s.accountId, { kind: "offer", id: s.offerId, status: s.status });
  }
}

function startOfUtcDay(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()));
}
