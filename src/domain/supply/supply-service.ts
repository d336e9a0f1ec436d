import type { Db } from "../../adapters/db.js";
import type { EventBus, SupplyChange } from "../../adapters/pubsub.js";
import type { UpstreamClient, UpstreamFailure } from "../../adapters/upstream/client.js";
import { assertUuid } from "../../contract/common.js";
import { maskedKey } from "../../contract/supply.js";
import type { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { SecretBox } from "../../lib/secret-box.js";
import { liveKeyBalance, unfoldedBurns } from "../ledger/live-figures.js";
import type { KeyHealth } from "./key-health.js";
import { lockKeyWithOffers } from "./key-lock.js";
import { liveOffers, newestFirst, upstreamKeyScopeFor } from "./supply-reads.js";
import { secretLast4 } from "./supply-rules.js";
import { isUniqueViolation, publishOwner } from "./supply-shared.js";
import type { KeyBalance, RevokedKey, SyncResult, UpstreamKeyStatusName, UpstreamKeyView } from "./supply-types.js";

export interface SupplyDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  upstream: UpstreamClient;
  secrets: SecretBox;
  /** the one key-marking path (cooldown, auth failure, reopen) and the capacity announcement */
  keyHealth: KeyHealth;
}

/** How many upstream keys the balance sync checks at once. */
export const SYNC_CONCURRENCY = 8;

type KeyRow = Prisma.UpstreamKeyGetPayload<{
  include: { offers: { select: { id: true } } };
}>;
type SecretRow = {
  id: string;
  accountId: string;
  status: UpstreamKeyStatusName;
  secretCiphertext: Uint8Array<ArrayBuffer>;
  secretIv: Uint8Array<ArrayBuffer>;
  secretTag: Uint8Array<ArrayBuffer>;
  encryptionKeyId: string;
};

const liveOfferInclude = {
  offers: { where: liveOffers(), select: { id: true }, take: 1 },
} as const;

/**
 * Supply side, its keys: upstream keys sealed at rest (register, list, revoke, open) and
 * their balance sync. Offers are offers.ts, earnings and payouts earnings.ts; key marks go
 * through KeyHealth. Every method that takes an `accountId` checks ownership itself: another
 * account's id is 404.
 */
export class SupplyService {
  constructor(protected readonly deps: SupplyDeps) {}

  // ───────────────────────────── upstream keys ─────────────────────────────

  /**
   * Registers a supplier's upstream key. The key is checked against the upstream first (nothing is
   * stored for a key the upstream refuses), then sealed with AES-256-GCM bound to the account
   * (AAD = account id). The same secret may be registered once among non-revoked keys.
   * @throws invalid_request the upstream rejected the key (401/403); the secret's and the label's
   *   form are the contract's (`registerUpstreamKeyBody`)
   * @throws conflict the secret is already registered (here or on another account)
   * @throws upstream_error the upstream could not be asked (network, timeout, 5xx): nothing stored
   */
  async registerUpstreamKey(input: {
    accountId: string;
    /** the contract's `upstreamSecret` */
    upstreamApiKey: string;
    /** the contract's `upstreamKeyLabel` (trimmed) */
    label: string;
  }): Promise<UpstreamKeyView> {
    const secret = input.upstreamApiKey;
    const label = input.label;
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
      this.publishOwner(input.accountId, { kind: "key", id: row.id, status: "registered" });
      return keyView(row);
    } catch (e) {
      if (isUniqueViolation(e)) throw duplicateKey();
      throw e;
    }
  }

  /** The account's upstream keys (revoked ones included, with `revokedAt`), newest first. Masked. */
  async listUpstreamKeys(accountId: string): Promise<UpstreamKeyView[]> {
    const rows = await this.deps.db.upstreamKey.findMany({
      where: upstreamKeyScopeFor({ accountId }),
      orderBy: newestFirst(),
      include: liveOfferInclude,
    });
    // the balance shown live: less what clears not yet folded burned (`liveKeyBalance`)
    const burns = await unfoldedBurns(this.deps.db);
    return rows.map((r) =>
      keyView({ ...r, lastBalanceMicroDiem: liveKeyBalance(r.id, r.lastBalanceMicroDiem, burns) }),
    );
  }

  /**
   * Revokes the key row and cancels every non-cancelled offer on it (active, paused, depleted,
   * expired → cancelled). Repeatable: on an already revoked key it still cancels leftovers.
   * Locks the key's offers, then the key (`lockKeyWithOffers`: the money paths' order).
   * @throws not_found the key is not on this account
   */
  async revokeUpstreamKey(input: { accountId: string; upstreamKeyId: string }): Promise<RevokedKey> {
    const upstreamKeyId = assertUuid(input.upstreamKeyId, "id");
    const now = this.deps.clock.now();
    const cancelled = await this.deps.db.$transaction(async (tx) => {
      const owner = await lockKeyWithOffers(tx, upstreamKeyId, "revoke");
      if (owner?.account_id !== input.accountId) throw new DomainError("not_found", "Upstream key not found.");
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
    for (const o of cancelled) this.publishOwner(input.accountId, { kind: "offer", id: o.id, status: "cancelled" });
    this.publishOwner(input.accountId, { kind: "key", id: upstreamKeyId, status: "revoked" });
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

  // ───────────────────────────── key balances ─────────────────────────────

  /**
   * Worker `sync` (every 30 s): reads each active or auth_failed key's DIEM balance from the
   * upstream, at most SYNC_CONCURRENCY at once. A 401/403 of that read (it names no model: only the
   * key can be refused) marks the key `auth_failed` (out of routing); a key that authenticates again
   * returns to `active`. Other failures change nothing.
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

  /** The upstream refused a key itself during inference: see KeyHealth.markAuthFailed. */
  async markKeyAuthFailed(upstreamKeyId: string): Promise<void> {
    await this.deps.keyHealth.markAuthFailed(upstreamKeyId);
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

  private publishOwner(accountId: string, change: SupplyChange): void {
    publishOwner(this.deps.bus, this.deps.clock, accountId, change);
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
