import type { Address, Hex } from "viem";
import type { UptoChainReads } from "../../adapters/chain/upto-reads.js";
import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import { paymentOf, type RequestPaymentRow, type RequestPaymentStore } from "./payment-store.js";
import type { PaymentSettler } from "./settle.js";

/** Payments one scan reconciles, oldest first. */
export const SCAN_BATCH = 100;
/** A charged or settling payment is the request's own business this long; after it, the reconciler's. */
const QUIET_MS = 60_000;
/** An open payment past its deadline by this much belongs to a request that never ended (a crash). */
const OPEN_GRACE_MS = 3_600_000;
/** The chain is searched this far back (in windows) for a settlement whose transaction is not known. */
const SCAN_WINDOW_BLOCKS = 5_000n;
const SCAN_DEPTH_BLOCKS = 200_000n;

export type ReconcileOutcome = "settled" | "lost" | "void" | "done" | "waiting";

/**
 * The chain side of pay-per-request payments (docs/decisions.md "Pay per request"):
 * a payment whose charge is booked and whose cash side is not — a settle whose outcome was unknown,
 * one never sent (a crash after the ending), one sent and not recorded — is settled from what the
 * chain says of its Permit2 nonce: spent → the settlement that spent it is found and booked (never a
 * second payment); unspent before the deadline → the settle is sent (again: a nonce is spent once,
 * so at most one settle moves money); unspent at a deep block past the deadline → booked as a loss.
 */
export class RequestPaymentReconciler {
  constructor(
    private readonly deps: {
      store: RequestPaymentStore;
      settler: PaymentSettler;
      reads: UptoChainReads;
      chain: Pick<ChainGateway, "getBlockNumber">;
      clock: Clock;
      /** CONFIRMATION_BLOCKS: a deep block's "unused" is final */
      confirmationBlocks: number;
    },
  ) {}

  /** One payment (queued by its settle, or found by the scan). */
  async reconcile(id: string): Promise<ReconcileOutcome> {
    const row = await this.deps.store.byId(id);
    if (!row) return "done";
    const now = this.deps.clock.now().getTime();
    switch (row.status) {
      case "settled":
      case "lost":
      case "void":
        return "done";
      case "open":
        if (now < row.deadline.getTime() + OPEN_GRACE_MS) return "waiting";
        return (await this.deps.store.voidIfOpen(row.id)) ? "void" : "done";
      case "charged":
        return now < row.deadline.getTime() ? this.settle(row) : this.fromChain(row);
      case "settling":
      case "reconciling":
        return this.fromChain(row);
    }
  }

  /** The scan: every payment left unsettled, oldest first. */
  async reconcileOutstanding(o: { batch?: number } = {}): Promise<Record<ReconcileOutcome, number>> {
    const now = this.deps.clock.now().getTime();
    const rows = await this.deps.store.outstanding({
      olderThan: new Date(now - QUIET_MS),
      openBefore: new Date(now - OPEN_GRACE_MS),
      take: o.batch ?? SCAN_BATCH,
    });
    const counts: Record<ReconcileOutcome, number> = { settled: 0, lost: 0, void: 0, done: 0, waiting: 0 };
    for (const r of rows) {
      try {
        counts[await this.reconcile(r.id)]++;
      } catch (e) {
        logger.warn({ err: e, paymentId: r.id }, "pay-per-request reconciliation failed; the next scan retries");
        counts.waiting++;
      }
    }
    return counts;
  }

  /** What the chain says of the payment's nonce decides. */
  private async fromChain(row: RequestPaymentRow): Promise<ReconcileOutcome> {
    const { reads, store, confirmationBlocks, clock } = this.deps;
    const payer = row.payerAddress as Address;
    const nonce = BigInt(row.permit2Nonce);
    const used = await reads.isPermit2NonceUsed(payer, nonce);
    if (!used.ok) return "waiting";
    if (used.value) return this.fromSettlement(row);
    if (clock.now().getTime() < row.deadline.getTime()) return this.settle(row);
    // past the deadline, unused: final once a block deep enough, at or past the deadline, shows it
    const deep = await reads.getPermit2NonceStateAt(payer, nonce, confirmationBlocks);
    if (deep.ok && !deep.value.used && deep.value.blockTime.getTime() >= row.deadline.getTime()) {
      return (await store.lost(row.id, "authorization expired unsettled")) ? "lost" : "done";
    }
    return "waiting";
  }

  /** Sends the settle of the booked charge (again); a refusal is checked against the chain first. */
  private async settle(row: RequestPaymentRow): Promise<ReconcileOutcome> {
    const charge = row.chargeMicroUsdc ?? 0n;
    const o = await this.deps.settler.settle(paymentOf(row), charge, { final: false });
    if (o.kind === "settled") return "settled";
    if (o.kind === "reconciling") return "waiting";
    // refused: an earlier settle may have landed (the nonce is then spent); else nothing can move
    const used = await this.deps.reads.isPermit2NonceUsed(row.payerAddress as Address, BigInt(row.permit2Nonce));
    if (!used.ok) return "waiting";
    if (used.value) return this.fromSettlement(row);
    return (await this.deps.store.lost(row.id, `settle refused: ${o.reason}`)) ? "lost" : "done";
  }

  /** The nonce is spent: find the settlement that spent it, and book what it moved. */
  private async fromSettlement(row: RequestPaymentRow): Promise<ReconcileOutcome> {
    const found = await this.findSettlement(row);
    if (!found) {
      // spent and no settlement found (the owner invalidated it, or it went through a contract
      // wallet the proxy call cannot be read from): a human looks
      logger.warn({ paymentId: row.id }, "pay-per-request nonce spent, settlement not found yet");
      return "waiting";
    }
    return (await this.deps.store.settled(row.id, found.moved, found.txHash)) ? "settled" : "done";
  }

  private async findSettlement(row: RequestPaymentRow): Promise<{ txHash: Hex; moved: bigint } | undefined> {
    const { reads, chain } = this.deps;
    const payer = row.payerAddress as Address;
    const payTo = row.payToAddress as Address;
    const nonce = BigInt(row.permit2Nonce);
    const ours = (s: { status: string; call: { owner: Address; nonce: bigint } | null }) =>
      s.status === "success" && s.call !== null && s.call.nonce === nonce && s.call.owner.toLowerCase() === payer;
    if (row.settlementTxHash) {
      const s = await reads.getUptoSettlementInTx(row.settlementTxHash as Hex, payer, payTo);
      if (s.ok && ours(s.value)) return { txHash: s.value.txHash, moved: s.value.movedMicroUsdc };
    }
    const head = await chain.getBlockNumber();
    if (!head.ok) return undefined;
    for (
      let to = head.value, scanned = 0n;
      to >= 0n && scanned < SCAN_DEPTH_BLOCKS;
      to -= SCAN_WINDOW_BLOCKS, scanned += SCAN_WINDOW_BLOCKS
    ) {
      const from = to >= SCAN_WINDOW_BLOCKS ? to - SCAN_WINDOW_BLOCKS + 1n : 0n;
      const found = await reads.findUptoSettlements({ from: payer, to: payTo, fromBlock: from, toBlock: to });
      if (!found.ok) return undefined;
      const hit = found.value.find(ours);
      if (hit) return { txHash: hit.txHash, moved: hit.movedMicroUsdc };
      if (from === 0n) break;
    }
    return undefined;
  }
}
