import type { GateLeases } from "../../adapters/redis/gate-leases.js";
import type { RedisKeys } from "../../adapters/redis/keys.js";
import { type QueryRunner, type Sql, sqlRunner } from "../../adapters/sql.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import { MAX_OFFER_PRICE_CENTS } from "../../lib/money.js";
import type { SecretBox } from "../../lib/secret-box.js";
import { MAX_PLANS } from "./admission.js";
import type { Ceilings } from "./ceilings.js";
import { type BookEntry, chooseOffer, MAX_ATTEMPTS, type OfferPick, routable } from "./clearing.js";
import {
  escrowNotSecured,
  fallForwardExhausted,
  insufficientBalance,
  keyWaitTimeout,
  noSupply,
} from "./diagnostics.js";
import type { Holder, HolderLease, Slice } from "./escrow.js";
import { type TakeRow, takeEscrow } from "./escrow-take.js";
import { type AttemptFailure, outcomeOf } from "./failure.js";
import type { OfferBook } from "./offer-book.js";
import type { Attempt, AttemptOutcome, InferenceSession } from "./session.js";

/** In-flight completions per supplier key (a supplier key is one upstream account's rate limits). */
export const SUPPLIER_KEY_MAX_IN_FLIGHT = 16;
/** How long a request waits for a busy supplier key before 503 key_wait_timeout. */
export const KEY_WAIT_MS = 5_000;
/** How often a request waiting for a busy key looks again. */
const KEY_POLL_MS = 25;
/** A key that answered "out of capacity" (upstream 402) is not routed for this long. */
export const EXHAUSTED_COOLDOWN_MS = 60_000;
/** Decrypted supplier secrets are kept in memory this long. */
const KEY_CACHE_MS = 60_000;
/** Gate names remembered (one per supplier key seen; forgotten all at once past this many). */
const GATE_NAMES_MAX = 100_000;

/** Rounds of escrow pressure (and the wait after each) before a request is refused 402. */
export const ESCROW_PRESSURE_ROUNDS = 3;
export const ESCROW_PRESSURE_WAIT_MS = 50;
/** Top-ups per admission before giving up (each either grants or changes what is asked). */
const MAX_TAKES = 16;

/** A supplier key lent outside an attempt (see `Attempts.borrowKey`); `release` gives its slot back. */
export interface BorrowedKey {
  upstreamKeyId: string;
  priceCentsPerDollar: number;
  secret: string;
  release(): void;
}

/** How the pipeline marks a supplier key's health (the one path: `supply/key-health.ts`). */
export interface KeyMarks {
  coolDown(upstreamKeyId: string, untilMs: number): Promise<unknown>;
  markAuthFailed(upstreamKeyId: string): Promise<unknown>;
}

export interface AttemptDeps {
  sql: Sql;
  clock: Clock;
  gates: GateLeases;
  keys: RedisKeys;
  secrets: SecretBox;
  keyHealth: KeyMarks;
  lease: HolderLease;
  book: OfferBook;
  ceilings: Ceilings;
  /** after an upstream 402: refresh the key's balance (best effort, async) */
  onKeyExhausted?: (upstreamKeyId: string) => Promise<void>;
  /** a request refused for want of balance: ask every process to give back its idle slice of it */
  onBalancePressure?: (accountId: string) => void;
  /** what other processes' slices of the buyer's balance hold that no request in flight there uses */
  idleElsewhere?: (accountId: string) => Promise<bigint>;
  /** a request that waited for a busy supplier key (seconds) */
  onKeyWait?: (seconds: number) => void;
  /** ends the whole request with `err` (recorded, everything released); returns the error to throw */
  fail: (session: InferenceSession, err: DomainError) => Promise<DomainError>;
}

/** The state of one admission across its looks (see `Attempts.next`). */
interface AdmitRound {
  /** when a wait for a busy key gives up (epoch ms) */
  deadline: number;
  /** when the wait for a busy key began (`performance.now()`), for the key-wait metric */
  waitedSince: number | null;
  /** rounds of escrow pressure asked */
  pressured: number;
  /** keys found at their in-flight limit in this poll */
  busy: string[];
  /** the book was read afresh (never refuse on a stale one) */
  freshBook: boolean;
  /** top-ups taken */
  takes: number;
}

/** (Re-)plans the request's maximum against `availableMicroUsdc`; false when even the minimum is unaffordable. */
export function planRequest(session: InferenceSession, availableMicroUsdc: bigint): boolean {
  session.plans++;
  const plan = session.pricer.plan(session.ceilingCents, availableMicroUsdc);
  if (!plan) return false;
  session.plan = plan;
  return true;
}

/**
 * Attempts with fall-forward (SPEC "What the service does" 4): each attempt is admitted on the
 * cheapest eligible offer on a key the request has not tried (at most MAX_ATTEMPTS distinct keys),
 * against this process's escrow slices, topped up in Postgres when too small; a busy key is waited
 * for up to KEY_WAIT_MS. An attempt that fails before anything reached the buyer gives its admission
 * and key slot back and its key is acted on (cooldown, auth mark) through the one key-health path.
 */
export class Attempts {
  readonly stats = { takes: 0, admitted: 0, inMemory: 0 };
  private readonly secrets = new Map<string, { secret: string; at: number }>();
  /** supplier key id → its gate's name (see `supplierGate`) */
  private readonly gateNames = new Map<string, string>();
  private readonly run: QueryRunner;

  constructor(private readonly deps: AttemptDeps) {
    this.run = sqlRunner(deps.sql);
  }

  /**
   * Admits the request's next attempt. On the first call it also admits the buyer's maximum charge.
   * Looks at the book and the slices until an attempt is admitted (`look`): each look admits on a
   * covered offer (`admitCovered`), reads a stale book again or waits for a busy key (`noOffer`), or
   * tops a slice up (`topUp`, re-planning on what the top-up read: `replan`).
   * @throws 401 (a revoked key, seen by a top-up), 402 insufficient_balance,
   *   503 pool_empty / no_eligible_supply / insufficient_routable_at_price / key_wait_timeout,
   *   502 upstream_error when fall-forward is exhausted
   */
  async next(session: InferenceSession): Promise<Attempt> {
    if (session.tried.length >= MAX_ATTEMPTS) throw await this.deps.fail(session, fallForwardExhausted());
    const round: AdmitRound = {
      deadline: this.deps.clock.now().getTime() + KEY_WAIT_MS,
      waitedSince: null,
      pressured: 0,
      busy: [],
      freshBook: false,
      takes: 0,
    };
    for (;;) {
      const attempt = await this.look(session, round);
      if (attempt) return attempt;
    }
  }

  /** One look at the book and the slices: the admitted attempt, or undefined to look again. */
  private async look(session: InferenceSession, round: AdmitRound): Promise<Attempt | undefined> {
    const { clock, lease, book, gates } = this.deps;
    const holderOrPromise = lease.current();
    const holder = holderOrPromise instanceof Promise ? await holderOrPromise : holderOrPromise;
    const entries = await book.current();
    if (holder.lost) return undefined;
    // from here to the admission nothing awaits: what is free cannot change under us
    const plan = session.plan;
    const buyer = session.buyerSlice ?? holder.slice("buyer", session.accountId);
    const usdcShort = session.buyerSlice ? 0n : plan.maxChargeMicroUsdc - buyer.free;
    const now = clock.now();
    const { pick, waitingOnBusy } = chooseOffer(entries, {
      holder,
      ceilingCents: Math.min(session.ceilingCents, plan.priceCapCents ?? session.ceilingCents),
      maxBurnMicroDiem: plan.maxBurnMicroDiem,
      tried: session.tried,
      isBusy: (key) => round.busy.includes(key) || gates.claimed(this.supplierGate(key)) >= SUPPLIER_KEY_MAX_IN_FLIGHT,
      nowMs: now.getTime(),
    });
    if (usdcShort <= 0n && pick && pick.short <= 0n) return this.admitCovered(session, buyer, pick, round, now);
    if (usdcShort <= 0n && !pick) return this.noOffer(session, holder, buyer, waitingOnBusy, round, now);
    return this.topUp(session, holder, buyer, usdcShort, pick, round, now);
  }

  /** Both slices cover the request: admitted in memory (no database round trip), unless the key is busy. */
  private async admitCovered(
    session: InferenceSession,
    buyer: Slice,
    pick: OfferPick,
    round: AdmitRound,
    now: Date,
  ): Promise<Attempt | undefined> {
    if (!session.buyerSlice) {
      buyer.admit(session.plan.maxChargeMicroUsdc);
      session.buyerSlice = buyer;
      session.touched.add(buyer);
    }
    const attempt = await this.admitOffer(session, pick.entry, pick.slice, now);
    if (!attempt) {
      round.busy.push(pick.entry.upstreamKeyId);
      return undefined;
    }
    if (round.waitedSince !== null) this.deps.onKeyWait?.((performance.now() - round.waitedSince) / 1000);
    this.stats.admitted++;
    if (round.takes === 0) this.stats.inMemory++;
    return attempt;
  }

  /**
   * No offer can take the request: read a stale book again first; refuse when no key is merely busy
   * (503 with its diagnosis) or the key wait is over (503 key_wait_timeout); else wait a poll.
   */
  private async noOffer(
    session: InferenceSession,
    holder: Holder,
    buyer: Slice,
    waitingOnBusy: boolean,
    round: AdmitRound,
    now: Date,
  ): Promise<undefined> {
    const { clock, book } = this.deps;
    holder.tidy(buyer);
    if (!round.freshBook) {
      // never refuse on a stale book: read it again first
      await book.fresh();
      round.freshBook = true;
      return undefined;
    }
    if (!(round.busy.length > 0 || waitingOnBusy))
      throw await this.deps.fail(session, await noSupply(this.run, session, now));
    if (clock.now().getTime() > round.deadline) throw await this.deps.fail(session, keyWaitTimeout());
    round.busy = [];
    round.waitedSince ??= performance.now();
    await new Promise((res) => setTimeout(res, KEY_POLL_MS));
    return undefined;
  }

  /**
   * A slice is too small: wait for a top-up already under way, or take one in Postgres (the buyer's
   * slice, the offer's, or both); the book learns what is left on the offer.
   */
  private async topUp(
    session: InferenceSession,
    holder: Holder,
    buyer: Slice,
    usdcShort: bigint,
    pick: OfferPick | null,
    round: AdmitRound,
    now: Date,
  ): Promise<undefined> {
    if (usdcShort > 0n && buyer.taking) {
      await buyer.taking.catch(() => undefined);
      return undefined;
    }
    if (pick && pick.short > 0n && pick.slice.taking) {
      await pick.slice.taking.catch(() => undefined);
      return undefined;
    }
    if (++round.takes > MAX_TAKES) throw await this.deps.fail(session, escrowNotSecured());
    this.stats.takes++;
    const plan = session.plan;
    const offer = pick && pick.short > 0n ? pick : null;
    const r = await takeEscrow(this.deps.sql, this.deps.lease, {
      holder,
      accountId: session.accountId,
      apiKeyId: session.apiKeyId,
      ceilingCents: session.ceilingCents,
      buyer: usdcShort > 0n ? { slice: buyer, short: usdcShort, need: plan.maxChargeMicroUsdc } : null,
      offer: offer
        ? { offerId: offer.entry.offerId, slice: offer.slice, short: offer.short, need: plan.maxBurnMicroDiem }
        : null,
      now,
    });
    if (r === "retry") return undefined;
    if (usdcShort > 0n && BigInt(r.granted_usdc) > 0n) session.touched.add(buyer);
    if (offer) {
      if (BigInt(r.granted_diem) > 0n) session.touched.add(offer.slice);
      if (r.outcome === "ok" || r.outcome === "offer_short") {
        // the book learns what is left on the offer
        offer.entry.routableMicroDiem = BigInt(r.routable ?? 0n);
        if (r.key_balance !== null) offer.entry.keyBalanceMicroDiem = BigInt(r.key_balance);
        if (r.outcome === "offer_short" && BigInt(r.routable ?? 0n) === 0n) offer.entry.eligible = false;
      }
    }
    if (r.outcome === "key_inactive") throw new DomainError("authentication_failed", "Invalid or revoked API key.");
    if (r.outcome === "stale_ceiling" || r.outcome === "insufficient_balance")
      await this.replan(session, buyer, r, round);
    return undefined;
  }

  /**
   * A top-up found the request planned with a stale ceiling or more than the balance affords: plan
   * again with the account's values as the top-up just read them (plus what this process already
   * holds) — after asking other processes for the idle slices of this buyer's balance (escrow
   * pressure) while that could make the plan fit; 402 when even the smallest request cannot.
   */
  private async replan(session: InferenceSession, buyer: Slice, r: TakeRow, round: AdmitRound): Promise<void> {
    if (r.ceiling !== null) {
      this.deps.ceilings.learn(session.accountId, Number(r.ceiling));
      session.ceilingCents = Number(r.ceiling);
    }
    const available = BigInt(r.available ?? 0n) + (buyer.free > 0n ? buyer.free : 0n);
    // the request as planned fits in the balance once other processes give back what their
    // slices hold idle (availableUsdc counts it): ask for it (escrow pressure) before shrinking it
    if (
      r.outcome === "insufficient_balance" &&
      round.pressured < ESCROW_PRESSURE_ROUNDS &&
      this.deps.onBalancePressure &&
      this.deps.idleElsewhere &&
      session.plan.maxChargeMicroUsdc <= available + (await this.deps.idleElsewhere(session.accountId))
    ) {
      await this.pressure(session, round);
      return;
    }
    if (session.plans >= MAX_PLANS || !planRequest(session, available)) {
      // other router processes may hold this buyer's balance idle in their slices: ask every
      // process to give idle parts back, then take again (a few short rounds) before refusing
      if (await this.pressure(session, round)) return;
      throw await this.deps.fail(session, insufficientBalance(session));
    }
  }

  /** One round of escrow pressure (ask, then wait a moment); false when the rounds are spent. */
  private async pressure(session: InferenceSession, round: AdmitRound): Promise<boolean> {
    if (round.pressured >= ESCROW_PRESSURE_ROUNDS || !this.deps.onBalancePressure) return false;
    round.pressured++;
    this.deps.onBalancePressure(session.accountId);
    await new Promise((res) => setTimeout(res, ESCROW_PRESSURE_WAIT_MS));
    return true;
  }

  /** Admits the attempt on an offer whose slice covers it: takes the supplier key's gate slot. */
  private async admitOffer(
    session: InferenceSession,
    entry: BookEntry,
    slice: Slice,
    now: Date,
  ): Promise<Attempt | null> {
    const burn = session.plan.maxBurnMicroDiem;
    slice.admit(burn);
    session.touched.add(slice);
    const ordinal = ++session.ordinals;
    const key = entry.upstreamKeyId;
    let ok: boolean;
    try {
      ok = await this.deps.gates.acquire(this.supplierGate(key), SUPPLIER_KEY_MAX_IN_FLIGHT);
    } catch (e) {
      slice.release(burn);
      throw e;
    }
    if (!ok) {
      // the key is at its in-flight limit across processes: give the admission back, next offer
      slice.release(burn);
      session.attempts.push({
        ordinal,
        key,
        offer: entry.offerId,
        price: entry.priceCentsPerDollar,
        outcome: "aborted",
        status: null,
        detail: "key_busy",
        started: now.toISOString(),
        ended: now.toISOString(),
      });
      return null;
    }
    session.tried.push(key);
    session.attempt = {
      ordinal,
      offerId: entry.offerId,
      upstreamKeyId: key,
      supplierAccountId: entry.supplierAccountId,
      priceCentsPerDollar: entry.priceCentsPerDollar,
      secret: this.openSecret(entry),
      keyBalanceMicroDiem: entry.keyBalanceMicroDiem,
      preCallBalance: null,
      keyHeld: true,
      offerSlice: slice,
      startedAt: now,
    };
    return session.attempt;
  }

  /**
   * Ends the current attempt before anything reached the buyer: its admission and key slot back,
   * its outcome noted, its key acted on (402 → cooldown and a balance refresh; 401/403 → auth_failed).
   */
  async end(session: InferenceSession, failure: AttemptFailure | null): Promise<void> {
    const a = session.attempt;
    if (!a) return;
    const now = this.deps.clock.now();
    this.record(session, a, outcomeOf(failure), failure, now);
    this.freeKey(a);
    await this.markKey(a.upstreamKeyId, failure, now);
  }

  /**
   * THE key-health path of a failed call on a supplier key (an attempt's or a borrowed key's):
   * 402 → cooldown and a balance refresh; 401/403 → auth_failed; anything else leaves the key be.
   */
  async markKey(upstreamKeyId: string, failure: AttemptFailure | null, now = this.deps.clock.now()): Promise<void> {
    if (failure?.kind === "supplier_exhausted") {
      await this.mark(upstreamKeyId, () =>
        this.deps.keyHealth.coolDown(upstreamKeyId, now.getTime() + EXHAUSTED_COOLDOWN_MS),
      );
      this.deps.onKeyExhausted?.(upstreamKeyId).catch(() => undefined);
    } else if (failure?.kind === "supplier_auth") {
      await this.mark(upstreamKeyId, () => this.deps.keyHealth.markAuthFailed(upstreamKeyId));
      this.secrets.delete(upstreamKeyId);
    }
  }

  /** A key mark never fails the request; the book is read again before the next attempt either way. */
  private async mark(upstreamKeyId: string, how: () => Promise<unknown>): Promise<void> {
    try {
      await how();
    } catch (e) {
      logger.error({ err: e, upstreamKeyId }, "could not mark a supplier key");
    }
    this.deps.book.invalidate();
  }

  /** Notes an attempt's outcome and releases its admission on the offer's slice. */
  record(
    session: InferenceSession,
    a: Attempt,
    outcome: AttemptOutcome,
    failure: AttemptFailure | null,
    now: Date,
  ): void {
    session.attempt = null;
    a.offerSlice.release(session.plan.maxBurnMicroDiem);
    session.attempts.push({
      ordinal: a.ordinal,
      key: a.upstreamKeyId,
      offer: a.offerId,
      price: a.priceCentsPerDollar,
      outcome,
      status: failure?.status ?? null,
      detail: failure ? failure.detail.slice(0, 200) : null,
      started: a.startedAt.toISOString(),
      ended: now.toISOString(),
    });
  }

  /** The request's gate slots back (in memory; see GateLeases), its attempt's supplier key's included. */
  releaseSlots(session: InferenceSession, attempt: Attempt | null = session.attempt): void {
    for (const g of session.gates) this.deps.gates.release(g);
    session.gates = [];
    if (attempt) this.freeKey(attempt);
  }

  /** The attempt's slot of its supplier key's gate back (once). */
  freeKey(attempt: Attempt): void {
    if (!attempt.keyHeld) return;
    attempt.keyHeld = false;
    this.deps.gates.release(this.supplierGate(attempt.upstreamKeyId));
  }

  /**
   * A supplier key lent for a call that is not an attempt (a video quote): the first routable
   * entry of the book in clearing order at or below `ceilingCents` — or, when none is, at any
   * price — on a key not in `exclude` whose in-flight gate has a free slot (held until `release`).
   * "busy" when such keys exist but every one is at its limit — at once, or with `waitForKey` only
   * once they stayed so for KEY_WAIT_MS (the wait of an attempt, `next`); "none" when no key is
   * routable (on a book read afresh).
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
      const gate = this.supplierGate(entry.upstreamKeyId);
      if (!(await this.deps.gates.acquire(gate, SUPPLIER_KEY_MAX_IN_FLIGHT))) continue;
      let released = false;
      return {
        upstreamKeyId: entry.upstreamKeyId,
        priceCentsPerDollar: entry.priceCentsPerDollar,
        secret: this.openSecret(entry),
        release: () => {
          if (released) return;
          released = true;
          this.deps.gates.release(gate);
        },
      };
    }
    return "busy";
  }

  /**
   * The gate of a supplier key's in-flight completions. Named once per key: an admission asks for
   * it for every key it passes over, and a name built anew each time must be hashed anew by the
   * gates' map (with thousands of streams open that was most of admission's CPU).
   */
  private supplierGate(upstreamKeyId: string): string {
    let gate = this.gateNames.get(upstreamKeyId);
    if (gate === undefined) {
      if (this.gateNames.size >= GATE_NAMES_MAX) this.gateNames.clear();
      gate = this.deps.keys.upstreamKeyInFlight(upstreamKeyId);
      this.gateNames.set(upstreamKeyId, gate);
    }
    return gate;
  }

  private openSecret(entry: BookEntry): string {
    const nowMs = this.deps.clock.now().getTime();
    const hit = this.secrets.get(entry.upstreamKeyId);
    if (hit && nowMs - hit.at < KEY_CACHE_MS) return hit.secret;
    const secret = this.deps.secrets.open(entry.sealed, entry.supplierAccountId);
    this.secrets.set(entry.upstreamKeyId, { secret, at: nowMs });
    return secret;
  }
}
