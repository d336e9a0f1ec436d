import { logger } from "../../../lib/logger.js";
import type { EscrowStore } from "../settlement/stores.js";
import type { HolderLease } from "./holder-lease.js";

/**
 * How soon after an append this process folds its clears into the hot rows (docs/decisions.md "One
 * append per clear"; `ESCROW_FOLD_MS`). The endings that commit meanwhile share the fold; readers
 * see live figures either way (svc_unfolded), so this only bounds how many clears are unfolded at
 * once. 0: each ending's clear is folded before its answer.
 */
export const FOLD_DELAY_MS = 100;

/** The offers a fold sold out, to be marked depleted with their webhook. */
export type SoldOut = (offers: { offerId: string; accountId: string }[]) => Promise<void>;

/**
 * This process's fold: once an ending appended a clear, `svc_fold_holder` applies the holder's
 * appended clears to the balances, offers, keys, payables and key spend within `delayMs`. One fold
 * at a time; a fold asked for while one runs runs once after it, for everyone who asked. A fold
 * that fails is tried again on the next append, and the sweeper folds a holder whose process died
 * (svc_release_expired).
 */
export class EscrowFold {
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #next: Promise<void> | null = null;
  #closed = false;

  constructor(
    private readonly escrow: EscrowStore,
    private readonly lease: HolderLease,
    private readonly delayMs: number = FOLD_DELAY_MS,
    private readonly soldOut?: SoldOut,
  ) {}

  /** An ending with a charge committed: fold soon, or now (no delay: resolves once it is folded). */
  appended(): Promise<void> | undefined {
    if (this.delayMs === 0) return this.run();
    if (this.#timer || this.#closed) return undefined;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.run();
    }, this.delayMs);
    this.#timer.unref();
    return undefined;
  }

  /** Folds now; resolves once every append of this holder committed before the call is folded. */
  run(): Promise<void> {
    if (!this.#running) return this.fold();
    this.#next ??= this.#running.then(() => {
      this.#next = null;
      return this.fold();
    });
    return this.#next;
  }

  private fold(): Promise<void> {
    const holder = this.lease.peek();
    if (!holder) return Promise.resolve();
    this.#running = (async () => {
      try {
        const sold = await this.escrow.fold(holder.id);
        if (sold.length > 0 && this.soldOut) await this.soldOut(sold);
      } catch (e) {
        logger.warn({ err: e, holder: holder.id }, "escrow fold failed; the next append or the sweeper folds again");
      } finally {
        this.#running = null;
      }
    })();
    return this.#running;
  }

  /** Stops the timer and folds what is left (a clean shutdown, before the slices go back). */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.run();
  }
}
