import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { UpstreamClient, UpstreamFailure } from "../../adapters/upstream/client.js";
import type { Config } from "../../config.js";
import { Prisma } from "../../generated/prisma/client.js";
import { type Clock, nextUtcMidnight } from "../../lib/clock.js";
import { type CursorKey, decodeCursor, encodeCursor, type Page } from "../../lib/cursor.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { SecretBox } from "../../lib/secret-box.js";
import { pageSize } from "../accounts/account-service.js";
import type { MarketService } from "../market/market-service.js";
import type { KeyHealth } from "./key-health.js";
import { PAYOUT_MINIMUM_MICRO, PayoutRunner } from "./payouts.js";
import {
  assertLabel,
  assertOfferPrice,
  assertQuantity,
  assertUpstreamSecret,
  assertUuid,
  maskedKey,
  secretLast4,
} from "./supply-rules.js";
import {
  type KeyBalance,
  LIVE_OFFER_STATUSES,
  type OfferStatusName,
  type OfferView,
  type PayoutRunResult,
  type RevokedKey,
  type SupplierClearRow,
  type SupplierLedgerLine,
  type SupplierLedgerPage,
  type SyncResult,
  type UpstreamKeyStatusName,
  type UpstreamKeyView,
} from "./supply-types.js";

export interface SupplyDeps {
  db: Db;
  config: Config;
  clock: Clock;
  bus: EventBus;
  upstream: UpstreamClient;
  secrets: SecretBox;
  market: MarketService;
  /** treasury side of the chain for payouts; undefined when PAYOUT_PRIVATE_KEY is unset */
  payoutChain: ChainGateway | undefined;
  /** the one key-marking path (cooldown, auth failure, reopen) and the capacity announcement */
  keyHealth: KeyHealth;
}

/** How many upstream keys the balance sync checks at once. */
export const SYNC_CONCURRENCY = 8;

type KeyRow = Prisma.UpstreamKeyGetPayload<{
  include: { offers: { select: { id: true } } };
}>;
type OfferRow = Prisma.OfferGetPayload<{ include: { upstreamKey: { select: { status: true; label: true } } } }>;
type SecretRow = {
  id: string;
  accountId: string;
  status: UpstreamKeyStatusName;
  secretCiphertext: Uint8Array<ArrayBuffer>;
  secretIv: Uint8Array<ArrayBuffer>;
  secretTag: Uint8Array<ArrayBuffer>;
  encryptionKeyId: string;
};

const LIVE = [...LIVE_OFFER_STATUSES];
const liveOfferInclude = {
  offers: { where: { status: { in: LIVE } }, select: { id: true }, take: 1 },
} as const;
const offerInclude = { upstreamKey: { select: { status: true, label: true } } } as const;

function isUniqueViolation(e: unknown): boolean {
  return e instanceof Prisma.PrismaClientKnownRequestError && e.code === "P2002";
}

/**
 * Supply side (issue 5): upstream keys (sealed at rest), offers and their states (SPEC "Supplier
 * offer"), expiry at UTC midnight, key balance sync, supplier earnings and daily payouts.
 * Every method that takes an `accountId` checks ownership itself: another account's id is 404.
 */
export class SupplyService {
  private readonly payouts: PayoutRunner;

  constructor(protected readonly deps: SupplyDeps) {
    this.payouts = new PayoutRunner({
      db: deps.db,
      clock: deps.clock,
      bus: deps.bus,
      chain: deps.payoutChain,
      confirmationBlocks: deps.config.chain.confirmationBlocks,
    });
  }

  // ───────────────────────────── scopes (GraphQL reads) ─────────────────────────────

  /** Prisma `where` for the viewer's own upstream keys. */
  keyScopeFor(viewer: { accountId: string }): Prisma.UpstreamKeyWhereInput {
    return { accountId: viewer.accountId };
  }

  /** Prisma `where` for the viewer's own offers, cancelled excluded (SPEC "Supplier (session)"). */
  offerScopeFor(viewer: { accountId: string }): Prisma.OfferWhereInput {
    return { accountId: viewer.accountId, status: { not: "cancelled" } };
  }

  // ───────────────────────────── upstream keys ─────────────────────────────

  /**
   * Registers a supplier's upstream key. The key is checked against the upstream first (nothing is
   * stored for a key the upstream refuses), then sealed with AES-256-GCM bound to the account
   * (AAD = account id). The same secret may be registered once among non-revoked keys.
   * @throws invalid_request bad input, or the upstream rejected the key (401/403)
   * @throws conflict the secret is already registered (here or on another account)
   * @throws upstream_error the upstream could not be asked (network, timeout, 5xx): nothing stored
   */
  async registerUpstreamKey(input: {
    accountId: string;
    upstreamApiKey: unknown;
    label: unknown;
  }): Promise<UpstreamKeyView> {
    const secret = assertUpstreamSecret(input.upstreamApiKey);
    const label = assertLabel(input.label);
    const { db, secrets } = this.deps;
    const fingerprint = secrets.fingerprint(secret);
    const existing = await db.upstreamKey.findFirst({
      where: { secretFingerprint: fingerprint, status: { not: "revoked" } },
      select: { id: true },
    });
    if (existing) throw duplicateKey();

    const checked = await this.deps.upstream.keyStatus(secret);
    if (!checked.ok) throw keyCheckError(checked.failure);
    const status = checked.value;
    const balance = status.diemMicro ?? (status.accessPermitted ? null : 0n);

    const sealed = secrets.seal(secret, input.accountId);
    const now = this.deps.clock.now();
    try {
      const row = await db.upstreamKey.create({
        data: {
          accountId: input.accountId,
          label,
          secretCiphertext: sealed.ciphertext,
          secretIv: sealed.iv,
          secretTag: sealed.tag,
          encryptionKeyId: sealed.keyId,
          secretFingerprint: fingerprint,
          secretLast4: secretLast4(secret),
          lastBalanceMicroDiem: balance,
          lastBalanceAt: now,
        },
        include: liveOfferInclude,
      });
      this.publishOwner(input.accountId, `key:${row.id}:registered`);
      return keyView(row);
    } catch (e) {
      if (isUniqueViolation(e)) throw duplicateKey();
      throw e;
    }
  }

  /** The account's upstream keys (revoked ones included, with `revokedAt`), newest first. Masked. */
  async listUpstreamKeys(accountId: string): Promise<UpstreamKeyView[]> {
    const rows = await this.deps.db.upstreamKey.findMany({
      where: { accountId },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      include: liveOfferInclude,
    });
    return rows.map(keyView);
  }

  /**
   * Revokes the key row and cancels every non-cancelled offer on it (active, paused, depleted,
   * expired → cancelled). Repeatable: on an already revoked key it still cancels leftovers.
   * Locks the key row, then its offers (the same order as postOffer).
   * @throws not_found the key is not on this account
   */
  async revokeUpstreamKey(input: { accountId: string; upstreamKeyId: string }): Promise<RevokedKey> {
    const upstreamKeyId = assertUuid(input.upstreamKeyId, "id");
    const now = this.deps.clock.now();
    const cancelled = await this.deps.db.$transaction(async (tx) => {
      const owner = await tx.$queryRaw<{ account_id: string }[]>`
        SELECT account_id FROM upstream_keys WHERE id = ${upstreamKeyId}::uuid FOR UPDATE`;
      if (owner[0]?.account_id !== input.accountId) throw new DomainError("not_found", "Upstream key not found.");
      await tx.upstreamKey.updateMany({
        where: { id: upstreamKeyId, status: { not: "revoked" } },
        data: { status: "revoked", revokedAt: now },
      });
      return tx.$queryRaw<{ id: string }[]>`
        UPDATE offers
           SET status = 'cancelled', ended_at = COALESCE(ended_at, ${now}), updated_at = ${now}
         WHERE upstream_key_id = ${upstreamKeyId}::uuid AND status <> 'cancelled'
        RETURNING id`;
    });
    for (const o of cancelled) this.publishOwner(input.accountId, `offer:${o.id}:cancelled`);
    this.publishOwner(input.accountId, `key:${upstreamKeyId}:revoked`);
    await this.capacityChanged("upstream_key_revoked");
    const key = await this.getKeyRow(upstreamKeyId);
    return { upstreamKeyId, cancelledOffers: cancelled.length, key: keyView(key) };
  }

  /**
   * The plaintext upstream secret of a key, for the router's upstream calls. Any status is opened
   * (a video job may need its revoked key to fetch media); the caller decides what to route.
   * Never log the result.
   * @throws not_found unknown key; internal_error when the ciphertext does not open (tampered,
   *   moved between accounts, or sealed with an encryption key this process does not hold)
   */
  async openKey(upstreamKeyId: string): Promise<string> {
    const row = await this.deps.db.upstreamKey.findUnique({ where: { id: upstreamKeyId } });
    if (!row) throw new DomainError("not_found", "Upstream key not found.");
    return this.open(row);
  }

  // ───────────────────────────── offers ─────────────────────────────

  /**
   * Posts an offer on the account's own active key. Initial state `active`; the DIEM expires at
   * the next UTC midnight. At most one live offer per key: the partial unique index
   * `offers_one_live_per_key` decides races (its violation is a 409).
   * Holds a share lock on the key row so a concurrent revocation either sees the offer or wins.
   * @throws invalid_request bad price/quantity; not_found key not on this account;
   *   conflict key revoked or failing upstream auth, or a live offer exists on the key
   */
  async postOffer(input: {
    accountId: string;
    upstreamKeyId: string;
    priceCentsPerDollar: unknown;
    quantityMicroDiem: bigint;
  }): Promise<OfferView> {
    const price = assertOfferPrice(input.priceCentsPerDollar);
    const quantity = assertQuantity(input.quantityMicroDiem);
    const upstreamKeyId = assertUuid(input.upstreamKeyId, "upstreamKeyId");
    const now = this.deps.clock.now();
    let row: OfferRow;
    try {
      row = await this.deps.db.$transaction(async (tx) => {
        const keys = await tx.$queryRaw<{ account_id: string; status: UpstreamKeyStatusName }[]>`
          SELECT account_id, status::text AS status FROM upstream_keys WHERE id = ${upstreamKeyId}::uuid FOR SHARE`;
        const key = keys[0];
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
    this.publishOwner(input.accountId, `offer:${row.id}:active`);
    await this.capacityChanged("offer_posted");
    return offerView(row);
  }

  /** The account's offers, cancelled excluded, newest first, keyset-paginated. */
  async listOffers(input: { accountId: string; limit?: number; cursor?: string }): Promise<Page<OfferView>> {
    const take = pageSize(input.limit ?? 100);
    const after = input.cursor ? decodeCursor(input.cursor) : undefined;
    const rows = await this.deps.db.offer.findMany({
      where: { accountId: input.accountId, status: { not: "cancelled" }, ...keysetBefore(after) },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      include: offerInclude,
      take: take + 1,
    });
    return pageOf(rows, take, offerView, (o) => ({ at: o.createdAt, id: o.id }));
  }

  /** One of the account's offers (any status). @throws not_found */
  async getOffer(input: { accountId: string; offerId: string }): Promise<OfferView> {
    return offerView(await this.ownedOffer(input.accountId, input.offerId));
  }

  /**
   * Reprices and/or pauses/unpauses a live offer (SPEC table: active ⇄ paused; the key's slot stays
   * occupied while paused). Conditional write: only a live offer whose DIEM has not expired changes.
   * @throws invalid_request empty change, price outside 1–80, status other than paused/active;
   *   not_found not this account's offer; conflict the offer is depleted, expired or cancelled
   */
  async updateOffer(input: {
    accountId: string;
    offerId: string;
    priceCentsPerDollar?: unknown;
    status?: unknown;
  }): Promise<OfferView> {
    if (input.priceCentsPerDollar === undefined && input.status === undefined) {
      throw new DomainError("invalid_request", "Nothing to change: send priceCentsPerDollar and/or status.");
    }
    const price = input.priceCentsPerDollar === undefined ? undefined : assertOfferPrice(input.priceCentsPerDollar);
    if (input.status !== undefined && input.status !== "paused" && input.status !== "active") {
      throw new DomainError("invalid_request", 'status must be "paused" or "active".', { field: "status" });
    }
    const status = input.status as "paused" | "active" | undefined;
    const current = await this.ownedOffer(input.accountId, input.offerId);
    const now = this.deps.clock.now();
    const moved = await this.deps.db.offer.updateMany({
      where: { id: current.id, status: { in: LIVE }, expiresAt: { gt: now } },
      data: {
        ...(price !== undefined ? { priceCentsPerDollar: price } : {}),
        ...(status !== undefined ? { status } : {}),
      },
    });
    if (moved.count !== 1) throw notLive(await this.ownedOffer(input.accountId, input.offerId));
    if (status === "active") await this.markDepletedIfEmpty(current.id);
    const after = await this.ownedOffer(input.accountId, input.offerId);
    this.publishOwner(input.accountId, `offer:${after.id}:${after.status}`);
    await this.capacityChanged("offer_updated");
    return offerView(after);
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
    this.publishOwner(input.accountId, `offer:${current.id}:cancelled`);
    await this.capacityChanged("offer_cancelled");
    return offerView(await this.ownedOffer(input.accountId, input.offerId));
  }

  /**
   * A live offer with nothing left to sell becomes `depleted` (frees the key's slot). The router
   * calls this after a settlement; expireDue sweeps any it missed. Conditional write: true only for
   * the one call that moved it.
   */
  async markDepletedIfEmpty(offerId: string): Promise<boolean> {
    const now = this.deps.clock.now();
    const rows = await this.deps.db.$queryRaw<{ account_id: string }[]>`
      UPDATE offers SET status = 'depleted', ended_at = ${now}, updated_at = ${now}
       WHERE id = ${offerId}::uuid AND status IN ('active', 'paused') AND remaining_micro_diem = 0
      RETURNING account_id`;
    const row = rows[0];
    if (!row) return false;
    this.publishOwner(row.account_id, `offer:${offerId}:depleted`);
    await this.capacityChanged("offer_depleted");
    return true;
  }

  // ───────────────────────────── expiry ─────────────────────────────

  /**
   * Worker `expiry` (every minute): live or depleted offers whose DIEM expired (expiresAt ≤ now)
   * become `expired`; live offers with nothing remaining become `depleted`. Each transition is one
   * conditional UPDATE, so concurrent runs in any number of processes move each offer exactly once
   * (a second runner's UPDATE re-checks the row after the first commits and skips it).
   */
  async expireDue(): Promise<{ expired: number; depleted: number }> {
    const now = this.deps.clock.now();
    const depleted = await this.deps.db.$queryRaw<{ id: string; account_id: string }[]>`
      UPDATE offers SET status = 'depleted', ended_at = ${now}, updated_at = ${now}
       WHERE status IN ('active', 'paused') AND remaining_micro_diem = 0 AND expires_at > ${now}
      RETURNING id, account_id`;
    const expired = await this.deps.db.$queryRaw<{ id: string; account_id: string }[]>`
      UPDATE offers SET status = 'expired', ended_at = COALESCE(ended_at, ${now}), updated_at = ${now}
       WHERE status IN ('active', 'paused', 'depleted') AND expires_at <= ${now}
      RETURNING id, account_id`;
    for (const o of depleted) this.publishOwner(o.account_id, `offer:${o.id}:depleted`);
    for (const o of expired) this.publishOwner(o.account_id, `offer:${o.id}:expired`);
    if (depleted.length + expired.length > 0) await this.capacityChanged("offers_expired");
    return { expired: expired.length, depleted: depleted.length };
  }

  // ───────────────────────────── key balances ─────────────────────────────

  /**
   * Worker `sync` (every 30 s): reads each active or auth_failed key's DIEM balance from the
   * upstream, at most SYNC_CONCURRENCY at once. A 401/403 marks the key `auth_failed` (out of
   * routing); a key that authenticates again returns to `active`. Other failures change nothing.
   */
  async syncKeyBalances(): Promise<SyncResult> {
    const rows = await this.deps.db.upstreamKey.findMany({
      where: { status: { in: ["active", "auth_failed"] } },
      orderBy: { lastBalanceAt: { sort: "asc", nulls: "first" } },
    });
    const result: SyncResult = { synced: 0, authFailed: 0, recovered: 0, errors: 0 };
    let changedStatus = false;
    await mapBounded(rows, SYNC_CONCURRENCY, async (row) => {
      const r = await this.syncOne(row);
      if (r.outcome === "ok") result.synced += 1;
      else if (r.outcome === "auth") result.authFailed += 1;
      else result.errors += 1;
      if (r.recovered) result.recovered += 1;
      if (r.statusChanged) changedStatus = true;
    });
    if (rows.length > 0) await this.capacityChanged(changedStatus ? "key_status_changed" : "key_balances_synced");
    return result;
  }

  /**
   * Re-reads one key's balance now (the router calls this after an upstream 402). Same rules as
   * the sync; a revoked key is not asked.
   * @throws not_found unknown key
   */
  async refreshKeyBalance(upstreamKeyId: string): Promise<KeyBalance> {
    const row = await this.deps.db.upstreamKey.findUnique({ where: { id: upstreamKeyId } });
    if (!row) throw new DomainError("not_found", "Upstream key not found.");
    let outcome: KeyBalance["outcome"] = "skipped";
    if (row.status !== "revoked") {
      const r = await this.syncOne(row);
      outcome = r.outcome;
      await this.capacityChanged(r.statusChanged ? "key_status_changed" : "key_balance_refreshed");
    }
    const after = await this.getKeyRow(upstreamKeyId);
    return {
      upstreamKeyId,
      status: after.status,
      balanceMicroDiem: after.lastBalanceMicroDiem,
      lastBalanceAt: after.lastBalanceAt,
      outcome,
    };
  }

  /** An upstream 402/429 kept the key out of routing until `untilMs`: see KeyHealth.coolDown. */
  async coolDownKey(upstreamKeyId: string, untilMs: number): Promise<void> {
    await this.deps.keyHealth.coolDown(upstreamKeyId, untilMs);
  }

  /** The upstream refused a key during inference (401/403): see KeyHealth.markAuthFailed. */
  async markKeyAuthFailed(upstreamKeyId: string): Promise<void> {
    await this.deps.keyHealth.markAuthFailed(upstreamKeyId);
  }

  // ───────────────────────────── earnings ─────────────────────────────

  /**
   * The account's supplier_payable entries, newest first, keyset-paginated, with the payable and
   * paid-out totals and the most recent payouts. Reads only.
   */
  async supplierLedger(input: { accountId: string; limit?: number; cursor?: string }): Promise<SupplierLedgerPage> {
    const take = pageSize(input.limit);
    const after = input.cursor ? decodeCursor(input.cursor) : undefined;
    const { db } = this.deps;
    const [account, entries, totals, recent] = await Promise.all([
      db.account.findUnique({ where: { id: input.accountId }, select: { supplierPayableMicroUsdc: true } }),
      db.ledgerEntry.findMany({
        where: { accountId: input.accountId, book: "supplier_payable", ...keysetBefore(after) },
        orderBy: [{ createdAt: "desc" }, { id: "desc" }],
        include: { transaction: { select: { kind: true } } },
        take: take + 1,
      }),
      db.payout.groupBy({
        by: ["status"],
        where: { accountId: input.accountId },
        _sum: { amountMicroUsdc: true },
      }),
      db.payout.findMany({
        where: { accountId: input.accountId },
        orderBy: [{ createdAt: "desc" }, { id: "desc" }],
        take: 10,
      }),
    ]);
    if (!account) throw new DomainError("not_found", "Account not found.");
    const sum = (s: string) => totals.find((t) => t.status === s)?._sum.amountMicroUsdc ?? 0n;
    const page = pageOf(
      entries,
      take,
      (e): SupplierLedgerLine => ({
        id: e.id,
        kind: e.kind,
        amountMicroUsdc: e.amountMicroUsdc,
        transactionId: e.transactionId,
        transactionKind: e.transaction.kind,
        createdAt: e.createdAt,
      }),
      (e) => ({ at: e.createdAt, id: e.id }),
    );
    return {
      payableMicroUsdc: account.supplierPayableMicroUsdc,
      paidOutMicroUsdc: sum("submitted") + sum("confirmed"),
      payoutPendingMicroUsdc: sum("pending"),
      payoutMinimumMicroUsdc: PAYOUT_MINIMUM_MICRO,
      recentPayouts: recent.map((p) => ({
        id: p.id,
        period: p.period,
        toAddress: p.toAddress,
        amountMicroUsdc: p.amountMicroUsdc,
        status: p.status,
        txHash: p.txHash,
        failureReason: p.failureReason,
        createdAt: p.createdAt,
        submittedAt: p.submittedAt,
        confirmedAt: p.confirmedAt,
      })),
      items: page.items,
      nextCursor: page.nextCursor,
    };
  }

  /** Clears this account sold as the supplier, newest first, keyset-paginated. No buyer identity. */
  async supplierInferenceHistory(input: {
    accountId: string;
    limit?: number;
    cursor?: string;
  }): Promise<Page<SupplierClearRow>> {
    const take = pageSize(input.limit);
    const after = input.cursor ? decodeCursor(input.cursor) : undefined;
    const rows = await this.deps.db.clear.findMany({
      where: { supplierAccountId: input.accountId, ...keysetBefore(after) },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      select: {
        id: true,
        offerId: true,
        upstreamKeyId: true,
        model: true,
        modality: true,
        priceCentsPerDollar: true,
        burnMicroDiem: true,
        grossMicroUsdc: true,
        feeMicroUsdc: true,
        supplierMicroUsdc: true,
        refundedAt: true,
        createdAt: true,
      },
      take: take + 1,
    });
    return pageOf(
      rows,
      take,
      (c): SupplierClearRow => ({
        clearId: c.id,
        offerId: c.offerId,
        upstreamKeyId: c.upstreamKeyId,
        model: c.model,
        modality: c.modality,
        priceCentsPerDollar: c.priceCentsPerDollar,
        burnMicroDiem: c.burnMicroDiem,
        grossMicroUsdc: c.grossMicroUsdc,
        feeMicroUsdc: c.feeMicroUsdc,
        earnedMicroUsdc: c.supplierMicroUsdc,
        refundedAt: c.refundedAt,
        createdAt: c.createdAt,
      }),
      (c) => ({ at: c.createdAt, id: c.id }),
    );
  }

  // ───────────────────────────── payouts ─────────────────────────────

  /**
   * Worker `payouts` (hourly): confirms sent payouts, finishes payouts a crash left unsent, then
   * pays every supplier whose payable balance is at least PAYOUT_MINIMUM_MICRO once per UTC day.
   * See payouts.ts for the crash-safety rules. Does nothing (logged once) without a payout key.
   */
  async runDailyPayouts(): Promise<PayoutRunResult> {
    return this.payouts.run();
  }

  // ───────────────────────────── internals ─────────────────────────────

  private open(row: SecretRow): string {
    try {
      return this.deps.secrets.open(
        { ciphertext: row.secretCiphertext, iv: row.secretIv, tag: row.secretTag, keyId: row.encryptionKeyId },
        row.accountId,
      );
    } catch (e) {
      throw new DomainError("internal_error", "The upstream key could not be decrypted.", {}, { cause: e });
    }
  }

  /** One key against the upstream: stores what it learns with writes conditional on the status read. */
  private async syncOne(
    row: SecretRow,
  ): Promise<{ outcome: "ok" | "auth" | "unavailable"; recovered: boolean; statusChanged: boolean }> {
    const { db, keyHealth } = this.deps;
    let secret: string;
    try {
      secret = this.open(row);
    } catch (e) {
      logger.error({ err: e, upstreamKeyId: row.id }, "upstream key does not decrypt; balance not synced");
      return { outcome: "unavailable", recovered: false, statusChanged: false };
    }
    const r = await this.deps.upstream.keyStatus(secret);
    const now = this.deps.clock.now();
    if (r.ok) {
      const balance = r.value.diemMicro ?? (r.value.accessPermitted ? undefined : 0n);
      await db.upstreamKey.updateMany({
        where: { id: row.id, status: { in: ["active", "auth_failed"] } },
        data: { ...(balance !== undefined ? { lastBalanceMicroDiem: balance } : {}), lastBalanceAt: now },
      });
      // the caller announces one capacity change for the whole sync
      const recovered = row.status === "auth_failed" && (await keyHealth.reopen(row.id, { announce: false }));
      return { outcome: "ok", recovered, statusChanged: recovered };
    }
    if (r.failure.kind === "auth") {
      const moved = await keyHealth.markAuthFailed(row.id, { announce: false });
      return { outcome: "auth", recovered: false, statusChanged: moved };
    }
    logger.warn(
      { upstreamKeyId: row.id, kind: r.failure.kind, status: r.failure.status },
      "upstream key balance not read",
    );
    return { outcome: "unavailable", recovered: false, statusChanged: false };
  }

  private async getKeyRow(id: string): Promise<KeyRow> {
    const row = await this.deps.db.upstreamKey.findUnique({ where: { id }, include: liveOfferInclude });
    if (!row) throw new DomainError("not_found", "Upstream key not found.");
    return row;
  }

  private async ownedOffer(accountId: string, offerId: string): Promise<OfferRow> {
    const id = assertUuid(offerId, "id");
    const row = await this.deps.db.offer.findUnique({ where: { id }, include: offerInclude });
    if (!row || row.accountId !== accountId) throw new DomainError("not_found", "Offer not found.");
    return row;
  }

  /** `offerUpdated` to the owner; `kind` is `offer:<id>:<status>` or `key:<id>:<status>`. */
  private publishOwner(accountId: string, kind: string): void {
    this.deps.bus.publish("offerUpdated", accountId, { accountId, kind, at: this.deps.clock.now().toISOString() });
  }

  /** Capacity subscribers must hear about it, but a failed publish never fails the write that happened. */
  private capacityChanged(reason: string): Promise<void> {
    return this.deps.keyHealth.capacityChanged(reason);
  }
}

// ───────────────────────────── helpers ─────────────────────────────

function duplicateKey(): DomainError {
  return new DomainError("conflict", "This upstream key is already registered.", { field: "upstreamApiKey" });
}

/** The registration check's failure: refused → 400; could not ask → 502 (docs/decisions.md "Supply"). */
function keyCheckError(f: UpstreamFailure): DomainError {
  if (f.kind === "auth") {
    return new DomainError("invalid_request", "The upstream rejected the key.", { field: "upstreamApiKey" });
  }
  return new DomainError(
    "upstream_error",
    "The upstream could not be reached to check the key; nothing was stored. Try again.",
    { upstreamFailure: f.kind },
  );
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

function keyView(row: KeyRow): UpstreamKeyView {
  return {
    id: row.id,
    label: row.label,
    status: row.status,
    maskedKey: maskedKey(row.secretLast4),
    balanceMicroDiem: row.lastBalanceMicroDiem,
    lastBalanceAt: row.lastBalanceAt,
    authFailedAt: row.authFailedAt,
    cooldownUntil: row.cooldownUntil,
    createdAt: row.createdAt,
    revokedAt: row.revokedAt,
    liveOfferId: row.offers[0]?.id ?? null,
  };
}

function offerView(o: OfferRow): OfferView {
  return {
    id: o.id,
    upstreamKeyId: o.upstreamKeyId,
    keyLabel: o.upstreamKey.label,
    keyStatus: o.upstreamKey.status,
    priceCentsPerDollar: o.priceCentsPerDollar,
    quantityMicroDiem: o.quantityMicroDiem,
    remainingMicroDiem: o.remainingMicroDiem,
    reservedMicroDiem: o.reservedMicroDiem,
    soldMicroDiem: o.quantityMicroDiem - o.remainingMicroDiem,
    status: o.status,
    expiresAt: o.expiresAt,
    createdAt: o.createdAt,
    updatedAt: o.updatedAt,
    endedAt: o.endedAt,
  };
}

type Keyset = { OR?: ({ createdAt: { lt: Date } } | { createdAt: Date; id: { lt: string } })[] };

/** Keyset condition "strictly after the cursor" for a newest-first order on (createdAt, id). */
function keysetBefore(after: CursorKey | undefined): Keyset {
  if (!after) return {};
  return { OR: [{ createdAt: { lt: after.at } }, { createdAt: after.at, id: { lt: after.id } }] };
}

function pageOf<R, T>(rows: R[], take: number, map: (r: R) => T, key: (r: R) => CursorKey): Page<T> {
  const kept = rows.slice(0, take);
  const last = kept[kept.length - 1];
  return {
    items: kept.map(map),
    nextCursor: rows.length > take && last ? encodeCursor(key(last)) : null,
  };
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function mapBounded<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await fn(item);
    }
  });
  await Promise.all(lanes);
}
