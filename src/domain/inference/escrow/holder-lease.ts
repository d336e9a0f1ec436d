import type { Clock } from "../../../lib/clock.js";
import { logger } from "../../../lib/logger.js";
import type { EscrowStore } from "../settlement/stores.js";
import { Holder } from "./escrow.js";

/** A holder's lease; the heartbeat renews it. Slices of a holder whose lease expired go back. */
export const HOLDER_LEASE_MS = 60_000;
export const HOLDER_RENEW_MS = 15_000;
/** Expired escrow holders the sweeper releases per pass. */
const SWEEP_LIMIT = 500;

/**
 * Sweeper (worker): gives back the escrow slices of holders whose lease expired (their process
 * died). Requests in flight there leave no record and no charge. Idempotent.
 */
export async function releaseExpiredHolders(escrow: EscrowStore, now: Date): Promise<{ released: number }> {
  return { released: await escrow.releaseExpired(now, SWEEP_LIMIT) };
}

/**
 * The holder registration and its heartbeat. `current()` registers lazily (a process that never
 * routes holds nothing); a heartbeat that finds its row gone (the sweeper took it after a stall)
 * starts a new registration, and requests admitted against the old one fail their settlement
 * guards (nothing charged).
 */
export class HolderLease {
  private holder: Holder | null = null;
  private registering: Promise<Holder> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly escrow: EscrowStore,
    private readonly clock: Clock,
    private readonly newId: () => string,
  ) {}

  /** This process's holder id and how many slices it holds (tests, diagnostics). */
  snapshot(): { holder: string | null; buyers: number; offers: number } {
    const h = this.peek();
    return { holder: h?.id ?? null, buyers: h?.buyers.size ?? 0, offers: h?.offers.size ?? 0 };
  }

  /** The live registration, if any (no registration is made). */
  peek(): Holder | null {
    return this.holder && !this.holder.lost ? this.holder : null;
  }

  current(): Promise<Holder> | Holder {
    if (this.holder && !this.holder.lost) return this.holder;
    if (this.registering) return this.registering;
    this.registering = this.register().finally(() => {
      this.registering = null;
    });
    return this.registering;
  }

  /** Marks the registration lost (the database no longer knows it); the next `current()` registers anew. */
  lose(h: Holder): void {
    if (h.lost) return;
    h.lost = true;
    logger.warn({ holder: h.id }, "escrow holder lease lost; registering again");
  }

  private async register(): Promise<Holder> {
    if (this.closed) throw new Error("router closed");
    const h = new Holder(this.newId());
    await this.escrow.enrol(h.id, this.expiry());
    this.holder = h;
    if (!this.timer) {
      this.timer = setInterval(() => void this.heartbeat(), HOLDER_RENEW_MS);
      this.timer.unref();
    }
    return h;
  }

  private expiry(): Date {
    return new Date(this.clock.now().getTime() + HOLDER_LEASE_MS);
  }

  async heartbeat(): Promise<void> {
    const h = this.holder;
    if (!h || h.lost) return;
    try {
      if (!(await this.escrow.renew(h.id, this.expiry()))) this.lose(h);
    } catch (e) {
      logger.warn({ err: e, holder: h.id }, "escrow heartbeat failed");
    }
  }

  /** Stops the heartbeat and gives every slice back (a clean shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const h = this.holder;
    this.holder = null;
    if (!h || h.lost) return;
    h.lost = true;
    await this.escrow
      .release(h.id, this.clock.now())
      .catch((e) => logger.warn({ err: e }, "could not give escrow back at close; the sweeper will"));
  }
}
