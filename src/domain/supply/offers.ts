import type { Db } from "../../adapters/db.js";
import type { EventBus, SupplyChange } from "../../adapters/pubsub.js";
import { assertUuid } from "../../contract/common.js";
import { soldMicroDiem } from "../../contract/supply.js";
import { Prisma } from "../../generated/prisma/client.js";
import { type Clock, nextUtcMidnight } from "../../lib/clock.js";
import { decodeCursor, keysetBefore, type Page, pageOf, pageSize } from "../../lib/cursor.js";
import { DomainError } from "../../lib/errors.js";
import { liveOffer, type UnfoldedBurns, unfoldedBurns } from "../ledger/live-figures.js";
import type { OutboxTx, WebhookOutbox } from "../webhooks/outbox.js";
import { OFFER_EVENT_COLUMNS, type OfferEventRow, offerData } from "../webhooks/payloads.js";
import type { KeyHealth } from "./key-health.js";
import { lockKeyWithOffers } from "./key-lock.js";
import { effectivePrice, type PricedOffer, type PriceStep, parseSchedule, storedSchedule } from "./price-schedule.js";
import { newestFirst, offerScopeFor } from "./supply-reads.js";
import { isUniqueViolation, LIVE, publishOwner } from "./supply-shared.js";
import type { OfferStatusName, OfferView } from "./supply-types.js";

export interface OfferDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  /** announces capacity changes (every router re-reads its offer book) */
  keyHealth: Pick<KeyHealth, "capacityChanged">;
  /** `offer.depleted` and `offer.expired` are written to the outbox in the transition's transaction */
  webhooks?: Pick<WebhookOutbox, "emitEach" | "dispatch">;
}

type OfferRow = Prisma.OfferGetPayload<{ include: { upstreamKey: { select: { status: true; label: true } } } }>;
const offerInclude = { upstreamKey: { select: { status: true, label: true } } } as const;

/**
 * What makes an offer standing: each optional; on a PATCH `null` removes the daily cap or
 * the schedule. `schedule` is checked by `parseSchedule`.
 */
export interface StandingSettings {
  repostDaily?: boolean;
  dailyQuantityMicroDiem?: bigint | null;
  schedule?: unknown;
}

/** The standing settings as checked values (undefined: not sent). */
interface CheckedStanding {
  repostDaily?: boolean;
  dailyQuantityMicroDiem?: bigint | null;
  schedule?: PriceStep[] | null;
}

function checkStanding(input: StandingSettings): CheckedStanding {
  return {
    repostDaily: input.repostDaily,
    dailyQuantityMicroDiem: input.dailyQuantityMicroDiem,
    schedule: input.schedule === undefined ? undefined : parseSchedule(input.schedule),
  };
}

/** The Prisma columns of checked standing settings (only those sent). */
function standingData(c: CheckedStanding) {
  return {
    ...(c.repostDaily !== undefined ? { repostDaily: c.repostDaily } : {}),
    ...(c.dailyQuantityMicroDiem !== undefined ? { dailyQuantityMicroDiem: c.dailyQuantityMicroDiem } : {}),
    ...(c.schedule !== undefined
      ? { schedule: c.schedule === null ? Prisma.DbNull : (c.schedule as unknown as Prisma.InputJsonArray) }
      : {}),
  };
}

/**
 * Supplier offers (SPEC "Supplier offer"): post, list, reprice, pause, cancel, depletion, and expiry
 * at UTC midnight. Every method that takes an `accountId` checks ownership itself: another
 * account's offer is 404. Each state change publishes `offerUpdated` to the owner and a capacity change.
 */
export class OfferService {
  constructor(private readonly deps: OfferDeps) {}

  /**
   * Posts an offer on the account's own active key. Initial state `active`; the DIEM expires at
   * the next UTC midnight. At most one live offer per key: the partial unique index
   * `offers_one_live_per_key` decides races (its violation is a 409).
   * Holds share locks on the key's live offers and the key (`lockKeyWithOffers`), so a concurrent
   * revocation either sees the offer or wins.
   * Optionally standing (`repostDaily`, `dailyQuantityMicroDiem`) and scheduled (`schedule`).
   * Price, quantity and key id arrive checked by the contract (`postOfferBody`, `postOfferInput`).
   * @throws invalid_request bad schedule; not_found key not on this account;
   *   conflict key revoked or failing upstream auth, or a live offer exists on the key
   */
  async postOffer(
    input: {
      accountId: string;
      upstreamKeyId: string;
      priceCentsPerDollar: number;
      quantityMicroDiem: bigint;
    } & StandingSettings,
  ): Promise<OfferView> {
    const price = input.priceCentsPerDollar;
    const quantity = input.quantityMicroDiem;
    const standing = checkStanding(input);
    const upstreamKeyId = input.upstreamKeyId;
    const now = this.deps.clock.now();
    const announced = effectivePrice({ priceCentsPerDollar: price, schedule: standing.schedule ?? null }, now);
    let row: OfferRow;
    try {
      row = await this.deps.db.$transaction(async (tx) => {
        const key = await lockKeyWithOffers(tx, upstreamKeyId, "post");
        if (!key || key.account_id !== input.accountId) {
          throw new DomainError("not_found", "Upstream key not found.", { field: "upstreamKeyId" });
        }
        if (key.status === "revoked") {
          throw new DomainError("conflict", "This upstream key is revoked; register it again to sell on it.");
        }
        if (key.status === "auth_failed") {
          throw new DomainError(
            "conflict",
            "The upstream rejected this key at the last check; offers resume once it authenticates again.",
          );
        }
        return tx.offer.create({
          data: {
            accountId: input.accountId,
            upstreamKeyId,
            priceCentsPerDollar: price,
            quantityMicroDiem: quantity,
            remainingMicroDiem: quantity,
            status: "active",
            expiresAt: nextUtcMidnight(now),
            ...standingData(standing),
            announcedPriceCents: announced,
          },
          include: offerInclude,
        });
      });
    } catch (e) {
      if (isUniqueViolation(e)) {
        throw new DomainError(
          "conflict",
          "This upstream key already has a live offer; reprice, pause or cancel it instead.",
          { field: "upstreamKeyId" },
        );
      }
      throw e;
    }
    this.publishOwner(input.accountId, { kind: "offer", id: row.id, status: "active" });
    await this.capacityChanged("offer_posted");
    return offerView(row, now, await unfoldedBurns(this.deps.db));
  }

  /** The account's offers, cancelled excluded, newest first, keyset-paginated. */
  async listOffers(input: { accountId: string; limit?: number; cursor?: string }): Promise<Page<OfferView>> {
    const take = pageSize(input.limit ?? 100);
    const after = input.cursor ? decodeCursor(input.cursor) : undefined;
    const rows = await this.deps.db.offer.findMany({
      where: { ...offerScopeFor(input), ...keysetBefore(after) },
      orderBy: newestFirst(),
      include: offerInclude,
      take: take + 1,
    });
    const now = this.deps.clock.now();
    const burns = await unfoldedBurns(this.deps.db);
    return pageOf(
      rows,
      take,
      (o) => offerView(o, now, burns),
      (o) => ({ at: o.createdAt, id: o.id }),
    );
  }

  /** One of the account's offers (any status). @throws not_found */
  async getOffer(input: { accountId: string; offerId: string }): Promise<OfferView> {
    const o = await this.ownedOffer(input.accountId, input.offerId);
    return offerView(o, this.deps.clock.now(), await unfoldedBurns(this.deps.db));
  }

  /** An offer's effective price now (GraphQL's `effectivePriceCentsPerDollar`): `effectivePrice` on this clock. */
  effectivePriceNow(offer: { priceCentsPerDollar: number; schedule: unknown }): number {
    return effectivePrice(pricedOffer(offer), this.deps.clock.now());
  }

  /**
   * Reprices and/or pauses/unpauses a live offer (SPEC table: active ⇄ paused; the key's slot stays
   * occupied while paused), and sets its standing settings (`repostDaily`, `dailyQuantityMicroDiem`,
   * `schedule`; null removes the cap or the schedule). Conditional write: only a live offer whose
   * DIEM has not expired changes; the standing settings alone (what tomorrow's repost carries) may
   * also change on a depleted offer before midnight, so a sold-out standing offer can be stopped.
   * Price and status arrive checked by the contract (`patchOfferBody`, `updateOfferInput`).
   * @throws invalid_request empty change or bad schedule; not_found not this account's offer; conflict the offer is depleted (for a price or
   *   status), expired or cancelled
   */
  async updateOffer(
    input: {
      accountId: string;
      offerId: string;
      priceCentsPerDollar?: number;
      status?: "paused" | "active";
    } & StandingSettings,
  ): Promise<OfferView> {
    const liveOnly = input.priceCentsPerDollar !== undefined || input.status !== undefined;
    if (
      !liveOnly &&
      input.repostDaily === undefined &&
      input.dailyQuantityMicroDiem === undefined &&
      input.schedule === undefined
    ) {
      throw new DomainError(
        "invalid_request",
        "Nothing to change: send priceCentsPerDollar, status, repostDaily, dailyQuantityDiem and/or schedule.",
      );
    }
    const price = input.priceCentsPerDollar;
    const status = input.status;
    const standing = checkStanding(input);
    const current = await this.ownedOffer(input.accountId, input.offerId);
    const now = this.deps.clock.now();
    const statuses: OfferStatusName[] = liveOnly ? LIVE : [...LIVE, "depleted"];
    const repriced = price !== undefined || standing.schedule !== undefined;
    const moved = await this.deps.db.$transaction(async (tx) => {
      const n = await tx.offer.updateMany({
        where: { id: current.id, status: { in: statuses }, expiresAt: { gt: now } },
        data: {
          ...(price !== undefined ? { priceCentsPerDollar: price } : {}),
          ...(status !== undefined ? { status } : {}),
          ...standingData(standing),
        },
      });
      // this write announces the price it set (capacityChanged below): the price-step job need not
      if (n.count === 1 && repriced) {
        await tx.$executeRaw`
          UPDATE offers o SET announced_price_cents = svc_effective_price(o, ${now}) WHERE o.id = ${current.id}::uuid`;
      }
      return n.count;
    });
    if (moved !== 1) throw notLive(await this.ownedOffer(input.accountId, input.offerId));
    if (status === "active") await this.markDepletedIfEmpty(current.id);
    const after = await this.ownedOffer(input.accountId, input.offerId);
    this.publishOwner(input.accountId, { kind: "offer", id: after.id, status: after.status });
    await this.capacityChanged("offer_updated");
    return offerView(after, this.deps.clock.now(), await unfoldedBurns(this.deps.db));
  }

  /**
   * Cancels a live (active or paused) offer and frees the key's slot.
   * @throws not_found not this account's offer; conflict the offer is not live
   */
  async cancelOffer(input: { accountId: string; offerId: string }): Promise<OfferView> {
    const current = await this.ownedOffer(input.accountId, input.offerId);
    const now = this.deps.clock.now();
    const moved = await this.deps.db.offer.updateMany({
      where: { id: current.id, status: { in: LIVE } },
      data: { status: "cancelled", endedAt: now },
    });
    if (moved.count !== 1) throw notLive(await this.ownedOffer(input.accountId, input.offerId));
    this.publishOwner(input.accountId, { kind: "offer", id: current.id, status: "cancelled" });
    await this.capacityChanged("offer_cancelled");
    const o = await this.ownedOffer(input.accountId, input.offerId);
    return offerView(o, now, await unfoldedBurns(this.deps.db));
  }

  /**
   * A live offer with nothing left to sell becomes `depleted` (frees the key's slot). The router
   * calls this after a settlement; expireDue sweeps any it missed. Conditional write: true only for
   * the one call that moved it.
   */
  async markDepletedIfEmpty(offerId: string): Promise<boolean> {
    const now = this.deps.clock.now();
    const { rows, hooks } = await this.deps.db.$transaction(async (tx) => {
      const moved = await tx.$queryRawUnsafe<OfferEventRow[]>(
        `UPDATE offers SET status = 'depleted', ended_at = $2::timestamptz, updated_at = $2::timestamptz
          WHERE id = $1::uuid AND status IN ('active', 'paused') AND remaining_micro_diem = 0
         RETURNING ${OFFER_EVENT_COLUMNS}`,
        offerId,
        now.toISOString(),
      );
      return { rows: moved, hooks: await this.emitOffers(tx, "offer.depleted", moved) };
    });
    const row = rows[0];
    if (!row) return false;
    await this.deps.webhooks?.dispatch(hooks);
    this.publishOwner(row.accountId, { kind: "offer", id: offerId, status: "depleted" });
    await this.capacityChanged("offer_depleted");
    return true;
  }

  // ───────────────────────────── expiry ─────────────────────────────

  /**
   * Worker `expiry` (every minute): live or depleted offers whose DIEM expired (expiresAt ≤ now)
   * become `expired`; live offers with nothing remaining become `depleted`. Each transition is one
   * conditional UPDATE, so concurrent runs in any number of processes move each offer exactly once
   * (a second runner's UPDATE re-checks the row after the first commits and skips it). A standing
   * offer that is paused when its DIEM expires stops standing (`repostDaily` turns false on the
   * expired record, in the same UPDATE): pausing stops the daily repost (standing-offers.ts).
   */
  async expireDue(): Promise<{ expired: number; depleted: number }> {
    const now = this.deps.clock.now().toISOString();
    const { depleted, expired, hooks } = await this.deps.db.$transaction(async (tx) => {
      const d = await tx.$queryRawUnsafe<OfferEventRow[]>(
        `UPDATE offers SET status = 'depleted', ended_at = $1::timestamptz, updated_at = $1::timestamptz
          WHERE status IN ('active', 'paused') AND remaining_micro_diem = 0 AND expires_at > $1::timestamptz
         RETURNING ${OFFER_EVENT_COLUMNS}`,
        now,
      );
      const e = await tx.$queryRawUnsafe<OfferEventRow[]>(
        `UPDATE offers SET status = 'expired', ended_at = COALESCE(ended_at, $1::timestamptz), updated_at = $1::timestamptz,
                           repost_daily = repost_daily AND status <> 'paused'
          WHERE status IN ('active', 'paused', 'depleted') AND expires_at <= $1::timestamptz
         RETURNING ${OFFER_EVENT_COLUMNS}`,
        now,
      );
      const written = [
        ...(await this.emitOffers(tx, "offer.depleted", d)),
        ...(await this.emitOffers(tx, "offer.expired", e)),
      ];
      return { depleted: d, expired: e, hooks: written };
    });
    await this.deps.webhooks?.dispatch(hooks);
    for (const o of depleted) this.publishOwner(o.accountId, { kind: "offer", id: o.id, status: "depleted" });
    for (const o of expired) this.publishOwner(o.accountId, { kind: "offer", id: o.id, status: "expired" });
    if (depleted.length + expired.length > 0) await this.capacityChanged("offers_expired");
    return { expired: expired.length, depleted: depleted.length };
  }

  /** `type` for each offer to its owner's webhooks, in `tx` (with the change, never without it); the outbox ids. */
  private async emitOffers(tx: OutboxTx, type: string, offers: OfferEventRow[]): Promise<string[]> {
    return (
      this.deps.webhooks?.emitEach(
        tx,
        type,
        offers.map((o) => ({
          accountId: o.accountId,
          data: offerData(o),
          dedupeKey: `${type}:${o.id}:${o.endedAt?.toISOString() ?? ""}`,
        })),
      ) ?? []
    );
  }

  private async ownedOffer(accountId: string, offerId: string): Promise<OfferRow> {
    const id = assertUuid(offerId, "id");
    const row = await this.deps.db.offer.findUnique({ where: { id }, include: offerInclude });
    if (!row || row.accountId !== accountId) throw new DomainError("not_found", "Offer not found.");
    return row;
  }

  private publishOwner(accountId: string, change: SupplyChange): void {
    publishOwner(this.deps.bus, this.deps.clock, accountId, change);
  }

  private capacityChanged(reason: string): Promise<void> {
    return this.deps.keyHealth.capacityChanged(reason);
  }
}

/** Why a conditional offer write matched nothing (the offer was re-read after the write). */
function notLive(o: OfferRow): DomainError {
  const status: OfferStatusName = o.status;
  const why =
    status === "active" || status === "paused"
      ? "its DIEM expired at UTC midnight"
      : `it is ${status}; only active or paused offers change`;
  return new DomainError("conflict", `This offer cannot change: ${why}.`, { status });
}

/** An offer row's price and schedule as `effectivePrice` takes them. */
export function pricedOffer(o: { priceCentsPerDollar: number; schedule: unknown }): PricedOffer {
  return { priceCentsPerDollar: o.priceCentsPerDollar, schedule: storedSchedule(o.schedule) };
}

/** An offer as its owner sees it, its remaining and reserved live (`liveOffer`). */
function offerView(row: OfferRow, now: Date, burns: UnfoldedBurns): OfferView {
  const o = liveOffer(row, burns);
  const schedule = storedSchedule(o.schedule);
  return {
    id: o.id,
    upstreamKeyId: o.upstreamKeyId,
    keyLabel: o.upstreamKey.label,
    keyStatus: o.upstreamKey.status,
    priceCentsPerDollar: o.priceCentsPerDollar,
    effectivePriceCentsPerDollar: effectivePrice({ priceCentsPerDollar: o.priceCentsPerDollar, schedule }, now),
    schedule,
    repostDaily: o.repostDaily,
    dailyQuantityMicroDiem: o.dailyQuantityMicroDiem,
    repostedFromId: o.repostedFromId,
    quantityMicroDiem: o.quantityMicroDiem,
    remainingMicroDiem: o.remainingMicroDiem,
    reservedMicroDiem: o.reservedMicroDiem,
    soldMicroDiem: soldMicroDiem(o),
    status: o.status,
    expiresAt: o.expiresAt,
    createdAt: o.createdAt,
    updatedAt: o.updatedAt,
    endedAt: o.endedAt,
  };
}
