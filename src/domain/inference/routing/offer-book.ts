import type { Clock } from "../../../lib/clock.js";
import { logger } from "../../../lib/logger.js";
import type { OfferStore } from "../settlement/stores.js";
import type { BookEntry } from "./clearing.js";

/** The book is read again in the background once it is older than this. */
export const BOOK_MAX_AGE_MS = 1_000;

/**
 * The eligible offers, cheapest first (ties by age, then id: the clearing order), read with the
 * same eligibility rule as everything else (`svc_eligible`, `svc_routable`; `OfferStore.book`). Read again at once
 * after `invalidate()` (a supply change here or, through Redis, in another process), and in the
 * background once older than BOOK_MAX_AGE_MS. A price schedule's step makes it stale too: once the
 * clock reaches the earliest `priceChangesAt` of its entries the book is read again before it is
 * used, so no request clears at a price its offer no longer has. The book only proposes: every
 * slice of an offer is taken in Postgres with the eligibility, the effective price and the depth
 * checked under the offer's row lock.
 */
export class OfferBook {
  private entries: BookEntry[] = [];
  private version = 1;
  private loadedVersion = 0;
  private loadedAt = 0;
  /** the earliest instant an entry's effective price may change (epoch ms); null: none */
  private priceChangesAt: number | null = null;
  private loading: Promise<void> | null = null;

  constructor(
    private readonly offers: OfferStore,
    private readonly clock: Clock,
  ) {}

  invalidate(): void {
    this.version++;
  }

  /** The book, read again first when invalidated since the last read. */
  async current(): Promise<BookEntry[]> {
    if (this.priceChangesAt !== null && this.clock.now().getTime() >= this.priceChangesAt) this.invalidate();
    while (this.loadedVersion < this.version) await this.load();
    if (this.clock.now().getTime() - this.loadedAt > BOOK_MAX_AGE_MS && !this.loading) {
      this.load().catch((e) => logger.warn({ err: e }, "offer book refresh failed"));
    }
    return this.entries;
  }

  /** Reads the book now (before refusing a request for want of supply). */
  async fresh(): Promise<BookEntry[]> {
    this.invalidate();
    return this.current();
  }

  private load(): Promise<void> {
    if (this.loading) return this.loading;
    const version = this.version;
    this.loading = (async () => {
      try {
        const entries = await this.offers.book(this.clock.now());
        this.entries = entries;
        this.priceChangesAt = earliestPriceChange(entries);
        this.loadedVersion = version;
        this.loadedAt = this.clock.now().getTime();
      } finally {
        this.loading = null;
      }
    })();
    return this.loading;
  }
}

function earliestPriceChange(entries: readonly BookEntry[]): number | null {
  let earliest: number | null = null;
  for (const e of entries) {
    if (e.priceChangesAt !== null && (earliest === null || e.priceChangesAt < earliest)) earliest = e.priceChangesAt;
  }
  return earliest;
}
