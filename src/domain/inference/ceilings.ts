import type { Sql } from "../../adapters/sql.js";
import { DomainError } from "../../lib/errors.js";

/** Accounts whose ceiling this process remembers before it starts over (a bound, not a tuning). */
const MAX_REMEMBERED = 100_000;

/**
 * Each buyer's ceiling as this process last saw it. A request is planned with it without a
 * database read; the escrow top-up verifies it (`stale_ceiling`), and a change anywhere is fanned
 * out through `routingChanged` so every process forgets it.
 */
export class Ceilings {
  private readonly known = new Map<string, number>();

  constructor(private readonly sql: Sql) {}

  async of(accountId: string): Promise<number> {
    const hit = this.known.get(accountId);
    if (hit !== undefined) return hit;
    const rows = await this.sql.query<{ ceiling: number }>(
      "SELECT max_price_cents_per_dollar AS ceiling FROM accounts WHERE id = $1",
      [accountId],
    );
    const row = rows.rows[0];
    if (!row) throw new DomainError("authentication_failed", "Account not found.");
    this.learn(accountId, Number(row.ceiling));
    return Number(row.ceiling);
  }

  /** What a top-up just read from the account row. */
  learn(accountId: string, ceilingCents: number): void {
    if (this.known.size >= MAX_REMEMBERED) this.known.clear();
    this.known.set(accountId, ceilingCents);
  }

  forget(accountId: string): void {
    this.known.delete(accountId);
  }
}
