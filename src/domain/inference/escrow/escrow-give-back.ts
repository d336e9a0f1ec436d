import { logger } from "../../../lib/logger.js";
import type { EscrowStore } from "../settlement/stores.js";
import type { Holder, Slice } from "./escrow.js";
import type { HolderLease } from "./holder-lease.js";

/**
 * What a router process gives back of its escrow slices outside a request's ending
 * (docs/decisions.md "Escrow"): idle slices once they lingered long enough (`returnIdle`, on a timer),
 * and the idle part of a buyer's slice when another process was refused for want of it
 * (`yieldBuyer`, escrow pressure). Either way the amount leaves the slice first, so nothing here
 * admits against it meanwhile, and is held again if the give-back does not commit. Once it has
 * committed, `onReturned` names the buyers whose slices went back (their dashboards read again).
 */
export class EscrowGiveBack {
  private timer: NodeJS.Timeout | null = null;
  private returning: Promise<number> | null = null;

  constructor(
    private readonly escrow: EscrowStore,
    private readonly lease: HolderLease,
    /** how long an idle slice stays with this process (0: an ending gives it back at once) */
    readonly lingerMs: number,
    private readonly nowMs: () => number = () => performance.now(),
    /** a give-back committed: the buyers (account ids) whose slices it returned */
    private readonly onReturned?: (accountIds: string[]) => void,
  ) {}

  /** Whether an ending keeps an idle slice (see `Slice.giveBack`). */
  get lingering(): boolean {
    return this.lingerMs > 0;
  }

  /** Starts returning lingered slices: checked four times per linger period (at least every 25 ms). */
  start(): void {
    if (!this.lingering || this.timer) return;
    this.timer = setInterval(() => void this.returnIdle(), Math.max(25, Math.floor(this.lingerMs / 4)));
    this.timer.unref();
  }

  /** Stops the timer (a clean shutdown then gives every slice back through the lease). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * Gives back, in one transaction (`svc_escrow_give_back`), every slice of this process that no
   * request has used for `lingerMs`. One pass at a time. Returns how many slices went back.
   */
  returnIdle(): Promise<number> {
    this.returning ??= this.returnIdleNow().finally(() => {
      this.returning = null;
    });
    return this.returning;
  }

  private async returnIdleNow(): Promise<number> {
    const holder = this.lease.peek();
    if (!holder) return 0;
    const now = this.nowMs();
    const out: Array<{ slice: Slice; back: bigint }> = [];
    for (const map of [holder.buyers, holder.offers]) {
      for (const slice of map.values()) {
        const back = slice.takeIdle(now, this.lingerMs);
        if (back > 0n) out.push({ slice, back });
      }
    }
    await this.giveBack(holder, out, "idle escrow give-back did not commit; held until the next pass");
    return out.length;
  }

  /**
   * Escrow pressure: another process was refused for want of this buyer's balance. The part of this
   * process's slice no request in flight uses goes back at once.
   */
  async yieldBuyer(accountId: string): Promise<void> {
    const holder = this.lease.peek();
    const slice = holder?.buyers.get(accountId);
    if (!holder || !slice || slice.taking) return;
    const back = slice.free;
    if (back <= 0n) return;
    slice.spend(back);
    await this.giveBack(holder, [{ slice, back }], "escrow give-back under pressure did not commit");
  }

  /**
   * Returns what left the slices (`out`, already deducted from them) in one transaction
   * (`svc_escrow_give_back`); if it does not commit, the slices hold it again. Either way a slice
   * left holding nothing is forgotten.
   */
  private async giveBack(holder: Holder, out: Array<{ slice: Slice; back: bigint }>, failure: string): Promise<void> {
    if (out.length === 0) return;
    let committed = false;
    try {
      await this.escrow.giveBack(
        holder.id,
        out.map(({ slice, back }) => ({ kind: slice.kind, id: slice.id, amount: back })),
      );
      committed = true;
    } catch (err) {
      for (const { slice, back } of out) slice.restore(back);
      logger.warn({ err, slices: out.length }, failure);
    }
    for (const { slice } of out) holder.tidy(slice);
    const buyers = committed ? out.filter(({ slice }) => slice.kind === "buyer").map(({ slice }) => slice.id) : [];
    if (buyers.length > 0) this.onReturned?.(buyers);
  }
}
