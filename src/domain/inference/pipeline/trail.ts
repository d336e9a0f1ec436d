import type { Slice } from "../escrow/escrow.js";
import type { Attempt, AttemptRecord, PreCallBalance } from "./attempt.js";

/**
 * What happened to a request while it was attempted, in order: the keys tried, each attempt
 * admitted and each ended (its record), the slices it took into or drew on, the pre-call balance the
 * upstream reported on an attempt, and when the first byte went out. Appended by the attempt phase
 * alone (the first attempt's admission, the loop's fall-forwards, a call's scope) and read by the
 * end. Nothing in it is taken back or set to null: the attempt in flight is the last one admitted
 * that has no record yet.
 */
export class Trail {
  readonly #tried: string[] = [];
  readonly #admitted: Attempt[] = [];
  readonly #records: AttemptRecord[] = [];
  readonly #recorded = new Set<number>();
  readonly #touched = new Set<Slice>();
  readonly #preCall = new Map<number, PreCallBalance>();
  #ordinals = 0;
  #firstByteAt: Date | null = null;
  #upstreamMs: number | undefined;

  /** the supplier keys admitted so far, in order (distinct: fall-forward never tries a key twice) */
  get tried(): readonly string[] {
    return this.#tried;
  }

  /** the ended attempts' records, in the order they ended */
  get records(): readonly AttemptRecord[] {
    return this.#records;
  }

  /** the slices the request took into or drew on: each is looked at for a give-back when it ends */
  get touched(): ReadonlySet<Slice> {
    return this.#touched;
  }

  get firstByteAt(): Date | null {
    return this.#firstByteAt;
  }

  /** from admission's end to the first content (fall-forwards included), ms; undefined before it */
  get upstreamMs(): number | undefined {
    return this.#upstreamMs;
  }

  /** The next attempt's ordinal (a busy key's release counts). */
  nextOrdinal(): number {
    return ++this.#ordinals;
  }

  touch(slice: Slice): void {
    this.#touched.add(slice);
  }

  /** An attempt was admitted on its key. */
  admitted(attempt: Attempt): void {
    this.#tried.push(attempt.upstreamKeyId);
    this.#admitted.push(attempt);
  }

  /** An attempt ended (or a busy key was passed over): its record, once per ordinal. */
  ended(record: AttemptRecord): void {
    if (this.#recorded.has(record.ordinal)) throw new Error(`attempt ${record.ordinal} is recorded already`);
    this.#recorded.add(record.ordinal);
    this.#records.push(record);
  }

  /** The attempt in flight: the last admitted, while it has no record. */
  inFlight(): Attempt | null {
    const last = this.#admitted[this.#admitted.length - 1];
    return last && !this.#recorded.has(last.ordinal) ? last : null;
  }

  /** The upstream answered attempt `ordinal`; its pre-call balance as known then. */
  notePreCall(ordinal: number, balance: PreCallBalance): void {
    this.#preCall.set(ordinal, balance);
  }

  preCall(ordinal: number): PreCallBalance | undefined {
    return this.#preCall.get(ordinal);
  }

  /** The first byte reached the buyer, `upstreamMs` after admission ended (first call wins). */
  firstByte(at: Date, upstreamMs: number): void {
    if (this.#firstByteAt !== null) return;
    this.#firstByteAt = at;
    this.#upstreamMs = upstreamMs;
  }
}
