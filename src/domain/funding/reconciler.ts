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

/** Uncredited payments one chain scan reconciles, oldest first (the next scan takes the rest). */
export const SCAN_BATCH = 200;
/** The chain scan looks this far back (in windows) for an authorization's transfer or cancellation. */
const SCAN_WINDOW_BLOCKS = 5_000n;
const SCAN_DEPTH_BLOCKS = 200_000n;

export interface ReconcilerDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  chain: ChainGateway;
  apiKeys: Pick<ApiKeyService, "createKeyInTx">;
  /** CONFIRMATION_BLOCKS: depth before pending credit is confirmed, and before the chain's "no" counts */
  confirmationBlocks: number;
  /** `credit.confirmed` is written to the outbox in the confirmation's transaction */
  webhooks?: Pick<WebhookOutbox, "emit" | "dispatch">;
}

/**
 * What the chain says became of a payment's authorization:
 * - `settled`: its transfer payer → payTo of the amount is in `txHash`;
 * - `canceled`: the payer canceled it (`AuthorizationCanceled`), at least CONFIRMATION_BLOCKS deep;
 * - `expired`: unused at a block CONFIRMATION_BLOCKS deep whose time is at or past `validBefore`,
 *   so no later block can carry it (the token refuses it from `validBefore` on);
 * - `open`: anything else — still usable, used but its transfer not found yet, or the chain did
 *   not answer. Nothing is concluded from `open`.
 */
type AuthorizationFate =
  | { kind: "settled"; txHash: Hex }
  | { kind: "canceled"; txHash: Hex }
  | { kind: "expired" }
  | { kind: "open" };

interface PaymentOnChain {
  id: string;
  settlementTxHash: string | null;
  authorizationNonce: string;
  payerAddress: string;
  payToAddress: string;
  amountMicroUsdc: bigint;
  validBefore: Date | null;
}

/**
 * The chain side of funding (workers): pending credit confirmed once its transfer is deep enough,
 * reversed when the chain says its authorization can never move money, and payments a crash left
 * uncredited found on chain and credited through `recordSettlement` — never twice.
 */
export class PaymentReconciler {
  constructor(private readonly deps: ReconcilerDeps) {}

  /**
   * Confirmations (worker): every `pending` payment whose transfer is `CONFIRMATION_BLOCKS` deep
   * in the canonical chain becomes confirmed and spendable. A settlement the chain does not show is
   * reversed only when its authorization is canceled or expired unused (`settlementMissing`).
   * Idempotent.
   */
  async confirmPending(): Promise<{ confirmed: number; reversed: number; waiting: number }> {
    const pending = await this.deps.db.payment.findMany({
      where: { status: "pending" },
      orderBy: [{ settledAt: "asc" }, { id: "asc" }],
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
        // "not found" proves nothing by itself (a node that lags behind says it too): the
        // authorization's state decides
        if (c.failure.kind === "not_found" && (await this.settlementMissing(p)) === "reversed") reversed++;
        else waiting++;
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
      const match = moved.value.find((s) => carries(p, s));
      if (!match) {
        if ((await this.settlementMissing(p)) === "reversed") reversed++;
        else waiting++;
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
        // the buyer's webhooks hear of it, in this transaction (never lost, never early)
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
   * its settlement; marks it failed when the chain shows its authorization can never move money
   * (canceled, or expired unused). Never credits twice, never fails a payment the chain may still
   * carry.
   */
  async reconcilePayment(paymentId: string): Promise<"credited" | "already" | "failed" | "waiting"> {
    const p = await this.deps.db.payment.findUnique({ where: { id: paymentId } });
    if (!p || p.status === "failed") return "failed";
    if (p.status === "pending" || p.status === "confirmed") return "already";
    const fate = await this.authorizationFate(p);
    switch (fate.kind) {
      case "settled":
        await recordSettlement(this.deps, p.id, fate.txHash, { mintKey: false });
        return "credited";
      case "canceled":
      case "expired": {
        const failureReason =
          fate.kind === "canceled"
            ? `authorization canceled on chain (${fate.txHash})`
            : "authorization expired without settlement";
        await this.deps.db.payment.updateMany({
          where: { id: p.id, status: { in: ["settling", "reconciling"] } },
          data: { status: "failed", failureReason },
        });
        return "failed";
      }
      case "open":
        return "waiting";
    }
  }

  /**
   * Chain scan (worker): uncredited payments (`settling` older than a minute, or `reconciling`),
   * oldest first, `batch` of them (default SCAN_BATCH), each reconciled from the chain. Covers
   * crashes between settle and write.
   */
  async reconcileOutstanding(
    o: { batch?: number } = {},
  ): Promise<{ credited: number; failed: number; waiting: number }> {
    const cutoff = new Date(this.deps.clock.now().getTime() - 60_000);
    const rows = await this.deps.db.payment.findMany({
      where: { OR: [{ status: "reconciling" }, { status: "settling", createdAt: { lt: cutoff } }] },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      take: o.batch ?? SCAN_BATCH,
      select: { id: true },
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

  /**
   * A pending credit whose recorded settlement the chain does not show (not found, reverted, or
   * without the authorized transfer). Reversed only when the chain says its authorization can never
   * move money (canceled, or unused past `validBefore`); moved to the transaction that carries it
   * when the transfer was re-included elsewhere; otherwise left waiting.
   */
  private async settlementMissing(p: PaymentOnChain & { accountId: string | null }): Promise<"reversed" | "waiting"> {
    const fate = await this.authorizationFate(p);
    if (fate.kind === "canceled" || fate.kind === "expired") {
      await this.reverse(
        p,
        fate.kind === "canceled"
          ? `authorization canceled on chain (${fate.txHash})`
          : "settlement is not in the chain and the authorization expired unused",
      );
      return "reversed";
    }
    if (fate.kind === "settled" && fate.txHash !== p.settlementTxHash) {
      // the same transfer in another transaction (re-included after a reorg): follow it
      await this.deps.db.payment.updateMany({
        where: { id: p.id, status: "pending" },
        data: { settlementTxHash: fate.txHash, confirmations: 0, blockNumber: null },
      });
      logger.warn({ paymentId: p.id, transaction: fate.txHash }, "pending settlement moved to another transaction");
    }
    return "waiting";
  }

  /** What the chain says became of a payment's authorization (`AuthorizationFate`). */
  private async authorizationFate(p: PaymentOnChain): Promise<AuthorizationFate> {
    const { chain, confirmationBlocks } = this.deps;
    const payer = p.payerAddress as Hex;
    const nonce = p.authorizationNonce as Hex;
    if (p.settlementTxHash) {
      const inTx = await chain.getUsdcSettlementsInTx(p.settlementTxHash as Hex);
      if (inTx.ok && inTx.value.some((s) => carries(p, s)))
        return { kind: "settled", txHash: p.settlementTxHash as Hex };
    }
    const used = await chain.getAuthorizationState(payer, nonce);
    if (!used.ok) return { kind: "open" };
    if (!used.value) {
      // unused: it can never be used once it is unused at a deep block at or past validBefore (a
      // node that lags behind answers from an older block, which proves nothing)
      if (!p.validBefore) return { kind: "open" };
      const deep = await chain.getAuthorizationStateAt(payer, nonce, confirmationBlocks);
      const expired = deep.ok && !deep.value.used && deep.value.blockTime.getTime() >= p.validBefore.getTime();
      return expired ? { kind: "expired" } : { kind: "open" };
    }
    // used or canceled: find which, scanning back from the head in windows, in chain order
    const head = await chain.getBlockNumber();
    if (!head.ok) return { kind: "open" };
    for (
      let to = head.value, scanned = 0n;
      to >= 0n && scanned < SCAN_DEPTH_BLOCKS;
      to -= SCAN_WINDOW_BLOCKS, scanned += SCAN_WINDOW_BLOCKS
    ) {
      const from = to >= SCAN_WINDOW_BLOCKS ? to - SCAN_WINDOW_BLOCKS + 1n : 0n;
      const [moved, canceled] = await Promise.all([
        chain.getUsdcSettlements({ to: p.payToAddress as Hex, fromBlock: from, toBlock: to }),
        chain.getAuthorizationCancellations({ authorizer: payer, nonce, fromBlock: from, toBlock: to }),
      ]);
      if (!moved.ok || !canceled.ok) return { kind: "open" };
      const hit = moved.value.find((s) => carries(p, s));
      if (hit) return { kind: "settled", txHash: hit.txHash };
      const cancel = canceled.value[0];
      if (cancel) {
        // a cancellation counts once a reorg can no longer undo it
        const deep = cancel.blockNumber + BigInt(confirmationBlocks) <= head.value;
        return deep ? { kind: "canceled", txHash: cancel.txHash } : { kind: "open" };
      }
      if (from === 0n) break;
    }
    return { kind: "open" };
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

/** Does this settlement on chain carry the payment: its authorization, payer → payTo, the amount? */
function carries(
  p: PaymentOnChain,
  s: { authorizationNonce: string | null; authorizer: string | null; from: string; to: string; valueMicroUsdc: bigint },
): boolean {
  return (
    s.authorizationNonce === p.authorizationNonce &&
    (s.authorizer === null || s.authorizer.toLowerCase() === p.payerAddress) &&
    s.from.toLowerCase() === p.payerAddress &&
    s.to.toLowerCase() === p.payToAddress &&
    s.valueMicroUsdc === p.amountMicroUsdc
  );
}
