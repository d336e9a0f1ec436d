import { DomainError } from "../../../lib/errors.js";
import type { CeilingStore } from "../settlement/stores.js";

/** Accounts whose ceiling this process remembers before it starts over (a bound, not a tuning). */
const MAX_REMEMBERED = 100_000;

/**
 * Each buyer's ceiling as this process last saw it. A request is planned with it without a
 * database read; the escrow top-up verifies it (`stale_ceiling`), and a change anywhere is fanned
 * out through `routingChanged` so every process forgets it.
 */
export class Ceilings {
  private readonly known = new Map<string, number>();

  constructor(private readonly store: CeilingStore) {}

  async of(accountId: string): Promise<number> {
    const hit = this.known.get(accountId);
    if (hit !== undefined) return hit;
    const ceiling = await this.store.ceilingOf(accountId);
    if (ceiling === null) throw new DomainError("authentication_failed", "Account not found.");
    this.learn(accountId, ceiling);
    return ceiling;
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
