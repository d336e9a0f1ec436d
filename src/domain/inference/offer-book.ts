import type { Sql } from "../../adapters/sql.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import { type BookEntry, CLEARING_ORDER_SQL } from "./clearing.js";

/** The book is read again in the background once it is older than this. */
export const BOOK_MAX_AGE_MS = 1_000;

const BOOK_SQL = `
  SELECT o.id, o.upstream_key_id, o.account_id, o.price_cents_per_dollar AS price, o.expires_at,
         svc_routable(o, k) AS routable, k.last_balance_micro_diem AS key_balance, k.cooldown_until,
         k.secret_ciphertext, k.secret_iv, k.secret_tag, k.encryption_key_id
    FROM offers o
    JOIN upstream_keys k ON k.id = o.upstream_key_id
   WHERE svc_eligible(o, k, $1)
   ORDER BY ${CLEARING_ORDER_SQL}`;

/**
 * The eligible offers, cheapest first (ties by age, then id: the clearing order), read with the
 * same eligibility rule as everything else (`svc_eligible`, `svc_routable`). Read again at once
 * after `invalidate()` (a supply change here or, through Redis, in another process), and in the
 * background once older than BOOK_MAX_AGE_MS. The book only proposes: every slice of an offer is
 * taken in Postgres with the eligibility and depth checked under the offer's row lock.
 */
export class OfferBook {
  private entries: BookEntry[] = [];
  private version = 1;
  private loadedVersion = 0;
  private loadedAt = 0;
  private loading: Promise<void> | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly clock: Clock,
  ) {}

  invalidate(): void {
    this.version++;
  }

  /** The book, read again first when invalidated since the last read. */
  async current(): Promise<BookEntry[]> {
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
        const r = await this.sql.query<{
          id: string;
          upstream_key_id: string;
          account_id: string;
          price: number;
          expires_at: Date;
          routable: string;
          key_balance: string | null;
          cooldown_until: Date | null;
          secret_ciphertext: Buffer;
          secret_iv: Buffer;
          secret_tag: Buffer;
          encryption_key_id: string;
        }>(BOOK_SQL, [this.clock.now()]);
        this.entries = r.rows.map((o) => ({
          offerId: o.id,
          upstreamKeyId: o.upstream_key_id,
          supplierAccountId: o.account_id,
          priceCentsPerDollar: Number(o.price),
          expiresAt: o.expires_at.getTime(),
          routableMicroDiem: BigInt(o.routable),
          keyBalanceMicroDiem: o.key_balance === null ? null : BigInt(o.key_balance),
          eligible: true,
          cooldownUntil: o.cooldown_until ? o.cooldown_until.getTime() : null,
          sealed: {
            ciphertext: new Uint8Array(o.secret_ciphertext),
            iv: new Uint8Array(o.secret_iv),
            tag: new Uint8Array(o.secret_tag),
            keyId: o.encryption_key_id,
          },
        }));
        this.loadedVersion = version;
        this.loadedAt = this.clock.now().getTime();
      } finally {
        this.loading = null;
      }
    })();
    return this.loading;
  }
}
