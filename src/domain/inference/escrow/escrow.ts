import { maxBig } from "../../../lib/money.js";

/**
 * Per-process escrow (docs/decisions.md "Router and inference", "Escrow"; the escrow section of the initial migration). A router process is
 * an escrow holder: it takes slices of buyers' balances and offers' DIEM in Postgres (counted in
 * their `reserved_*` columns, with the hold's guards) and admits requests against them in memory,
 * so a request whose slices suffice reaches the upstream without a database round trip.
 */

/** A top-up asks for this many times the largest need seen (so the next few requests need none)… */
export const TOPUP_UNITS = 8n;
/** …doubled for each top-up that follows the last within TOPUP_SPEED_MS (a busy slice), up to this… */
export const MAX_TOPUP_UNITS = 1024n;
export const TOPUP_SPEED_MS = 1_000;
/** …and back to TOPUP_UNITS after this long without one. */
export const TOPUP_RESET_MS = 10_000;

/**
 * One slice: what this process holds of one buyer's balance (micro-USDC) or of one offer's DIEM
 * (micro-DIEM), as far as it knows. `total` drops as soon as an ending that debits or returns part
 * of it is submitted, and grows only once a top-up has committed, so Postgres always holds at least
 * `total` (the settlement guards enforce it regardless). Its state changes only through the methods
 * below, each named for the event that moves it.
 */
export class Slice {
  #total = 0n;
  /** admitted maxima of the requests in flight against it */
  #used = 0n;
  /** the largest single need seen (sizes top-ups and what is kept while busy) */
  #unit = 0n;
  /** top-up size in units: grows while top-ups come fast, so a busy slice tops up rarely */
  #units = TOPUP_UNITS;
  #lastTakeAt = 0;
  /** when (a monotonic clock's ms) the last request using it ended, while nothing uses it */
  #idleSince: number | null = null;
  /** a top-up in flight: others needing more wait for it instead of taking again */
  taking: Promise<unknown> | null = null;

  constructor(
    readonly holder: string,
    readonly kind: "buyer" | "offer",
    /** the account id (buyer) or the offer id */
    readonly id: string,
  ) {}

  /** what this process holds of it */
  get total(): bigint {
    return this.#total;
  }

  /** what requests in flight have admitted against it */
  get used(): bigint {
    return this.#used;
  }

  get free(): bigint {
    return this.#total - this.#used;
  }

  /** A request's maximum is admitted against it (its free part covers `amount`). */
  admit(amount: bigint): void {
    if (amount > this.free)
      throw new RangeError(`slice ${this.kind}:${this.id} admits ${amount} with ${this.free} free`);
    this.#used += amount;
    this.#idleSince = null;
  }

  /** A request ended or moved on: its admitted maximum is no longer in use. */
  release(amount: bigint): void {
    this.#used -= amount;
  }

  /** A top-up committed: Postgres now holds `amount` more for this process. */
  grant(amount: bigint): void {
    this.#total += amount;
  }

  /** A charge leaves the slice with a settlement submitted now (`restore` if it does not commit). */
  spend(amount: bigint): void {
    this.#total -= amount;
  }

  /** An ending that did not commit: what it took out (`spend`, `giveBack`) is held again. */
  restore(amount: bigint): void {
    this.#total += amount;
  }

  /** How much to ask for when a request needing `need` finds too little free (`nowMs` from the clock). */
  want(need: bigint, nowMs: number): bigint {
    if (need > this.#unit) this.#unit = need;
    const since = nowMs - this.#lastTakeAt;
    if (since < TOPUP_SPEED_MS) this.#units = this.#units * 2n > MAX_TOPUP_UNITS ? MAX_TOPUP_UNITS : this.#units * 2n;
    else if (since > TOPUP_RESET_MS) this.#units = TOPUP_UNITS;
    this.#lastTakeAt = nowMs;
    return maxBig(need, this.#unit * this.#units, this.#used);
  }

  /**
   * What to give back now that a request using it ended. Once nothing in flight needs it: everything
   * (`lingering` false), or nothing yet (`lingering`: it stays with this process for the next request
   * and `takeIdle` gives it back once it stayed idle long enough). While busy: what is free beyond
   * twice the larger of its in-flight need and its current top-up size. Deducted from `total` at once.
   */
  giveBack(lingering = false, nowMs = 0): bigint {
    let back = 0n;
    if (this.#used === 0n) {
      if (lingering) {
        this.#idleSince = nowMs;
        return 0n;
      }
      back = this.#total;
    } else {
      const keep = maxBig(this.#used, this.#unit * this.#units);
      if (this.free > 2n * keep) back = this.free - keep;
    }
    if (back < 0n) back = 0n;
    this.#total -= back;
    return back;
  }

  /**
   * Everything it holds, if nothing has used it for `lingerMs` (and no top-up is under way);
   * deducted from `total` at once (`restore` if the give-back does not commit). A slice found idle
   * without a recorded end (a top-up whose request never admitted against it) starts its linger now.
   */
  takeIdle(nowMs: number, lingerMs: number): bigint {
    if (this.#used !== 0n || this.taking || this.#total <= 0n) return 0n;
    this.#idleSince ??= nowMs;
    if (nowMs - this.#idleSince < lingerMs) return 0n;
    const back = this.#total;
    this.#total = 0n;
    this.#idleSince = null;
    return back;
  }
}

/**
 * A request's maximum admitted on a slice (the buyer's maximum charge, an attempt's maximum burn):
 * admitted when made, released once, by whichever ending comes first. The hold, not the request,
 * remembers whether it was released, so no phase keeps a flag for it.
 */
export class Hold {
  #held = true;

  constructor(
    readonly slice: Slice,
    readonly amount: bigint,
  ) {
    slice.admit(amount);
  }

  /** Whether it still holds its amount on the slice. */
  get held(): boolean {
    return this.#held;
  }

  /** Its amount is no longer in use on the slice; false when it was released already. */
  release(): boolean {
    if (!this.#held) return false;
    this.#held = false;
    this.slice.release(this.amount);
    return true;
  }
}

/** One registration of this process as a holder (a new one after its lease was lost). */
export class Holder {
  readonly buyers = new Map<string, Slice>();
  readonly offers = new Map<string, Slice>();
  lost = false;

  constructor(readonly id: string) {}

  slice(kind: "buyer" | "offer", id: string): Slice {
    const map = kind === "buyer" ? this.buyers : this.offers;
    let s = map.get(id);
    if (!s) {
      s = new Slice(this.id, kind, id);
      map.set(id, s);
    }
    return s;
  }

  /** Forgets a slice that holds nothing and is not in use (maps stay as small as the live set). */
  tidy(s: Slice): void {
    if (s.total === 0n && s.used === 0n && !s.taking) {
      const map = s.kind === "buyer" ? this.buyers : this.offers;
      if (map.get(s.id) === s) map.delete(s.id);
    }
  }
}
