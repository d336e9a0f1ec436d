import { DomainError } from "../../../lib/errors.js";
import { MAX_PLANS } from "../pipeline/admission.js";
import type { Ceilings } from "../pipeline/ceilings.js";
import { escrowNotSecured, insufficientBalance, refused } from "../pipeline/diagnostics.js";
import type { AdmissionDraft, InferenceSession } from "../pipeline/session.js";
import { effectiveCeiling } from "../pipeline/session.js";
import type { OfferPick } from "../routing/clearing.js";
import type { EscrowStore, TakeResult } from "../settlement/stores.js";
import type { Holder, Slice } from "./escrow.js";
import type { HolderLease } from "./holder-lease.js";

/**
 * The escrow-facing part of admitting an attempt (`Attempts.next`): a slice too small is topped up
 * in Postgres (`takeEscrow`, `svc_escrow_take`), and what the top-up read (a changed ceiling, a
 * balance short of the plan) re-plans the request, after escrow pressure where that could help.
 */

/** Rounds of escrow pressure (and the wait after each) before a request is refused 402. */
export const ESCROW_PRESSURE_ROUNDS = 3;
export const ESCROW_PRESSURE_WAIT_MS = 50;
/** Top-ups per admission before giving up (each either grants or changes what is asked). */
const MAX_TAKES = 16;

/** The state of one admission across its looks (see `Attempts.next`). */
export interface AdmitRound {
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

/**
 * THE sizing of a request: (re-)plans its maximum against `availableMicroUsdc` at its effective
 * ceiling; false when even the minimum is unaffordable. A pay-per-request 402 is sized here too
 * (`InferencePipeline.paidMaximum`).
 */
export function planRequest(
  session: Pick<AdmissionDraft, "plans" | "budgetHold" | "pricer" | "plan" | "effectiveCeilingCents">,
  availableMicroUsdc: bigint,
): boolean {
  session.plans++;
  // a key's budget hold bounds every plan after it (the ending never charges beyond the hold)
  const hold = session.budgetHold;
  const available = hold !== null && hold < availableMicroUsdc ? hold : availableMicroUsdc;
  const plan = session.pricer.plan(session.effectiveCeilingCents, available);
  if (!plan) return false;
  session.plan = plan;
  return true;
}

/** One top-up: the buyer's slice and/or an offer's, each with what is short and the request's need. */
export interface TakeAsk {
  holder: Holder;
  accountId: string;
  apiKeyId: string;
  /** the ceiling the request was planned with (a changed one answers `stale_ceiling`) */
  ceilingCents: number;
  buyer: { slice: Slice; short: bigint; need: bigint } | null;
  offer: { offerId: string; slice: Slice; short: bigint; need: bigint } | null;
  now: Date;
}

/**
 * One top-up (`svc_escrow_take`): the buyer's slice and/or the chosen offer's, in one short
 * transaction with the hold's guards (balance, ceiling, key active, offer eligible and deep enough).
 * Grants land in the slices; others needing more wait on `slice.taking` meanwhile. Returns `retry`
 * when the holder's lease was lost (the next `current()` registers anew).
 */
export async function takeEscrow(escrow: EscrowStore, lease: HolderLease, ask: TakeAsk): Promise<"retry" | TakeResult> {
  const { holder, buyer, offer } = ask;
  let done!: () => void;
  const taking = new Promise<void>((res) => {
    done = res;
  });
  if (buyer) buyer.slice.taking = taking;
  if (offer) offer.slice.taking = taking;
  try {
    const nowMs = ask.now.getTime();
    const usdcWant = buyer ? buyer.slice.want(buyer.need, nowMs) : 0n;
    const diemWant = offer ? offer.slice.want(offer.need, nowMs) : 0n;
    const row = await escrow.take({
      holder: holder.id,
      accountId: buyer ? ask.accountId : null,
      apiKeyId: ask.apiKeyId,
      ceilingCents: ask.ceilingCents,
      usdcMin: buyer ? buyer.short : 0n,
      usdcWant,
      offerId: offer ? offer.offerId : null,
      diemMin: offer ? offer.short : 0n,
      diemWant,
      now: ask.now,
    });
    if (row.outcome === "holder_lost") {
      lease.lose(holder);
      return "retry";
    }
    if (buyer && row.grantedUsdc > 0n) buyer.slice.grant(row.grantedUsdc);
    if (offer && row.grantedDiem > 0n) offer.slice.grant(row.grantedDiem);
    return row;
  } finally {
    if (buyer) buyer.slice.taking = null;
    if (offer) offer.slice.taking = null;
    done();
    if (buyer) holder.tidy(buyer.slice);
    if (offer) holder.tidy(offer.slice);
  }
}

export interface TopUpDeps {
  escrow: EscrowStore;
  lease: HolderLease;
  ceilings: Ceilings;
  /** a request refused for want of balance: ask every process to give back its idle slice of it */
  onBalancePressure?: (accountId: string) => void;
  /** what other processes' slices of the buyer's balance hold that no request in flight there uses */
  idleElsewhere?: (accountId: string) => Promise<bigint>;
}

/** Top-ups of a request's slices and the re-planning they lead to (see the module comment). */
export class TopUps {
  constructor(
    private readonly deps: TopUpDeps,
    /** top-ups taken by this process (observability) */
    private readonly stats: { takes: number },
  ) {}

  /**
   * A slice is too small: wait for a top-up already under way, or take one in Postgres (the buyer's
   * slice, the offer's, or both); the book learns what is left on the offer.
   */
  async topUp(
    session: InferenceSession,
    /** admission's draft while the first attempt is admitted (what may be re-planned); null after */
    admitting: AdmissionDraft | null,
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
    if (++round.takes > MAX_TAKES) throw refused(escrowNotSecured());
    this.stats.takes++;
    const plan = session.plan;
    const offer = pick && pick.short > 0n ? pick : null;
    const r = await takeEscrow(this.deps.escrow, this.deps.lease, {
      holder,
      accountId: session.accountId,
      apiKeyId: session.apiKeyId,
      ceilingCents: session.accountCeilingCents,
      buyer: usdcShort > 0n ? { slice: buyer, short: usdcShort, need: plan.maxChargeMicroUsdc } : null,
      offer: offer
        ? { offerId: offer.entry.offerId, slice: offer.slice, short: offer.short, need: plan.maxBurnMicroDiem }
        : null,
      now,
    });
    if (r === "retry") return undefined;
    if (usdcShort > 0n && r.grantedUsdc > 0n) session.trail.touch(buyer);
    if (offer) {
      if (r.grantedDiem > 0n) session.trail.touch(offer.slice);
      if (r.outcome === "ok" || r.outcome === "offer_short") {
        // the book learns what is left on the offer
        offer.entry.routableMicroDiem = r.routable ?? 0n;
        if (r.keyBalance !== null) offer.entry.keyBalanceMicroDiem = r.keyBalance;
        if (r.outcome === "offer_short" && (r.routable ?? 0n) === 0n) offer.entry.eligible = false;
      }
    }
    if (r.outcome === "key_inactive") throw new DomainError("authentication_failed", "Invalid or revoked API key.");
    if (r.outcome === "stale_ceiling" || r.outcome === "insufficient_balance") {
      // only the buyer's part reads the balance and the ceiling, and only admission asks for it
      if (!admitting) throw new Error("a top-up after admission asked for the buyer's balance");
      await this.replan(admitting, buyer, r, round);
    }
    return undefined;
  }

  /**
   * A top-up found the request planned with a stale ceiling or more than the balance affords: plan
   * again with the account's values as the top-up just read them (plus what this process already
   * holds) — after asking other processes for the idle slices of this buyer's balance (escrow
   * pressure) while that could make the plan fit; 402 when even the smallest request cannot.
   */
  private async replan(session: AdmissionDraft, buyer: Slice, r: TakeResult, round: AdmitRound): Promise<void> {
    if (r.ceiling !== null) {
      this.deps.ceilings.learn(session.accountId, r.ceiling);
      session.accountCeilingCents = r.ceiling;
      session.effectiveCeilingCents = effectiveCeiling(r.ceiling, session.capCents);
    }
    const available = (r.available ?? 0n) + (buyer.free > 0n ? buyer.free : 0n);
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
      throw refused(insufficientBalance(session));
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
}
