import type { RedisKeys } from "../../../adapters/redis/keys.js";
import type { Clock } from "../../../lib/clock.js";
import { logger } from "../../../lib/logger.js";
import { MAX_OFFER_PRICE_CENTS } from "../../../lib/money.js";
import type { SecretBox } from "../../../lib/secret-box.js";
import type { AttemptFailure } from "../pipeline/failure.js";
import type { Attempt } from "../pipeline/session.js";
import type { InFlightGates, KeyMarks } from "../settlement/stores.js";
import { type BookEntry, routable } from "./clearing.js";
import type { OfferBook } from "./offer-book.js";

/** In-flight completions per supplier key (a supplier key is one upstream account's rate limits). */
export const SUPPLIER_KEY_MAX_IN_FLIGHT = 16;
/** How long a request waits for a busy supplier key before 503 key_wait_timeout. */
export const KEY_WAIT_MS = 5_000;
/** How often a request waiting for a busy key looks again. */
export const KEY_POLL_MS = 25;
/** A key that answered "out of capacity" (upstream 402) is not routed for this long. */
export const EXHAUSTED_COOLDOWN_MS = 60_000;
/**
 * A key whose unclear refusal (an undocumented 401/403) was confirmed is not asked again for this
 * long: a buyer repeating such a request cannot make the service hammer the key's rate-limits read.
 */
export const CONFIRM_INTERVAL_MS = 60_000;
/** Decrypted supplier secrets are kept in memory this long. */
const KEY_CACHE_MS = 60_000;
/** Gate names remembered (one per supplier key seen; forgotten all at once past this many). */
const GATE_NAMES_MAX = 100_000;

/** A supplier key lent outside an attempt (see `SupplierKeys.borrowKey`); `release` gives its slot back. */
export interface BorrowedKey {
  upstreamKeyId: string;
  priceCentsPerDollar: number;
  secret: string;
  release(): void;
}

export interface SupplierKeyDeps {
  clock: Clock;
  gates: InFlightGates;
  keys: Pick<RedisKeys, "upstreamKeyInFlight">;
  secrets: SecretBox;
  /** the one key-marking path (cooldown, auth failure), shared with the supply service */
  keyHealth: KeyMarks;
  book: OfferBook;
  /** after an upstream 402: refresh the key's balance (best effort, async) */
  onKeyExhausted?: (upstreamKeyId: string) => Promise<void>;
  /**
   * after an unclear 401/403: read the key's rate limits with it, which marks it auth_failed when the
   * upstream refuses the key there (the balance sync's rule); awaited before the next attempt
   */
  confirmKey?: (upstreamKeyId: string) => Promise<void>;
  /** a call that waited for a busy supplier key (seconds) */
  onKeyWait?: (seconds: number) => void;
}

/**
 * The supplier keys as the pipeline uses them: each key's in-flight gate (at most
 * SUPPLIER_KEY_MAX_IN_FLIGHT calls across every process), its decrypted secret (cached), THE
 * key-health path of a failed call (`mark`), and keys lent outside an attempt (`borrowKey`).
 */
export class SupplierKeys {
  private readonly secrets = new Map<string, { secret: string; at: number }>();
  /** supplier key id → its gate's name (see `gate`) */
  private readonly gateNames = new Map<string, string>();
  /** supplier key id → when its last confirmation began (ms), or the confirmation in flight */
  private readonly confirmations = new Map<string, number | Promise<void>>();
  /** attempts holding their key's slot (each gives it back once, `free`) */
  private readonly holding = new WeakSet<Attempt>();

  constructor(private readonly deps: SupplierKeyDeps) {}

  /** Whether the key is at its in-flight limit here (its slots in use and being acquired reach it). */
  busy(upstreamKeyId: string): boolean {
    return this.deps.gates.claimed(this.gate(upstreamKeyId)) >= SUPPLIER_KEY_MAX_IN_FLIGHT;
  }

  /** Takes one of the key's in-flight slots; false when it is at its limit across processes. */
  acquire(upstreamKeyId: string): Promise<boolean> {
    return this.deps.gates.acquire(this.gate(upstreamKeyId), SUPPLIER_KEY_MAX_IN_FLIGHT);
  }

  /** An attempt was admitted on the slot `acquire` took for its key. */
  held(attempt: Attempt): void {
    this.holding.add(attempt);
  }

  /** The attempt's slot of its supplier key's gate back (once). */
  free(attempt: Attempt): void {
    if (!this.holding.delete(attempt)) return;
    this.deps.gates.release(this.gate(attempt.upstreamKeyId));
  }

  /**
   * THE key-health path of a failed call on a supplier key (an attempt's or a borrowed key's):
   * 402 → cooldown and a balance refresh; the documented invalid-key answer → auth_failed; an
   * unclear 401/403 → the key confirmed (`confirm`); anything else (the request's or the upstream's
   * fault) leaves the key be (docs/decisions.md "Venice's answers: whose fault").
   */
  async mark(upstreamKeyId: string, failure: AttemptFailure | null, now = this.deps.clock.now()): Promise<void> {
    if (failure?.kind === "supplier_exhausted") {
      await this.markWith(upstreamKeyId, () =>
        this.deps.keyHealth.coolDown(upstreamKeyId, now.getTime() + EXHAUSTED_COOLDOWN_MS),
      );
      this.deps.onKeyExhausted?.(upstreamKeyId).catch(() => undefined);
    } else if (failure?.kind === "supplier_auth") {
      await this.markWith(upstreamKeyId, () => this.deps.keyHealth.markAuthFailed(upstreamKeyId));
      this.secrets.delete(upstreamKeyId);
    } else if (failure?.kind === "supplier_unclear") {
      await this.confirm(upstreamKeyId, now.getTime());
    }
  }

  /**
   * An unclear refusal neither punishes nor trusts the key: it is confirmed with a rate-limits read
   * (`confirmKey`), which a valid key passes and a revoked one fails (then it is marked there, before
   * the request's next attempt). One confirmation per key at a time, and none within
   * CONFIRM_INTERVAL_MS of the last.
   */
  private async confirm(upstreamKeyId: string, nowMs: number): Promise<void> {
    const confirmKey = this.deps.confirmKey;
    if (!confirmKey) return;
    const last = this.confirmations.get(upstreamKeyId);
    if (last instanceof Promise) return last;
    if (last !== undefined && nowMs - last < CONFIRM_INTERVAL_MS) return;
    if (this.confirmations.size >= GATE_NAMES_MAX) this.confirmations.clear();
    const running = this.markWith(upstreamKeyId, () => confirmKey(upstreamKeyId)).finally(() => {
      this.confirmations.set(upstreamKeyId, nowMs);
      this.secrets.delete(upstreamKeyId);
    });
    this.confirmations.set(upstreamKeyId, running);
    return running;
  }

  /** A key mark never fails the request; the book is read again before the next attempt either way. */
  private async markWith(upstreamKeyId: string, how: () => Promise<unknown>): Promise<void> {
    try {
      await how();
    } catch (e) {
      logger.error({ err: e, upstreamKeyId }, "could not mark a supplier key");
    }
    this.deps.book.invalidate();
  }

  /**
   * A supplier key lent for a call that is not an attempt (a video quote): the first routable
   * entry of the book in clearing order at or below `ceilingCents` — or, when none is, at any
   * price — on a key not in `exclude` whose in-flight gate has a free slot (held until `release`).
   * "busy" when such keys exist but every one is at its limit — at once, or with `waitForKey` only
   * once they stayed so for KEY_WAIT_MS (the wait of an attempt, `Attempts.next`); "none" when no
   * key is routable (on a book read afresh).
   */
  async borrowKey(
    ceilingCents: number,
    exclude: readonly string[],
    waitForKey = false,
  ): Promise<BorrowedKey | "busy" | "none"> {
    const { clock, book } = this.deps;
    const deadline = clock.now().getTime() + KEY_WAIT_MS;
    let waitedSince: number | null = null;
    let freshBook = false;
    for (;;) {
      const got = await this.lendKey(await book.current(), ceilingCents, exclude);
      if (got === "none" && !freshBook) {
        // never refuse on a stale book: read it again first
        await book.fresh();
        freshBook = true;
        continue;
      }
      if (got !== "busy" || !waitForKey || clock.now().getTime() > deadline) {
        if (waitedSince !== null && typeof got === "object") {
          this.deps.onKeyWait?.((performance.now() - waitedSince) / 1000);
        }
        return got;
      }
      waitedSince ??= performance.now();
      await new Promise((res) => setTimeout(res, KEY_POLL_MS));
    }
  }

  /** One look for a key to lend (see `borrowKey`). */
  private async lendKey(
    book: BookEntry[],
    ceilingCents: number,
    exclude: readonly string[],
  ): Promise<BorrowedKey | "busy" | "none"> {
    const nowMs = this.deps.clock.now().getTime();
    const entries = book.filter((e) => !exclude.includes(e.upstreamKeyId));
    const atCeiling = entries.filter((e) => routable(e, ceilingCents, nowMs));
    const candidates =
      atCeiling.length > 0 ? atCeiling : entries.filter((e) => routable(e, MAX_OFFER_PRICE_CENTS, nowMs));
    if (candidates.length === 0) return "none";
    for (const entry of candidates) {
      const gate = this.gate(entry.upstreamKeyId);
      if (!(await this.deps.gates.acquire(gate, SUPPLIER_KEY_MAX_IN_FLIGHT))) continue;
      let released = false;
      return {
        upstreamKeyId: entry.upstreamKeyId,
        priceCentsPerDollar: entry.priceCentsPerDollar,
        secret: this.secretOf(entry),
        release: () => {
          if (released) return;
          released = true;
          this.deps.gates.release(gate);
        },
      };
    }
    return "busy";
  }

  /** The key's upstream secret, decrypted (kept KEY_CACHE_MS; a key marked auth_failed is forgotten). */
  secretOf(entry: BookEntry): string {
    const nowMs = this.deps.clock.now().getTime();
    const hit = this.secrets.get(entry.upstreamKeyId);
    if (hit && nowMs - hit.at < KEY_CACHE_MS) return hit.secret;
    const secret = this.deps.secrets.open(entry.sealed, entry.supplierAccountId);
    this.secrets.set(entry.upstreamKeyId, { secret, at: nowMs });
    return secret;
  }

  /**
   * The gate of a supplier key's in-flight completions. Named once per key: an admission asks for
   * it for every key it passes over, and a name built anew each time must be hashed anew by the
   * gates' map (with thousands of streams open that was most of admission's CPU).
   */
  private gate(upstreamKeyId: string): string {
    let gate = this.gateNames.get(upstreamKeyId);
    if (gate === undefined) {
      if (this.gateNames.size >= GATE_NAMES_MAX) this.gateNames.clear();
      gate = this.deps.keys.upstreamKeyInFlight(upstreamKeyId);
      this.gateNames.set(upstreamKeyId, gate);
    }
    return gate;
  }
}
