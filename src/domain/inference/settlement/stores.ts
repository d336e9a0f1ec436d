import type { BudgetPeriod, LimitReset } from "../../keys/key-period.js";
import type { BookEntry, EligibleOffer, EligibleQuery } from "../routing/clearing.js";
import type { EndItem } from "./end-item.js";

/**
 * What the inference pipeline asks of the outside world, as narrow ports (docs/decisions.md
 * "Inference pipeline", "Stores"). The pipeline, `Attempts`, escrow and the ending talk only to
 * these. In production they are `sqlStores` (`sql-stores.ts`: the same SQL and stored functions as
 * before, over the `pg` pool) and the Redis adapters (`GateLeases` satisfies `InFlightGates`,
 * `KeyHealth` satisfies `KeyMarks`); the pipeline's tests and the money simulation build it on the
 * same `sqlStores` over a database cloned from the migrated template (`testkit/market-db.ts`), so
 * every rule is checked where it lives. The SQL implementations live in the domain (they use the `Sql` adapter) because
 * adapters may not import the domain's types (`.dependency-cruiser.cjs`).
 */

/** The offers the router can clear on (`svc_eligible` / `svc_routable`). */
export interface OfferStore {
  /**
   * Every offer eligible at `now`, in clearing order (cheapest, oldest, id), with what is routable
   * on it, its key's last known balance and cooldown, and its key's sealed secret: the offer book.
   */
  book(now: Date): Promise<BookEntry[]>;
  /** Eligible offers at or below a price with enough routable, in clearing order (`eligibleOffers`). */
  eligible(q: EligibleQuery): Promise<EligibleOffer[]>;
}

/** The buyer's ceiling as stored (what a request is planned with until a top-up says otherwise). */
export interface CeilingStore {
  /** The account's ceiling in cents per dollar, or null when there is no such account. */
  ceilingOf(accountId: string): Promise<number | null>;
}

/** What one escrow top-up asks (the parameters of `svc_escrow_take`, one for one). */
export interface TakeRequest {
  holder: string;
  /** the buyer whose slice is topped up; null: the offer's slice only */
  accountId: string | null;
  apiKeyId: string;
  /** the ceiling the request was planned with (a changed one answers `stale_ceiling`) */
  ceilingCents: number;
  /** what the buyer's slice lacks (the least granted) and what it asks for */
  usdcMin: bigint;
  usdcWant: bigint;
  /** the offer whose slice is topped up; null: the buyer's slice only */
  offerId: string | null;
  diemMin: bigint;
  diemWant: bigint;
  now: Date;
}

/** What one top-up answers (`svc_escrow_take`'s row). */
export interface TakeResult {
  outcome: "ok" | "holder_lost" | "key_inactive" | "stale_ceiling" | "insufficient_balance" | "offer_short";
  /** granted to the buyer's slice (committed even when the offer part is `offer_short`) */
  grantedUsdc: bigint;
  /** the buyer's available balance (confirmed − reserved) after the grant; null when not read */
  available: bigint | null;
  /** the account's ceiling as stored; null when not read */
  ceiling: number | null;
  grantedDiem: bigint;
  /** what is still routable on the offer (0 when it is not eligible); null when not read */
  routable: bigint | null;
  keyBalance: bigint | null;
}

/** A part of a holder's slice that goes back (a buyer's balance, micro-USDC, or an offer's DIEM). */
export interface SliceReturn {
  kind: "buyer" | "offer";
  /** the account id (buyer) or the offer id */
  id: string;
  amount: bigint;
}

/** The escrow ledger: holders (router processes), their slices of buyers and offers. */
export interface EscrowStore {
  /** Registers a holder whose lease runs until `expiresAt`. */
  enrol(holder: string, expiresAt: Date): Promise<void>;
  /** Extends a holder's lease; false when the holder is gone (the sweeper released it). */
  renew(holder: string, expiresAt: Date): Promise<boolean>;
  /** One top-up of a buyer's slice and/or an offer's, with the hold's guards (`svc_escrow_take`). */
  take(ask: TakeRequest): Promise<TakeResult>;
  /**
   * Gives parts of a holder's slices back (`svc_escrow_give_back`): each by at most what the slice
   * holds (a slice already released is left alone).
   */
  giveBack(holder: string, returns: readonly SliceReturn[]): Promise<void>;
  /**
   * Applies the holder's appended clears to the hot rows (`svc_fold_holder`, docs/decisions.md "One
   * append per clear"); the live offers it sold out, to be marked depleted.
   */
  fold(holder: string): Promise<{ offerId: string; accountId: string }[]>;
  /** What holders other than `exceptHolder` hold of a buyer's balance, live (micro-USDC). */
  buyerSlices(accountId: string, exceptHolder: string | null): Promise<{ holder: string; amountMicroUsdc: bigint }[]>;
  /** Gives every slice of one holder back and forgets it (a clean shutdown). */
  release(holder: string, now: Date): Promise<void>;
  /** The sweeper: gives back the slices of up to `limit` holders whose lease expired; how many. */
  releaseExpired(now: Date, limit: number): Promise<number>;
}

/** A `pg` client inside the settlement's transaction (between BEGIN and COMMIT). */
export interface SettlementTx {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/**
 * What a settlement batch causes beyond its rows, written in its transaction (the webhook
 * outbox; `domain/webhooks/settlement-events.ts`): an offer sold out, a buyer's balance crossing
 * below a threshold, a key's budget exhausted.
 */
export interface SettlementEvents {
  /** the event types a batch may cause: the batch asks, in its own statement, who takes them */
  readonly types: readonly string[];
  /**
   * In the batch's transaction, after `svc_end_batch`: writes the events `items` caused for the
   * accounts in `subscribers` (account → the types it takes). `confirmed`: each item's buyer's
   * confirmed balance after the batch. Returns what `dispatch` takes after the commit.
   */
  record(
    tx: SettlementTx,
    items: readonly EndItem[],
    confirmed: readonly bigint[],
    subscribers: ReadonlyMap<string, ReadonlySet<string>>,
  ): Promise<string[]>;
  /** after the commit; never throws */
  dispatch(ids: readonly string[]): Promise<void>;
}

/** Where request endings commit (`svc_end_batch`; the item is THE contract, see `EndItem`). */
export interface SettlementStore {
  /**
   * Commits the endings in one transaction, or none of them (a guard that fails throws); each
   * item's buyer's confirmed balance afterwards, in item order.
   */
  commit(items: EndItem[]): Promise<bigint[]>;
  /**
   * Whether a request's ending committed (its record exists), and its buyer's confirmed balance
   * now; null when it did not. Asked after a commit whose answer was lost (`Endings.charge`).
   */
  ended(requestId: string): Promise<{ status: string; confirmed: bigint } | null>;
}

/** In-flight slots per gate (buyer keys, supplier keys, the small tier), leased per process (`GateLeases`). */
export interface InFlightGates {
  /** this process's id as a holder of slots (diagnostics) */
  readonly id: string;
  /** takes a slot when fewer than `limit` are in use across every process */
  acquire(gate: string, limit: number): Promise<boolean>;
  release(gate: string): void;
  /** slots this process uses plus those being acquired (a key at its limit counts as busy) */
  claimed(gate: string): number;
  /** slots this process uses */
  inUse(gate: string): number;
  /** another process was refused slots of `gate`: give back the idle ones held here */
  yieldIdle(gate: string): void;
  close(): Promise<void>;
}

/** How the pipeline marks a supplier key's health (the one path: `supply/key-health.ts`). */
export interface KeyMarks {
  coolDown(upstreamKeyId: string, untilMs: number): Promise<unknown>;
  markAuthFailed(upstreamKeyId: string): Promise<unknown>;
}

/**
 * A request's maximum charge held against the budgets of its API key and of the key's budgeted
 * ancestors (`svc_key_reserve`), each in the period of its own `limitReset`.
 */
export interface KeyBudgetAsk {
  holder: string;
  requestId: string;
  apiKeyId: string;
  /** every reset's period (`budgetPeriod`) at the request's start; `start` null: all time */
  periods: Record<LimitReset, BudgetPeriod>;
  amountMicroUsdc: bigint;
  now: Date;
}

export interface KeyBudgetResult {
  outcome: "ok" | "unlimited" | "key_inactive" | "holder_lost" | "exceeded";
  /** what the tightest budget left before this hold (exceeded: what a request may still hold) */
  remainingMicroUsdc: bigint | null;
  limitMicroUsdc: bigint | null;
  /** the tightest budget's period */
  reset: LimitReset | null;
}

/** Per-key budgets (docs/decisions.md "Key budgets"): the hold; endings release it with their charge. */
export interface KeyBudgetStore {
  reserve(ask: KeyBudgetAsk): Promise<KeyBudgetResult>;
  /** the request's hold moved to `ask.holder`, or held again there when it is gone (`svc_key_rehold`) */
  rehold(ask: KeyBudgetAsk): Promise<KeyBudgetResult>;
}

/** The pipeline's stores (`sqlStores`). */
export interface InferenceStores {
  offers: OfferStore;
  ceilings: CeilingStore;
  escrow: EscrowStore;
  settlement: SettlementStore;
  budgets: KeyBudgetStore;
}
