import type { Db } from "../../adapters/db.js";
import type { EventBus, SupplyChange } from "../../adapters/pubsub.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import type { MarketService } from "../market/market-service.js";
import type { WebhookOutbox } from "../webhooks/outbox.js";
import { upstreamKeyUnhealthyData } from "../webhooks/payloads.js";
import { publishOwner } from "./supply-shared.js";

export interface KeyHealthDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  market: Pick<MarketService, "publishCapacityChanged">;
  onSupplyChanged?: () => void;
  /** `upstream_key.unhealthy` is written to the outbox in the auth mark's transaction (never lost, never early) */
  webhooks?: Pick<WebhookOutbox, "emit" | "dispatch">;
}

/** `announce: false` when the caller announces one capacity change for a whole batch (the sync). */
export interface MarkOptions {
  announce?: boolean;
}

/**
 * THE place that changes a supplier key's routing health: a cooldown after an upstream 402, the
 * auth mark after the upstream's invalid-key answer (inference, or a 401/403 of the balance sync),
 * and the reopening when a sync sees the key authenticate again. Each is one conditional UPDATE and
 * publishes the same events whoever calls it: `offerUpdated` to the key's owner on a status change,
 * then `routingChanged` + `capacityChanged`.
 */
export class KeyHealth {
  constructor(private readonly deps: KeyHealthDeps) {}

  /** Keeps the key out of routing until `untilMs` (epoch ms); only extends. True when it moved. */
  async coolDown(upstreamKeyId: string, untilMs: number): Promise<boolean> {
    const until = new Date(untilMs);
    const moved = await this.deps.db.upstreamKey.updateMany({
      where: { id: upstreamKeyId, OR: [{ cooldownUntil: null }, { cooldownUntil: { lt: until } }] },
      data: { cooldownUntil: until },
    });
    if (moved.count > 0) await this.capacityChanged("key_cooldown");
    return moved.count > 0;
  }

  /** active → auth_failed (the upstream refused the key itself). True when it moved. */
  async markAuthFailed(upstreamKeyId: string, opts: MarkOptions = {}): Promise<boolean> {
    const now = this.deps.clock.now();
    const hooks = this.deps.webhooks;
    const { row, ids } = await this.deps.db.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<{ account_id: string; label: string; secret_last4: string }[]>`
        UPDATE upstream_keys SET status = 'auth_failed', auth_failed_at = ${now}
         WHERE id = ${upstreamKeyId}::uuid AND status = 'active'
        RETURNING account_id, label, secret_last4`;
      const moved = rows[0];
      if (!moved || !hooks) return { row: moved, ids: [] };
      const data = upstreamKeyUnhealthyData({
        id: upstreamKeyId,
        label: moved.label,
        secretLast4: moved.secret_last4,
        authFailedAt: now,
      });
      return { row: moved, ids: await hooks.emit(tx, moved.account_id, "upstream_key.unhealthy", data) };
    });
    if (!row) return false;
    await hooks?.dispatch(ids);
    logger.warn({ upstreamKeyId }, "upstream rejected a supplier key; excluded from routing");
    this.publishOwner(row.account_id, { kind: "key", id: upstreamKeyId, status: "auth_failed" });
    if (opts.announce !== false) await this.capacityChanged("key_status_changed");
    return true;
  }

  /** auth_failed → active (a sync saw the key authenticate again). True when it moved. */
  async reopen(upstreamKeyId: string, opts: MarkOptions = {}): Promise<boolean> {
    const rows = await this.deps.db.$queryRaw<{ account_id: string }[]>`
      UPDATE upstream_keys SET status = 'active', auth_failed_at = NULL
       WHERE id = ${upstreamKeyId}::uuid AND status = 'auth_failed'
      RETURNING account_id`;
    const row = rows[0];
    if (!row) return false;
    this.publishOwner(row.account_id, { kind: "key", id: upstreamKeyId, status: "active" });
    if (opts.announce !== false) await this.capacityChanged("key_status_changed");
    return true;
  }

  /** Every process re-reads its offer book; capacity subscribers hear `reason`. Never throws. */
  async capacityChanged(reason: string): Promise<void> {
    this.deps.onSupplyChanged?.();
    this.deps.bus.publish("routingChanged", { kind: "supply_changed" });
    try {
      await this.deps.market.publishCapacityChanged(reason);
    } catch (e) {
      logger.warn({ err: e, reason }, "capacityChanged not published");
    }
  }

  private publishOwner(accountId: string, change: SupplyChange): void {
    publishOwner(this.deps.bus, this.deps.clock, accountId, change);
  }
}
