import type { Hex } from "viem";
import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import type { ApiKeyService } from "../keys/api-key-service.js";
import { confirmTopUp, reverseTopUp } from "../ledger/ledger.js";
import type { WebhookOutbox } from "../webhooks/outbox.js";
import { creditConfirmedData } from "../webhooks/payloads.js";
import { recordSettlement } from "./settlement-record.js";

/** A `pending` settlement missing from the chain this long is treated as reorged out. */
export const MISSING_TX_GRACE_MS = 10 * 60_000;

export interface ReconcilerDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  chain: ChainGateway;
  apiKeys: Pick<ApiKeyService, "createKeyInTx">;
  /** CONFIRMATION_BLOCKS: depth before pending credit is confirmed */
  confirmationBlocks: number;
  /** `credit.confirmed` is written to the outbox in the confirmation's transaction */
  webhooks?: Pick<WebhookOutbox, "emit" | "dispatch">;
}

/**
 * The chain side of funding (workers): pending credit confirmed once its transfer is deep enough,
 * reversed when the chain no longer carries it, and payments a crash left uncredited found on
 * chain and credited through `recordSettlement` — never twice.
 */
export class PaymentReconciler {
  constructor(private readonly deps: ReconcilerDeps) {}

  /**
   * Confirmations (worker): every `pending` payment whose transfer is `CONFIRMATION_BLOCKS` deep
   * in the canonical chain becomes confirmed and spendable. A transfer that is gone from the chain
   * (or never moved the right amount) is reversed after a grace period. Idempotent.
   */
  async confirmPending(): Promise<{ confirmed: number; reversed: number; waiting: number }> {
    const pending = await this.deps.db.payment.findMany({
      where: { status: "pending" },
      orderBy: { settledAt: "asc" },
      take: 500,
    });
    let confirmed = 0;
    let reversed = 0;
    let waiting = 0;
    const now = this.deps.clock.now();
    for (const p of pending) {
      if (!p.settlementTxHash || !p.accountId) continue;
      const c = await this.deps.chain.getConfirmations(p.settlementTxHash as Hex);
      if (!c.ok) {
        if (
          c.failure.kind === "not_found" &&
          p.settledAt &&
          now.getTime() - p.settledAt.getTime() > MISSING_TX_GRACE_MS
        ) {
          await this.reverse(p, "settlement transaction is no longer in the chain");
          reversed++;
        } else waiting++;
        continue;
      }
      await this.deps.db.payment.updateMany({
        where: { id: p.id, status: "pending" },
        data: { confirmations: c.value.confirmations, blockNumber: c.value.blockNumber },
      });
      if (c.value.confirmations < this.deps.confirmationBlocks) {
        waiting++;
        continue;
      }
      // the chain must show this exact transfer: payer → payTo, the amount, this authorization
      const moved = await this.deps.chain.getUsdcSettlementsInTx(p.settlementTxHash as Hex);
      if (!moved.ok) {
        waiting++;
        continue;
      }
      const match = moved.value.find(
        (s) =>
          s.authorizationNonce === p.authorizationNonce &&
          s.from.toLowerCase() === p.payerAddress &&
          s.to.toLowerCase() === p.payToAddress &&
          s.valueMicroUsdc === p.amountMicroUsdc,
      );
      if (!match) {
        await this.reverse(p, "settlement transaction does not carry the authorized transfer");
        reversed++;
        continue;
      }
      const accountId = p.accountId;
      const done = await this.deps.db.$transaction(async (tx) => {
        const claimed = await tx.payment.updateMany({
          where: { id: p.id, status: "pending" },
          data: { status: "confirmed", confirmedAt: now, logIndex: match.logIndex },
        });
        if (claimed.count !== 1) return null;
        await confirmTopUp(tx, { accountId, paymentId: p.id, amountMicroUsdc: p.amountMicroUsdc, at: now });
        // issue 30: the buyer's webhooks hear of it, in this transaction (never lost, never early)
        return (
          (await this.deps.webhooks?.emit(
            tx,
            accountId,
            "credit.confirmed",
            creditConfirmedData({ ...p, confirmations: c.value.confirmations, confirmedAt: now }),
          )) ?? []
        );
      });
      if (done) {
        await this.deps.webhooks?.dispatch(done);
        confirmed++;
        const event = { accountId: p.accountId, kind: "top_up_confirmed", at: now.toISOString() };
        this.deps.bus.publish("balanceChanged", p.accountId, event);
        this.deps.bus.publish("paymentConfirmed", p.accountId, { ...event, kind: `payment:${p.id}` });
      }
    }
    return { confirmed, reversed, waiting };
  }

  /**
   * Reconciliation of one payment (worker, queued by the 409 path): credits it when the chain shows
   * its settlement, marks it failed when its authorization expired unused. Never credits twice.
   */
  async reconcilePayment(paymentId: string): Promise<"credited" | "already" | "failed" | "waiting"> {
    const p = await this.deps.db.payment.findUnique({ where: { id: paymentId } });
    if (!p) return "failed";
    if (p.status === "pending" || p.status === "confirmed") return "already";
    const settlement = await this.findSettlementOnChain(p);
    if (settlement) {
      await recordSettlement(this.deps, p.id, settlement, { mintKey: false });
      return "credited";
    }
    const now = this.deps.clock.now();
    if (p.validBefore && p.validBefore.getTime() + 60_000 < now.getTime()) {
      const used = await this.deps.chain.getAuthorizationState(p.payerAddress as Hex, p.authorizationNonce as Hex);
      if (used.ok && !used.value) {
        await this.deps.db.payment.updateMany({
          where: { id: p.id, status: { in: ["settling", "reconciling"] } },
          data: { status: "failed", failureReason: "authorization expired without settlement" },
        });
        return "failed";
      }
    }
    return "waiting";
  }

  /**
   * Chain scan (worker): every uncredited payment (`settling` older than a minute, or
   * `reconciling`) is reconciled from the chain. Covers crashes between settle and write.
   */
  async reconcileOutstanding(): Promise<{ credited: number; failed: number; waiting: number }> {
    const cutoff = new Date(this.deps.clock.now().getTime() - 60_000);
    const rows = await this.deps.db.payment.findMany({
      where: { OR: [{ status: "reconciling" }, { status: "settling", createdAt: { lt: cutoff } }] },
      take: 200,
    });
    let credited = 0;
    let failed = 0;
    let waiting = 0;
    for (const r of rows) {
      const outcome = await this.reconcilePayment(r.id);
      if (outcome === "credited") credited++;
      else if (outcome === "failed") failed++;
      else if (outcome === "waiting") waiting++;
    }
    return { credited, failed, waiting };
  }

  /** The settlement transaction of an uncredited payment, found by its authorization nonce. */
  private async findSettlementOnChain(p: {
    settlementTxHash: string | null;
    authorizationNonce: string;
    payerAddress: string;
    payToAddress: string;
    amountMicroUsdc: bigint;
    createdAt: Date;
  }): Promise<Hex | null> {
    const matches = (s: { authorizationNonce: string | null; from: string; to: string; valueMicroUsdc: bigint }) =>
      s.authorizationNonce === p.authorizationNonce &&
      s.from.toLowerCase() === p.payerAddress &&
      s.to.toLowerCase() === p.payToAddress &&
      s.valueMicroUsdc === p.amountMicroUsdc;
    if (p.settlementTxHash) {
      const inTx = await this.deps.chain.getUsdcSettlementsInTx(p.settlementTxHash as Hex);
      if (inTx.ok && inTx.value.some(matches)) return p.settlementTxHash as Hex;
    }
    const used = await this.deps.chain.getAuthorizationState(p.payerAddress as Hex, p.authorizationNonce as Hex);
    if (!used.ok || !used.value) return null;
    const head = await this.deps.chain.getBlockNumber();
    if (!head.ok) return null;
    // the authorization was used: find its transfer, scanning back from the head in windows
    const window = 5_000n;
    for (let to = head.value, scanned = 0n; to >= 0n && scanned < 200_000n; to -= window, scanned += window) {
      const from = to >= window ? to - window + 1n : 0n;
      const logs = await this.deps.chain.getUsdcSettlements({
        to: p.payToAddress as Hex,
        fromBlock: from,
        toBlock: to,
      });
      if (!logs.ok) return null;
      const hit = logs.value.find(matches);
      if (hit) return hit.txHash;
      if (from === 0n) break;
    }
    return null;
  }

  private async reverse(
    p: { id: string; accountId: string | null; amountMicroUsdc: bigint },
    reason: string,
  ): Promise<void> {
    if (!p.accountId) return;
    const accountId = p.accountId;
    await this.deps.db.$transaction(async (tx) => {
      const claimed = await tx.payment.updateMany({
        where: { id: p.id, status: "pending" },
        data: { status: "failed", failureReason: reason },
      });
      if (claimed.count !== 1) return;
      await reverseTopUp(tx, { accountId, paymentId: p.id, amountMicroUsdc: p.amountMicroUsdc });
    });
    logger.warn({ paymentId: p.id, reason }, "pending credit reversed");
  }
}
