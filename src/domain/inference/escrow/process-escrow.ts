import { randomUUID } from "node:crypto";
import type { EventBus } from "../../../adapters/pubsub.js";
import type { EscrowUsageBoard } from "../../../adapters/redis/escrow-usage.js";
import type { Clock } from "../../../lib/clock.js";
import type { EscrowStore } from "../settlement/stores.js";
import { EscrowFold, FOLD_DELAY_MS, type SoldOut } from "./escrow-fold.js";
import { EscrowGiveBack } from "./escrow-give-back.js";
import { EscrowUsage } from "./escrow-usage.js";
import { HolderLease, releaseExpiredHolders } from "./holder-lease.js";

/**
 * This process as an escrow holder (docs/decisions.md "Escrow"): its lease (`HolderLease`), what it
 * gives back outside an ending (`EscrowGiveBack`: idle slices, escrow pressure), its fold of the
 * clears its endings appended (`EscrowFold`), and what its
 * requests in flight use of a buyer's slice (`EscrowUsage`); plus the sweeper of dead holders.
 * The pipeline admits against `lease`; the rest is the process's lifecycle and its operators' view.
 */
export class ProcessEscrow {
  readonly lease: HolderLease;
  private readonly giveBack: EscrowGiveBack;
  private readonly usage: EscrowUsage;
  private readonly folds: EscrowFold;

  constructor(
    private readonly deps: {
      escrow: EscrowStore;
      clock: Clock;
      bus: EventBus;
      /** how long an idle slice stays with this process (0: an ending gives it back at once) */
      lingerMs: number;
      /** where processes answer what their requests in flight use of a buyer's slice */
      board?: EscrowUsageBoard;
      /** the offers a fold sold out (marked depleted with their webhook) */
      soldOut?: SoldOut;
      /** how soon after an append the fold runs (FOLD_DELAY_MS) */
      foldDelayMs?: number;
    },
  ) {
    const { escrow, clock, bus } = deps;
    this.lease = new HolderLease(escrow, clock, randomUUID);
    this.folds = new EscrowFold(escrow, this.lease, deps.foldDelayMs ?? FOLD_DELAY_MS, deps.soldOut);
    // a slice given back outside an ending: its buyer's dashboard reads the balances again
    this.giveBack = new EscrowGiveBack(escrow, this.lease, deps.lingerMs, undefined, (ids) => {
      const at = clock.now().toISOString();
      for (const id of ids) bus.publish("balanceChanged", id, { accountId: id, kind: "escrow_returned", at });
    });
    this.usage = new EscrowUsage(escrow, this.lease, deps.board, (id, query) =>
      bus.publish("routingChanged", { kind: "escrow_usage", id, query }),
    );
  }

  /** Whether an ending keeps an idle slice (see `Slice.giveBack`). */
  get lingering(): boolean {
    return this.giveBack.lingering;
  }

  /** Starts the idle give-back timer (with the pipeline's listener, on the first request). */
  start(): void {
    this.giveBack.start();
  }

  /** Stops the timers, folds what is left and gives every slice back (a clean shutdown). */
  async close(): Promise<void> {
    this.giveBack.stop();
    await this.folds.close();
    await this.lease.close();
  }

  /** An ending appended a charge: this holder folds it soon, or now with no delay (`EscrowFold`). */
  appended(): Promise<void> | undefined {
    return this.folds.appended();
  }

  /** Folds this holder's appended clears now (tests, diagnostics; the fold's timer does it). */
  fold(): Promise<void> {
    return this.folds.run();
  }

  /** Another process was refused for want of this buyer's balance: its idle part here goes back. */
  yieldBuyer(accountId: string): Promise<void> {
    return this.giveBack.yieldBuyer(accountId);
  }

  /** Another process asks what requests in flight here use of a buyer's slice (see `EscrowUsage`). */
  answer(accountId: string, query: string): void {
    this.usage.answer(accountId, query);
  }

  /** What other processes' slices of the buyer's balance hold that no request in flight there uses. */
  idleElsewhere(accountId: string): Promise<bigint> {
    return this.usage.idleElsewhere(accountId);
  }

  /**
   * What requests in flight use of each of `holders`' slices of the buyer's balance (micro-USDC);
   * a holder that did not answer in time is absent (see `EscrowUsage`).
   */
  inUse(accountId: string, holders: readonly string[]): Promise<Map<string, bigint>> {
    return this.usage.inUse(accountId, holders);
  }

  /** Sweeper (worker): gives back the slices of holders whose lease expired (see `releaseExpiredHolders`). */
  releaseExpired(): Promise<{ released: number }> {
    return releaseExpiredHolders(this.deps.escrow, this.deps.clock.now());
  }

  /** Gives back the slices that lingered idle long enough now (the timer does it four times per linger period). */
  returnIdle(): Promise<number> {
    return this.giveBack.returnIdle();
  }

  /** This process's holder id and slices (tests, diagnostics). */
  snapshot(): { holder: string | null; buyers: number; offers: number } {
    return this.lease.snapshot();
  }

  /** Renews the holder's lease now (tests; the heartbeat does it every HOLDER_RENEW_MS). */
  heartbeat(): Promise<void> {
    return this.lease.heartbeat();
  }
}
