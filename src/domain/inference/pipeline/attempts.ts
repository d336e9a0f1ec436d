import type { Clock } from "../../../lib/clock.js";
import type { Running } from "../../../lib/running.js";
import { Hold, type Holder, Slice } from "../escrow/escrow.js";
import { type AdmitRound, TopUps } from "../escrow/escrow-take.js";
import type { HolderLease } from "../escrow/holder-lease.js";
import { type BookEntry, chooseOffer, MAX_ATTEMPTS, type OfferPick } from "../routing/clearing.js";
import type { OfferBook } from "../routing/offer-book.js";
import { KEY_POLL_MS, KEY_WAIT_MS, type SupplierKeys } from "../routing/supplier-keys.js";
import type { EscrowStore, InFlightGates, OfferStore } from "../settlement/stores.js";
import type { Ceilings } from "./ceilings.js";
import { fallForwardExhausted, keyWaitTimeout, noSupply, refused } from "./diagnostics.js";
import { type AttemptFailure, outcomeOf } from "./failure.js";
import type { AdmissionDraft, Attempt, AttemptOutcome, AttemptRecord, InferenceSession } from "./session.js";

export interface AttemptDeps {
  clock: Clock;
  gates: InFlightGates;
  offers: OfferStore;
  escrow: EscrowStore;
  lease: HolderLease;
  book: OfferBook;
  ceilings: Ceilings;
  keys: SupplierKeys;
  /** a request refused for want of balance: ask every process to give back its idle slice of it */
  onBalancePressure?: (accountId: string) => void;
  /** what other processes' slices of the buyer's balance hold that no request in flight there uses */
  idleElsewhere?: (accountId: string) => Promise<bigint>;
  /** a request that waited for a busy supplier key (seconds) */
  onKeyWait?: (seconds: number) => void;
  /** the requests holding gate slots here: each leaves when its slots go back (`releaseSlots`) */
  running?: Running;
  /** a held request's key budget hold moved to the holder it runs under (`KeyBudgets.follow`) */
  followBudget?: (session: InferenceSession, holder: Holder) => Promise<"ok" | "holder_lost">;
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
  private readonly topUps: TopUps;

  constructor(private readonly deps: AttemptDeps) {
    this.topUps = new TopUps(deps, this.stats);
  }

  /**
   * Admits the request's next attempt. The first call is admission's (`admitting`, the draft): it
   * also holds the buyer's maximum charge, and what a top-up reads may re-plan the draft. After
   * that the request is admitted and read only: a fall-forward never re-plans.
   * Looks at the book and the slices until an attempt is admitted (`look`): each look admits on a
   * covered offer (`admitCovered`), reads a stale book again or waits for a busy key (`noOffer`), or
   * tops a slice up (`TopUps.topUp`, re-planning on what the top-up read).
   * @throws 401 (a revoked key, seen by a top-up), 402 insufficient_balance,
   *   503 pool_empty / no_eligible_supply / insufficient_routable_at_price / key_wait_timeout,
   *   502 upstream_error when fall-forward is exhausted
   */
  async next(session: InferenceSession, admitting: AdmissionDraft | null = null): Promise<Attempt> {
    if (session.trail.tried.length >= MAX_ATTEMPTS) throw refused(fallForwardExhausted());
    const round: AdmitRound = {
      deadline: this.deps.clock.now().getTime() + KEY_WAIT_MS,
      waitedSince: null,
      pressured: 0,
      busy: [],
      freshBook: false,
      takes: 0,
    };
    for (;;) {
      const attempt = await this.look(session, round, admitting);
      if (attempt) return attempt;
    }
  }

  /** One look at the book and the slices: the admitted attempt, or undefined to look again. */
  private async look(
    session: InferenceSession,
    round: AdmitRound,
    admitting: AdmissionDraft | null,
  ): Promise<Attempt | undefined> {
    const { clock, lease, book, keys } = this.deps;
    const holderOrPromise = lease.current();
    const holder = holderOrPromise instanceof Promise ? await holderOrPromise : holderOrPromise;
    // a budget hold taken under a holder since lost goes where the request now runs
    if (session.budgetHold !== null && (await this.deps.followBudget?.(session, holder)) === "holder_lost") {
      lease.lose(holder);
      return undefined;
    }
    const entries = await book.current();
    if (holder.lost) return undefined;
    // from here to the admission nothing awaits: what is free cannot change under us
    const plan = session.plan;
    // paid per request: the payment funds it, no slice of the balance (one that is never registered)
    const buyer =
      session.buyerHold?.slice ??
      (session.payment ? new Slice(holder.id, "buyer", session.accountId) : holder.slice("buyer", session.accountId));
    const usdcShort = session.buyerHold || session.payment ? 0n : plan.maxChargeMicroUsdc - buyer.free;
    const now = clock.now();
    const { pick, waitingOnBusy } = chooseOffer(entries, {
      holder,
      ceilingCents: Math.min(session.effectiveCeilingCents, plan.priceCapCents ?? Number.MAX_SAFE_INTEGER),
      maxBurnMicroDiem: plan.maxBurnMicroDiem,
      tried: session.trail.tried,
      isBusy: (key) => round.busy.includes(key) || keys.busy(key),
      nowMs: now.getTime(),
    });
    if (usdcShort <= 0n && pick && pick.short <= 0n)
      return this.admitCovered(session, admitting, buyer, pick, round, now);
    if (usdcShort <= 0n && !pick) return this.noOffer(session, holder, buyer, waitingOnBusy, round, now);
    return this.topUps.topUp(session, admitting, holder, buyer, usdcShort, pick, round, now);
  }

  /** Both slices cover the request: admitted in memory (no database round trip), unless the key is busy. */
  private async admitCovered(
    session: InferenceSession,
    admitting: AdmissionDraft | null,
    buyer: Slice,
    pick: OfferPick,
    round: AdmitRound,
    now: Date,
  ): Promise<Attempt | undefined> {
    if (!session.buyerHold && !session.payment) {
      // only admission holds the buyer's maximum (an admitted request holds it already)
      if (!admitting) throw new Error("the buyer's maximum is held at admission, never after");
      admitting.buyerHold = new Hold(buyer, session.plan.maxChargeMicroUsdc);
      session.trail.touch(buyer);
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
    if (!(round.busy.length > 0 || waitingOnBusy)) throw refused(await noSupply(this.deps.offers, session, now));
    if (clock.now().getTime() > round.deadline) throw refused(keyWaitTimeout());
    round.busy = [];
    round.waitedSince ??= performance.now();
    await new Promise((res) => setTimeout(res, KEY_POLL_MS));
    return undefined;
  }

  /** Admits the attempt on an offer whose slice covers it: takes the supplier key's gate slot. */
  private async admitOffer(
    session: InferenceSession,
    entry: BookEntry,
    slice: Slice,
    now: Date,
  ): Promise<Attempt | null> {
    const { trail } = session;
    const offerHold = new Hold(slice, session.plan.maxBurnMicroDiem);
    trail.touch(slice);
    const ordinal = trail.nextOrdinal();
    const key = entry.upstreamKeyId;
    let ok: boolean;
    try {
      ok = await this.deps.keys.acquire(key);
    } catch (e) {
      offerHold.release();
      throw e;
    }
    if (!ok) {
      // the key is at its in-flight limit across processes: give the admission back, next offer
      offerHold.release();
      trail.ended({
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
    const attempt: Attempt = Object.freeze({
      ordinal,
      offerId: entry.offerId,
      upstreamKeyId: key,
      supplierAccountId: entry.supplierAccountId,
      priceCentsPerDollar: entry.priceCentsPerDollar,
      secret: this.deps.keys.secretOf(entry),
      keyBalanceMicroDiem: entry.keyBalanceMicroDiem,
      offerHold,
      startedAt: now,
    });
    this.deps.keys.held(attempt);
    trail.admitted(attempt);
    return attempt;
  }

  /**
   * Ends the attempt in flight before anything reached the buyer: its hold and key slot back,
   * its record appended, its key acted on (`SupplierKeys.mark`: 402 → cooldown and a balance refresh; the
   * documented invalid-key answer → auth_failed; an unclear 401/403 → the key confirmed).
   */
  async end(session: InferenceSession, failure: AttemptFailure | null): Promise<void> {
    const a = session.trail.inFlight();
    if (!a) return;
    const now = this.deps.clock.now();
    session.trail.ended(attemptRecord(a, outcomeOf(failure), failure, now));
    a.offerHold.release();
    this.deps.keys.free(a);
    await this.deps.keys.mark(a.upstreamKeyId, failure, now);
  }

  /** The request's gate slots back (in memory; see GateLeases), its attempt's supplier key's included. */
  releaseSlots(session: InferenceSession, attempt: Attempt | null): void {
    for (const g of session.gates) this.deps.gates.release(g);
    if (attempt) this.deps.keys.free(attempt);
    this.deps.running?.leave();
  }
}

/** An attempt's record as the request keeps it, ended now with `outcome`. */
export function attemptRecord(
  a: Attempt,
  outcome: AttemptOutcome,
  failure: AttemptFailure | null,
  now: Date,
): AttemptRecord {
  return {
    ordinal: a.ordinal,
    key: a.upstreamKeyId,
    offer: a.offerId,
    price: a.priceCentsPerDollar,
    outcome,
    status: failure?.status ?? null,
    detail: failure ? failure.detail.slice(0, 200) : null,
    started: a.startedAt.toISOString(),
    ended: now.toISOString(),
  };
}
