import { randomUUID } from "node:crypto";
import type { Db } from "../../adapters/db.js";
import type { ClearRecordedEvent, EventBus, RoutingChange } from "../../adapters/pubsub.js";
import type { GateLeases } from "../../adapters/redis/gate-leases.js";
import type { InFlightRegistry } from "../../adapters/redis/in-flight.js";
import type { RedisKeys } from "../../adapters/redis/keys.js";
import { type Sql, sqlRunner } from "../../adapters/sql.js";
import type { Config } from "../../config.js";
import { Batcher } from "../../lib/batcher.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import { burnMicroDiem, computeCharge, formatDecimal6, maxBig, type TextPricing } from "../../lib/money.js";
import type { SecretBox } from "../../lib/secret-box.js";
import { eligibleOffers } from "../market/eligibility.js";
import { type AdmissionPlan, planAdmission } from "./admission.js";
import { type Holder, HolderLease, type Slice } from "./escrow.js";
import { type BookEntry, OfferBook } from "./offer-book.js";

/** SPEC "What the service does" 4: up to five distinct supplier keys per request. */
export const MAX_ATTEMPTS = 5;
/** In-flight completions per supplier key (a supplier key is one upstream account's rate limits). */
export const SUPPLIER_KEY_MAX_IN_FLIGHT = 16;
/** How long a request waits for a busy supplier key before 503 key_wait_timeout. */
export const KEY_WAIT_MS = 5_000;
/** A stream's in-flight record lives this long unless renewed (it goes when the record is written). */
export const REQUEST_LEASE_MS = 15 * 60_000;
/** A long stream renews its in-flight record this often (gate slots and escrow are the process's, kept by heartbeats). */
export const RENEW_EVERY_MS = 5 * 60_000;
/** A key that answered "out of capacity" (upstream 402) is not routed for this long. */
export const EXHAUSTED_COOLDOWN_MS = 60_000;
const KEY_CACHE_MS = 60_000;
/** Expired escrow holders the sweeper releases per pass. */
const SWEEP_LIMIT = 500;
/** Request endings per group commit (see Batcher). One batch in flight keeps a process's endings in order. */
const BATCH = { maxBatch: 64, maxInFlight: 1 };
/** Plans per request: a stale cached ceiling or a balance too short for the uncapped plan re-plans. */
const MAX_PLANS = 4;
/** Top-ups per admission before giving up (each either grants or changes what is asked). */
const MAX_TAKES = 16;
/** No balance known yet: plan as if unlimited (the top-up checks the real one atomically). */
const UNLIMITED = 1n << 62n;

export type RouteKind = "chat" | "responses";

export interface RoutableModel {
  id: string;
  modality: "text" | "image" | "video";
  status: "live" | "coming_soon";
  tier: "frontier" | "small";
  pricing: TextPricing;
  maxCompletionTokens: number | null;
}

export interface OpenInput {
  accountId: string;
  apiKeyId: string;
  route: RouteKind;
  /** the model as the buyer sent it (bare or `svc/`) */
  model: string;
  stream: boolean;
  promptEstimate: number;
  requestedMaxTokens: number | undefined;
}

export interface Attempt {
  ordinal: number;
  offerId: string;
  upstreamKeyId: string;
  supplierAccountId: string;
  priceCentsPerDollar: number;
  /** the supplier's upstream secret (decrypted; never logged) */
  secret: string;
  /** the key's last known balance when the attempt began (caps a stream_incomplete estimate) */
  keyBalanceMicroDiem: bigint | null;
  /** whether it still holds its slot of the supplier key's gate (given back exactly once) */
  keyHeld: boolean;
  /** the slice of the offer this attempt's maximum burn is admitted against */
  offerSlice: Slice;
  startedAt: Date;
}

/** One attempt as it is recorded when the request ends. */
interface AttemptRecord {
  ordinal: number;
  key: string;
  offer: string;
  price: number;
  outcome:
    | "succeeded"
    | "incomplete"
    | "retryable_failure"
    | "supplier_exhausted"
    | "supplier_auth_failed"
    | "aborted"
    | "request_rejected";
  status: number | null;
  detail: string | null;
  started: string;
  ended: string;
}

/** State of one routed request. */
export interface RoutingSession {
  requestId: string;
  supportReference: string;
  accountId: string;
  apiKeyId: string;
  route: RouteKind;
  model: RoutableModel;
  stream: boolean;
  ceilingCents: number;
  plan: AdmissionPlan;
  /** supplier keys already tried (distinct keys for fall-forward) */
  tried: string[];
  /** attempts so far (a busy key's release counts) */
  ordinals: number;
  attempt: Attempt | null;
  /** ended attempts, recorded with the request when it ends */
  attempts: AttemptRecord[];
  /** the buyer slice the maximum charge is admitted against (null until admitted) */
  buyerSlice: Slice | null;
  /** slices this request took into or drew on: each is looked at for a give-back when it ends */
  touched: Set<Slice>;
  /** the gate slots it holds besides its attempt's supplier key (the buyer key's, the small-model tier's) */
  gates: string[];
  startedAt: Date;
  firstByteAt: Date | null;
  done: boolean;
  /** when its in-flight record was last renewed (epoch ms) */
  renewedAt?: number;
  /** the buyer's own max_tokens (re-planning needs it) */
  requestedMaxTokens?: number | undefined;
  /** admission plans made so far */
  plans?: number;
  /** where the service's time went, for `Server-Timing` (ms, `performance.now()` based) */
  timing: RequestTiming;
  /** a stream's in-flight record being stored (see InFlightRegistry) */
  bridged?: Promise<void>;
}

/** Milliseconds per phase of one request (see `serverTiming`). */
export interface RequestTiming {
  /** `performance.now()` when admission began */
  start: number;
  /** gates, plan and escrow until the first attempt could call the upstream (key waits included) */
  admitMs?: number;
  /** from then until the answer (buffered) or the first content (streamed), fall-forwards included */
  upstreamMs?: number;
  /** the settlement's commit */
  settleMs?: number;
}

/**
 * `Server-Timing` (W3C): where the service spent a request's time, in ms — `admit` (gates, plan,
 * escrow), `upstream` (to the answer or first content, fall-forwards included), `settle` (the commit).
 * Phases not reached yet are left out (a stream's headers leave before its settlement).
 */
export function serverTiming(session: RoutingSession): string {
  const t = session.timing;
  const parts: string[] = [];
  for (const [name, ms] of [
    ["admit", t.admitMs],
    ["upstream", t.upstreamMs],
    ["settle", t.settleMs],
  ] as const) {
    if (ms !== undefined) parts.push(`${name};dur=${ms.toFixed(3)}`);
  }
  return parts.join(", ");
}

export type AttemptFailure =
  /** 5xx, 429, timeouts, resets, a stream that closed before its first content: fall forward */
  | { kind: "retryable"; status?: number; detail: string }
  /** upstream 402: the supplier's key is out of capacity: cool it down, fall forward */
  | { kind: "supplier_exhausted"; status?: number; detail: string }
  /** upstream 401/403: the key is bad: mark it, fall forward */
  | { kind: "supplier_auth"; status?: number; detail: string };

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens?: number;
}

export interface Settled {
  costMicroUsdc: bigint;
  clearingPriceCents: number;
  burnMicroDiem: bigint;
  balanceRemainingMicroUsdc: bigint;
  supportReference: string;
  requestId: string;
}

export interface RouterDeps {
  db: Db;
  /** pg pool for the hot path (stored functions; see migration router_escrow) */
  sql: Sql;
  config: Config;
  clock: Clock;
  bus: EventBus;
  /** in-flight gates (buyer keys, supplier keys, the small-model tier), leased per process */
  gates: GateLeases;
  keys: RedisKeys;
  secrets: SecretBox;
  resolveModel: (id: string) => Promise<RoutableModel>;
  /** after an upstream 402: refresh the key's balance (best effort, async) */
  onKeyExhausted?: (upstreamKeyId: string) => Promise<void>;
  /** streamed requests in flight, so their support reference resolves before their record is written */
  inFlight?: InFlightRegistry;
  /** an API key revoked in another process: drop it from this process's authentication cache */
  forgetApiKey?: (apiKeyId: string) => void;
}

/**
 * The router (SPEC "What the service does" 3–6): clears each request against the cheapest eligible
 * offer under the buyer's ceiling, admits the buyer's maximum charge and the offer's maximum burn
 * against this process's escrow slices (taken in Postgres with the hold's guards, so concurrent
 * requests can never overdraw a balance or oversell an offer, across every process), falls forward
 * across up to five supplier keys, and settles the exact amount in one transaction, which also
 * writes the request's records and gives back what its slices no longer need. A process that dies
 * leaves slices that go back when its lease expires.
 */
export class RouterService {
  private readonly keyCache = new Map<string, { secret: string; at: number }>();
  /** each account's ceiling as last seen here (a top-up refuses a stale one; changes are fanned out) */
  private readonly ceilings = new Map<string, number>();
  private readonly run;
  private readonly ends: Batcher<EndItem, bigint>;
  private readonly lease: HolderLease;
  readonly book: OfferBook;
  private readonly takeStats = { takes: 0, admitted: 0, inMemory: 0 };
  private stopListening: (() => void) | null = null;
  /** events of the clears settled this tick, published together when the tick ends (see `published`) */
  private readonly pending = {
    clears: [] as ClearRecordedEvent[],
    accounts: new Map<string, { topic: "balanceChanged" | "earningsChanged"; accountId: string; at: Date }>(),
  };

  constructor(private readonly deps: RouterDeps) {
    this.run = sqlRunner(deps.sql);
    this.lease = new HolderLease(deps.sql, deps.clock, randomUUID);
    this.book = new OfferBook(deps.sql, deps.clock);
    const endBatch = async (items: EndItem[]) => {
      // a named statement: each pooled connection parses and plans it once
      const r = await deps.sql.query<{ idx: number; confirmed: bigint }>({
        name: "svc_end_batch",
        text: "SELECT * FROM svc_end_batch($1::jsonb)",
        values: [JSON.stringify(items)],
      });
      return byIndex(r.rows, items.length).map((row) => BigInt(row.confirmed));
    };
    this.ends = new Batcher(endBatch, async (i) => (await endBatch([i]))[0] ?? 0n, BATCH);
  }

  /** This process's in-flight gate leases. */
  get gates(): GateLeases {
    return this.deps.gates;
  }

  /** Group-commit and escrow figures (observability, tests). */
  batchStats() {
    return { ends: { ...this.ends.stats }, escrow: { ...this.takeStats } };
  }

  /**
   * Publishes a clear's events once the tick ends, so the clears one commit settled share them: the
   * public feed gets one message with all of them (`clearsRecorded`), and `balanceChanged` /
   * `earningsChanged`, which only say "read again", go once per account.
   */
  private published(clear: ClearRecordedEvent, buyerId: string, supplierId: string, at: Date): void {
    const p = this.pending;
    if (p.clears.length === 0) {
      queueMicrotask(() => {
        const clears = p.clears;
        const accounts = [...p.accounts.values()];
        p.clears = [];
        p.accounts.clear();
        this.deps.bus.publish("clearsRecorded", clears);
        for (const e of accounts) {
          this.deps.bus.publish(e.topic, e.accountId, {
            accountId: e.accountId,
            kind: "clear",
            at: e.at.toISOString(),
          });
        }
      });
    }
    p.clears.push(clear);
    p.accounts.set(`balanceChanged:${buyerId}`, { topic: "balanceChanged", accountId: buyerId, at });
    p.accounts.set(`earningsChanged:${supplierId}`, { topic: "earningsChanged", accountId: supplierId, at });
  }

  /** A supply change (here, or heard from another process): read the offer book again before routing. */
  invalidateBook(): void {
    this.book.invalidate();
  }

  /** The buyer changed their ceiling: plan this account's next request from the database. */
  forgetCeiling(accountId: string): void {
    this.ceilings.delete(accountId);
  }

  /** Applies a change heard from another process (or this one) through `routingChanged`. */
  applyChange(change: RoutingChange): void {
    if (change.kind === "supply_changed") this.invalidateBook();
    else if (change.kind === "ceiling_changed") this.forgetCeiling(change.id);
    else if (change.kind === "api_key_revoked") this.deps.forgetApiKey?.(change.id);
    else if (change.kind === "gate_pressure") this.deps.gates.yieldIdle(change.id);
  }

  /**
   * Starts hearing supply changes (`capacityChanged`) and cache invalidations (`routingChanged`)
   * from every process. Started by the first request; a process that never routes never listens.
   */
  private listen(): void {
    if (this.stopListening) return;
    const capacity = this.deps.bus.subscribe("capacityChanged");
    const routing = this.deps.bus.subscribe("routingChanged");
    this.stopListening = () => {
      void capacity.return(undefined);
      void routing.return(undefined);
    };
    const drain = async <T>(it: AsyncIterable<T>, on: (e: T) => void) => {
      try {
        for await (const e of it) on(e);
      } catch (e) {
        logger.warn({ err: e }, "routing events stopped");
      }
    };
    void drain(capacity, () => this.invalidateBook());
    void drain(routing, (e) => this.applyChange(e));
  }

  /** Stops listening and gives every escrow slice and gate slot back (call after the server drained). */
  async close(): Promise<void> {
    this.stopListening?.();
    await Promise.all([this.lease.close(), this.deps.gates.close()]);
  }

  /**
   * Admits a request: resolves the model (404/400), takes the buyer key's in-flight slot (429),
   * plans the completion cap and the maximum charge (402), and admits it on the first offer (503s).
   * The request's record is written when it ends (refusals included) with its support reference.
   */
  async open(input: OpenInput): Promise<RoutingSession> {
    const start = performance.now();
    this.listen();
    const model = await this.deps.resolveModel(input.model);
    if (model.modality !== "text") {
      throw new DomainError(
        "unsupported_modality",
        `${model.id} is a ${model.modality} model; it cannot be called through ${input.route === "chat" ? "chat completions" : "responses"}.`,
      );
    }
    if (model.status !== "live") {
      throw new DomainError(
        "model_not_live",
        `${model.id} is listed but not live yet (coming_soon); pick a live model from /v1/models.`,
      );
    }
    const requestId = randomUUID();
    const gates = this.deps.gates;
    const buyerGate = this.deps.keys.apiKeyInFlight(input.apiKeyId);
    // the ceiling as last seen by this process (a top-up verifies it)
    const ceiling = this.ceilings.get(input.accountId) ?? (await this.readCeiling(input.accountId));
    // the buyer key's slot: in memory while this process holds a spare one (see GateLeases)
    if (!(await gates.acquire(buyerGate, this.deps.config.limits.keyMaxInFlight))) {
      throw new DomainError("key_concurrency_limit", "Too many completions in flight on this API key.", {
        retryAfterSeconds: 1,
      });
    }
    const held = [buyerGate];
    // SPEC 11: frontier models are the promoted tier; small-model volume may be throttled
    const smallLimit = this.deps.config.limits.smallModelMaxInFlight;
    if (model.tier === "small" && smallLimit > 0) {
      const smallGate = this.deps.keys.smallModelGate();
      let ok = false;
      try {
        ok = await gates.acquire(smallGate, smallLimit);
      } finally {
        // refused or failed: the buyer key's slot goes back
        if (!ok) gates.release(buyerGate);
      }
      if (!ok) {
        throw new DomainError(
          "model_throttled",
          `${model.id} is a small model and its volume is throttled right now; retry shortly or use a frontier model.`,
          { retryAfterSeconds: 1 },
        );
      }
      held.push(smallGate);
    }
    let session: RoutingSession | null = null;
    try {
      // the balance is unknown, so the first plan is uncapped and the buyer's slice (or its
      // top-up) decides
      session = {
        requestId,
        supportReference: randomUUID(),
        accountId: input.accountId,
        apiKeyId: input.apiKeyId,
        route: input.route,
        model,
        stream: input.stream,
        ceilingCents: ceiling,
        plan: {
          promptEstimate: input.promptEstimate,
          admittedMaxTokens: 0,
          maxBurnMicroDiem: 0n,
          maxChargeMicroUsdc: 0n,
        },
        tried: [],
        ordinals: 0,
        attempt: null,
        attempts: [],
        buyerSlice: null,
        touched: new Set(),
        gates: held,
        startedAt: this.deps.clock.now(),
        firstByteAt: null,
        done: false,
        requestedMaxTokens: input.requestedMaxTokens,
        plans: 0,
        timing: { start },
      };
      this.plan(session, UNLIMITED);
      await this.nextAttempt(session);
      session.timing.admitMs = performance.now() - start;
      if (session.stream && this.deps.inFlight) {
        // the reference is in the stream's headers before the record exists: bridge it (not awaited)
        session.bridged = this.deps.inFlight
          .put(
            {
              requestId: session.requestId,
              supportReference: session.supportReference,
              accountId: session.accountId,
              route: session.route,
              model: session.model.id,
              stream: true,
              maxPriceCents: session.ceilingCents,
              startedAt: session.startedAt.toISOString(),
            },
            REQUEST_LEASE_MS,
          )
          .catch((e) => logger.warn({ err: e }, "in-flight record not stored"));
      }
      return session;
    } catch (e) {
      // a refusal after the session existed ended it through fail(); anything else still holding
      // escrow is ended here (recorded); an error before any escrow (a revoked key) leaves nothing
      if (session && !session.done && (session.touched.size > 0 || session.attempts.length > 0)) {
        await this.abort(session, e instanceof DomainError ? e.code : "internal_error");
      } else if (!session?.done) {
        for (const g of held) gates.release(g);
        if (session) session.gates = [];
      }
      throw e;
    }
  }

  /**
   * Admits the request on the next cheapest eligible offer on a key not tried yet, against this
   * process's slices (topped up in Postgres when too small). Waits up to KEY_WAIT_MS for a busy
   * supplier key. On the first call it also admits the buyer's maximum charge.
   * @throws 401 (a revoked key, seen by a top-up), 402 insufficient_balance,
   *   503 pool_empty / no_eligible_supply / insufficient_routable_at_price / key_wait_timeout,
   *   502 upstream_error when fall-forward is exhausted
   */
  async nextAttempt(session: RoutingSession): Promise<Attempt> {
    if (session.tried.length >= MAX_ATTEMPTS) {
      throw await this.fail(
        session,
        new DomainError(
          "upstream_error",
          `The upstream could not complete the request after ${MAX_ATTEMPTS} supplier keys; safe to retry.`,
        ),
      );
    }
    const deadline = Date.now() + KEY_WAIT_MS;
    let busy: string[] = [];
    let freshBook = false;
    let takes = 0;
    for (;;) {
      const holderOrPromise = this.lease.current();
      const holder = holderOrPromise instanceof Promise ? await holderOrPromise : holderOrPromise;
      const book = await this.book.current();
      if (holder.lost) continue;
      // from here to the admission nothing awaits: what is free cannot change under us
      const plan = session.plan;
      const buyer = session.buyerSlice ?? holder.slice("buyer", session.accountId);
      const usdcShort = session.buyerSlice ? 0n : plan.maxChargeMicroUsdc - buyer.free;
      const now = this.deps.clock.now();
      let waitingOnBusy = busy.length > 0;
      let pick: { entry: BookEntry; slice: Slice; short: bigint } | null = null;
      for (const entry of book) {
        if (!this.routable(entry, session.ceilingCents, now)) continue;
        if (session.tried.includes(entry.upstreamKeyId)) continue;
        if (
          busy.includes(entry.upstreamKeyId) ||
          this.deps.gates.inUse(this.supplierGate(entry.upstreamKeyId)) >= SUPPLIER_KEY_MAX_IN_FLIGHT
        ) {
          waitingOnBusy = true;
          continue;
        }
        const slice = holder.slice("offer", entry.offerId);
        const short = plan.maxBurnMicroDiem - slice.free;
        if (short > 0n && entry.routableMicroDiem < short) {
          holder.tidy(slice);
          continue;
        }
        pick = { entry, slice, short };
        break;
      }
      if (usdcShort <= 0n && pick && pick.short <= 0n) {
        // admitted in memory: no database round trip
        if (!session.buyerSlice) {
          buyer.used += plan.maxChargeMicroUsdc;
          session.buyerSlice = buyer;
          session.touched.add(buyer);
        }
        const attempt = await this.admitOffer(session, pick.entry, pick.slice, now);
        if (attempt) {
          this.takeStats.admitted++;
          if (takes === 0) this.takeStats.inMemory++;
          return attempt;
        }
        busy.push(pick.entry.upstreamKeyId);
        continue;
      }
      if (usdcShort <= 0n && !pick) {
        holder.tidy(buyer);
        if (!freshBook) {
          // never refuse on a stale book: read it again first
          await this.book.fresh();
          freshBook = true;
          continue;
        }
        if (waitingOnBusy) {
          if (Date.now() > deadline) {
            throw await this.fail(
              session,
              new DomainError("key_wait_timeout", "Timed out waiting for a free upstream key; retry.", {
                retryAfterSeconds: 1,
              }),
            );
          }
          busy = [];
          await new Promise((res) => setTimeout(res, 25));
          continue;
        }
        throw await this.fail(session, await this.noSupply(session));
      }
      // a slice is too small: wait for a top-up already under way, or take one
      if (usdcShort > 0n && buyer.taking) {
        await buyer.taking.catch(() => undefined);
        continue;
      }
      if (pick && pick.short > 0n && pick.slice.taking) {
        await pick.slice.taking.catch(() => undefined);
        continue;
      }
      if (++takes > MAX_TAKES) {
        throw await this.fail(session, new DomainError("internal_error", "Could not secure escrow for this request."));
      }
      const r = await this.take(
        session,
        holder,
        usdcShort > 0n ? { slice: buyer, short: usdcShort } : null,
        pick && pick.short > 0n ? pick : null,
        now,
      );
      if (r === "retry") continue;
      if (r === "key_inactive") {
        throw new DomainError("authentication_failed", "Invalid or revoked API key.");
      }
      if (r.outcome === "stale_ceiling" || r.outcome === "insufficient_balance") {
        // planned with a stale ceiling or more than the balance affords: plan again with the
        // account's values as the top-up just read them (plus what this process already holds)
        if (r.ceiling !== null) {
          this.ceilings.set(session.accountId, Number(r.ceiling));
          session.ceilingCents = Number(r.ceiling);
        }
        const available = BigInt(r.available ?? 0n) + (buyer.free > 0n ? buyer.free : 0n);
        if ((session.plans ?? 0) >= MAX_PLANS || !this.plan(session, available)) {
          throw await this.fail(session, this.insufficientBalance(session));
        }
      }
    }
  }

  /** Is the offer routable at this ceiling now (as far as this process knows)? */
  private routable(entry: BookEntry, ceilingCents: number, now: Date): boolean {
    const t = now.getTime();
    return (
      entry.eligible &&
      entry.priceCentsPerDollar <= ceilingCents &&
      entry.expiresAt > t &&
      (entry.cooldownUntil === null || entry.cooldownUntil <= t)
    );
  }

  /**
   * One top-up (`svc_escrow_take`): the buyer's slice and/or the chosen offer's, in one short
   * transaction. Grants land in the slices; the book learns what is left on the offer.
   */
  private async take(
    session: RoutingSession,
    holder: Holder,
    buyerPart: { slice: Slice; short: bigint } | null,
    offer: { entry: BookEntry; slice: Slice; short: bigint } | null,
    now: Date,
  ): Promise<"retry" | "key_inactive" | TakeRow> {
    const buyer = buyerPart?.slice ?? null;
    this.takeStats.takes++;
    const plan = session.plan;
    let done!: () => void;
    const taking = new Promise<void>((res) => {
      done = res;
    });
    if (buyer) buyer.taking = taking;
    if (offer) offer.slice.taking = taking;
    try {
      const usdcWant = buyer ? buyer.want(plan.maxChargeMicroUsdc) : 0n;
      const diemWant = offer ? offer.slice.want(plan.maxBurnMicroDiem) : 0n;
      const r = await this.deps.sql.query<TakeRow>({
        name: "svc_escrow_take",
        text: `SELECT * FROM svc_escrow_take($1::uuid, $2::uuid, $3::uuid, $4::int, $5::bigint, $6::bigint, $7::uuid,
                                       $8::bigint, $9::bigint, $10::timestamptz)`,
        values: [
          holder.id,
          buyer ? session.accountId : null,
          session.apiKeyId,
          session.ceilingCents,
          buyerPart ? buyerPart.short.toString() : "0",
          usdcWant.toString(),
          offer ? offer.entry.offerId : null,
          offer ? offer.short.toString() : "0",
          diemWant.toString(),
          now,
        ],
      });
      const row = r.rows[0];
      if (!row) throw new Error("svc_escrow_take returned nothing");
      if (row.outcome === "holder_lost") {
        this.lease.lose(holder);
        return "retry";
      }
      if (row.outcome === "key_inactive") return "key_inactive";
      if (buyer && BigInt(row.granted_usdc) > 0n) {
        buyer.total += BigInt(row.granted_usdc);
        session.touched.add(buyer);
      }
      if (offer) {
        if (BigInt(row.granted_diem) > 0n) {
          offer.slice.total += BigInt(row.granted_diem);
          session.touched.add(offer.slice);
        }
        if (row.outcome === "ok" || row.outcome === "offer_short") {
          offer.entry.routableMicroDiem = BigInt(row.routable ?? 0n);
          if (row.key_balance !== null) offer.entry.keyBalanceMicroDiem = BigInt(row.key_balance);
          if (row.outcome === "offer_short" && BigInt(row.routable ?? 0n) === 0n) offer.entry.eligible = false;
        }
      }
      return row;
    } finally {
      if (buyer) buyer.taking = null;
      if (offer) offer.slice.taking = null;
      done();
      if (buyer) holder.tidy(buyer);
      if (offer) holder.tidy(offer.slice);
    }
  }

  /** Admits the attempt on an offer whose slice covers it: takes the supplier key's gate slot. */
  private async admitOffer(
    session: RoutingSession,
    entry: BookEntry,
    slice: Slice,
    now: Date,
  ): Promise<Attempt | null> {
    const burn = session.plan.maxBurnMicroDiem;
    slice.used += burn;
    session.touched.add(slice);
    const ordinal = ++session.ordinals;
    const key = entry.upstreamKeyId;
    let ok: boolean;
    try {
      ok = await this.deps.gates.acquire(this.supplierGate(key), SUPPLIER_KEY_MAX_IN_FLIGHT);
    } catch (e) {
      slice.used -= burn;
      throw e;
    }
    if (!ok) {
      // the key is at its in-flight limit across processes: give the admission back, next offer
      slice.used -= burn;
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
    const secret = this.openSecret(key, entry);
    session.tried.push(key);
    session.attempt = {
      ordinal,
      offerId: entry.offerId,
      upstreamKeyId: key,
      supplierAccountId: entry.supplierAccountId,
      priceCentsPerDollar: entry.priceCentsPerDollar,
      secret,
      keyBalanceMicroDiem: entry.keyBalanceMicroDiem,
      keyHeld: true,
      offerSlice: slice,
      startedAt: now,
    };
    return session.attempt;
  }

  /** The gate of a supplier key's in-flight completions. */
  private supplierGate(upstreamKeyId: string): string {
    return this.deps.keys.upstreamKeyInFlight(upstreamKeyId);
  }

  /**
   * The current attempt failed before anything reached the buyer: release its admission and key
   * slot, note why, act on the key (cooldown, auth mark), and admit on the next offer.
   */
  async fallForward(session: RoutingSession, failure: AttemptFailure): Promise<Attempt> {
    await this.endAttempt(session, failure);
    return this.nextAttempt(session);
  }

  /**
   * Settles a completion in one transaction: buyer debit out of its slice of confirmed funds,
   * supplier credit (share), platform fee, offer remaining decreased (depleted at zero), the clear,
   * the request and attempt records, and what the slices no longer need given back. Burn = usage ×
   * the catalog's pricing, never above the admitted maximum. If it does not commit: nothing is
   * charged, the request is recorded as failed, 500 settle_failed.
   */
  async settle(session: RoutingSession, usage: Usage, opts: { incomplete?: boolean } = {}): Promise<Settled> {
    const attempt = session.attempt;
    if (!attempt || session.done || !session.buyerSlice) {
      throw new DomainError("internal_error", "settle without an attempt");
    }
    let burn = burnMicroDiem(session.model.pricing, usage);
    if (burn > session.plan.maxBurnMicroDiem) burn = session.plan.maxBurnMicroDiem;
    if (opts.incomplete && attempt.keyBalanceMicroDiem !== null && burn > attempt.keyBalanceMicroDiem) {
      burn = attempt.keyBalanceMicroDiem; // SPEC Events 6: capped at the supplier's pre-call balance
    }
    const charge = computeCharge(burn, attempt.priceCentsPerDollar, this.deps.config.fees.platformFeeBps);
    const now = this.deps.clock.now();
    const settleStart = performance.now();
    const buyer = session.buyerSlice;
    this.endAttemptInMemory(session, attempt, opts.incomplete ? "incomplete" : "succeeded", null, now);
    // the charge leaves the slices now; what they no longer need goes back in the same commit
    buyer.total -= charge.grossMicroUsdc;
    attempt.offerSlice.total -= burn;
    const item = this.endItem(session, now, {
      status: opts.incomplete ? "incomplete" : "succeeded",
      error_code: opts.incomplete ? "stream_incomplete" : null,
      offer: attempt.offerId,
      key: attempt.upstreamKeyId,
      supplier: attempt.supplierAccountId,
      price: attempt.priceCentsPerDollar,
      burn: burn.toString(),
      gross: charge.grossMicroUsdc.toString(),
      fee: charge.feeMicroUsdc.toString(),
      share: charge.supplierMicroUsdc.toString(),
      clear: randomUUID(),
      journal: randomUUID(),
      prompt: usage.promptTokens,
      completion: usage.completionTokens,
      cached: usage.cachedTokens ?? 0,
      buyer_holder: buyer.holder,
      offer_holder: attempt.offerSlice.holder,
    });
    let balance: bigint;
    try {
      balance = await this.ends.submit(item.item);
    } catch (e) {
      logger.error({ err: e, requestId: session.requestId }, "settlement did not commit");
      // nothing of it happened: the slices still hold the charge and what was to go back; the
      // request is recorded as failed (its attempt aborted) and its slices looked at again
      buyer.total += charge.grossMicroUsdc;
      attempt.offerSlice.total += burn;
      item.undo();
      const last = session.attempts[session.attempts.length - 1];
      if (last) last.outcome = "aborted";
      this.freeKey(attempt);
      throw await this.fail(
        session,
        new DomainError("settle_failed", "Settlement did not commit; nothing was charged. Safe to retry.", {
          supportReference: session.supportReference,
        }),
      );
    }
    session.done = true;
    session.timing.settleMs = performance.now() - settleStart;
    this.releaseSlots(session, attempt);
    void this.unbridge(session);
    this.published(
      {
        at: now.toISOString(),
        model: session.model.id,
        modality: "text",
        priceCentsPerDollar: attempt.priceCentsPerDollar,
        burnMicroDiem: burn,
        grossMicroUsdc: charge.grossMicroUsdc,
      },
      session.accountId,
      attempt.supplierAccountId,
      now,
    );
    return {
      costMicroUsdc: charge.grossMicroUsdc,
      clearingPriceCents: attempt.priceCentsPerDollar,
      burnMicroDiem: burn,
      balanceRemainingMicroUsdc: balance,
      supportReference: session.supportReference,
      requestId: session.requestId,
    };
  }

  /**
   * Ends a request without a charge (the buyer's 4xx relayed from the upstream, a client abort before
   * any content, an unexpected error): its admissions and slots are released, the record says why.
   */
  async abort(
    session: RoutingSession,
    errorCode: string,
    outcome: "request_rejected" | "aborted" = "aborted",
  ): Promise<void> {
    if (session.done) return;
    session.done = true;
    const now = this.deps.clock.now();
    const attempt = session.attempt;
    if (attempt) this.endAttemptInMemory(session, attempt, outcome, null, now);
    const item = this.endItem(session, now, { status: "failed", error_code: errorCode });
    try {
      await this.ends.submit(item.item);
    } catch (e) {
      item.undo();
      // a give-back that cannot commit (a slice the sweeper took from a stalled process) must not
      // cost the record: write it alone; the slices stay as they are
      const retry = item.item.returns.length > 0 ? this.ends.submit({ ...item.item, returns: [] }) : Promise.reject(e);
      await retry.catch((err: unknown) =>
        logger.error({ err, requestId: session.requestId }, "could not record an ended request"),
      );
    }
    void this.unbridge(session);
    this.releaseSlots(session, attempt);
  }

  /** The stream's record is written (or could not be): its in-flight record goes. */
  private async unbridge(session: RoutingSession): Promise<void> {
    if (!session.bridged || !this.deps.inFlight) return;
    await session.bridged;
    await this.deps.inFlight.drop(session.supportReference).catch(() => undefined);
  }

  private async readCeiling(accountId: string): Promise<number> {
    const rows = await this.deps.sql.query<{ ceiling: number }>(
      "SELECT max_price_cents_per_dollar AS ceiling FROM accounts WHERE id = $1",
      [accountId],
    );
    const row = rows.rows[0];
    if (!row) throw new DomainError("authentication_failed", "Account not found.");
    if (this.ceilings.size >= 100_000) this.ceilings.clear();
    this.ceilings.set(accountId, Number(row.ceiling));
    return Number(row.ceiling);
  }

  /** (Re-)plans the completion cap and the maximum charge; false when even the minimum is unaffordable. */
  private plan(session: RoutingSession, availableMicroUsdc: bigint): boolean {
    session.plans = (session.plans ?? 0) + 1;
    const plan = planAdmission({
      pricing: session.model.pricing,
      promptEstimate: session.plan.promptEstimate,
      requestedMaxTokens: session.requestedMaxTokens,
      modelMaxCompletionTokens: session.model.maxCompletionTokens,
      ceilingCents: session.ceilingCents,
      availableMicroUsdc,
    });
    if (!plan) return false;
    session.plan = plan;
    return true;
  }

  /**
   * Keeps a long-running stream's in-flight record alive (its gate slots and escrow are the
   * process's, kept by their heartbeats). Cheap to call often; works at most every RENEW_EVERY_MS.
   */
  async renew(session: RoutingSession, force = false): Promise<void> {
    const now = Date.now();
    if (session.done || (!force && now - (session.renewedAt ?? session.startedAt.getTime()) < RENEW_EVERY_MS)) return;
    session.renewedAt = now;
    if (session.bridged)
      await this.deps.inFlight?.renew(session.supportReference, REQUEST_LEASE_MS).catch(() => undefined);
  }

  /** Marks the first byte sent to the buyer (timings). */
  markFirstByte(session: RoutingSession): void {
    session.firstByteAt ??= this.deps.clock.now();
    const t = session.timing;
    if (t.upstreamMs === undefined) t.upstreamMs = performance.now() - t.start - (t.admitMs ?? 0);
  }

  /**
   * Sweeper (worker): gives back the escrow slices of holders whose lease expired (their process
   * died). Requests in flight there leave no record and no charge. Idempotent.
   */
  async releaseExpiredHolds(): Promise<{ released: number }> {
    const r = await this.deps.sql.query<{ released: number }>(
      "SELECT svc_release_expired($1::timestamptz, $2::int) AS released",
      [this.deps.clock.now(), SWEEP_LIMIT],
    );
    return { released: Number(r.rows[0]?.released ?? 0) };
  }

  /** This process's holder id and slices (tests, diagnostics). */
  escrowSnapshot(): { holder: string | null; buyers: number; offers: number } {
    const h = this.lease.peek();
    return { holder: h?.id ?? null, buyers: h?.buyers.size ?? 0, offers: h?.offers.size ?? 0 };
  }

  /** Renews the holder's lease now (tests; the heartbeat does it every HOLDER_RENEW_MS). */
  heartbeat(): Promise<void> {
    return this.lease.heartbeat();
  }

  // ─────────────────────────────── internals ───────────────────────────────

  private openSecret(upstreamKeyId: string, entry: BookEntry): string {
    const hit = this.keyCache.get(upstreamKeyId);
    if (hit && Date.now() - hit.at < KEY_CACHE_MS) return hit.secret;
    const secret = this.deps.secrets.open(entry.sealed, entry.supplierAccountId);
    this.keyCache.set(upstreamKeyId, { secret, at: Date.now() });
    return secret;
  }

  /**
   * The ending of a request as one item of `svc_end_batch`: its record, its attempts, its charge
   * (when given) and the give-backs of every slice it touched (deducted from the slices now;
   * `undo` puts them back if the item does not commit).
   */
  private endItem(
    session: RoutingSession,
    now: Date,
    end: Partial<EndItem> & Pick<EndItem, "status" | "error_code">,
  ): { item: EndItem; undo: () => void } {
    if (session.buyerSlice) {
      session.buyerSlice.used -= session.plan.maxChargeMicroUsdc;
      session.buyerSlice = null;
    }
    const returns: EscrowReturn[] = [];
    const touched = [...session.touched];
    const undo: Array<() => void> = [
      () => {
        for (const t of touched) session.touched.add(t);
      },
    ];
    for (const slice of touched) {
      const back = slice.giveBack();
      if (back > 0n) {
        returns.push(
          slice.kind === "buyer"
            ? { holder: slice.holder, account: slice.id, amount: back.toString() }
            : { holder: slice.holder, offer: slice.id, amount: back.toString() },
        );
        undo.push(() => {
          slice.total += back;
        });
      }
    }
    session.touched.clear();
    const item: EndItem = {
      request: session.requestId,
      support: session.supportReference,
      account: session.accountId,
      api_key: session.apiKeyId,
      route: session.route,
      model: session.model.id,
      stream: session.stream,
      ceiling: session.ceilingCents,
      admitted: session.plan.admittedMaxTokens || null,
      attempt_count: session.tried.length,
      started: session.startedAt.toISOString(),
      first_byte: session.firstByteAt?.toISOString() ?? null,
      now: now.toISOString(),
      offer: null,
      key: null,
      supplier: null,
      price: null,
      burn: null,
      gross: null,
      fee: null,
      share: null,
      clear: null,
      journal: null,
      prompt: null,
      completion: null,
      cached: null,
      buyer_holder: null,
      offer_holder: null,
      returns,
      attempts: session.attempts,
      ...end,
    };
    return {
      item,
      undo: () => {
        for (const u of undo) u();
      },
    };
  }

  /** Notes the attempt's outcome and releases its admission on the offer's slice. */
  private endAttemptInMemory(
    session: RoutingSession,
    a: Attempt,
    outcome: AttemptRecord["outcome"],
    failure: AttemptFailure | null,
    now: Date,
  ): void {
    session.attempt = null;
    a.offerSlice.used -= session.plan.maxBurnMicroDiem;
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

  /** Records the failure of the whole request (releasing everything) and returns the error to throw. */
  private async fail(session: RoutingSession, err: DomainError): Promise<DomainError> {
    err.details.supportReference ??= session.supportReference;
    if (!session.done) {
      if (session.attempt) await this.endAttempt(session, null).catch(() => undefined);
      await this.abort(session, err.code);
    }
    return err;
  }

  /** Ends the current attempt: its admission and key slot back, its outcome noted, the key acted on. */
  private async endAttempt(session: RoutingSession, failure: AttemptFailure | null): Promise<void> {
    const a = session.attempt;
    if (!a) return;
    const now = this.deps.clock.now();
    const outcome =
      failure === null
        ? "aborted"
        : failure.kind === "retryable"
          ? "retryable_failure"
          : failure.kind === "supplier_exhausted"
            ? "supplier_exhausted"
            : "supplier_auth_failed";
    this.endAttemptInMemory(session, a, outcome, failure, now);
    this.freeKey(a);
    if (failure?.kind === "supplier_exhausted" || failure?.kind === "supplier_auth") {
      await this.markKey(a.upstreamKeyId, failure.kind, now);
    }
    if (failure?.kind === "supplier_exhausted" && this.deps.onKeyExhausted) {
      this.deps.onKeyExhausted(a.upstreamKeyId).catch(() => undefined);
    }
    if (failure?.kind === "supplier_auth") this.keyCache.delete(a.upstreamKeyId);
  }

  /**
   * An upstream 402 cools the key down (EXHAUSTED_COOLDOWN_MS); a 401/403 marks it auth_failed.
   * Both leave routing at once here and, through `routingChanged`, in every other process.
   */
  private async markKey(upstreamKeyId: string, kind: "supplier_exhausted" | "supplier_auth", now: Date): Promise<void> {
    const until = new Date(now.getTime() + EXHAUSTED_COOLDOWN_MS);
    try {
      if (kind === "supplier_exhausted") {
        await this.deps.sql.query(
          "UPDATE upstream_keys SET cooldown_until = GREATEST(COALESCE(cooldown_until, $2), $2) WHERE id = $1",
          [upstreamKeyId, until],
        );
      } else {
        await this.deps.sql.query(
          "UPDATE upstream_keys SET status = 'auth_failed', auth_failed_at = $2 WHERE id = $1 AND status = 'active'",
          [upstreamKeyId, now],
        );
      }
    } catch (e) {
      logger.error({ err: e, upstreamKeyId }, "could not mark a supplier key");
    }
    this.invalidateBook();
    this.deps.bus.publish("routingChanged", { kind: "supply_changed" });
  }

  /** The request's gate slots back (in memory; see GateLeases), its attempt's supplier key's included. */
  private releaseSlots(session: RoutingSession, attempt: Attempt | null = session.attempt): void {
    for (const g of session.gates) this.deps.gates.release(g);
    session.gates = [];
    if (attempt) this.freeKey(attempt);
  }

  /** The attempt's slot of its supplier key's gate back (once). */
  private freeKey(attempt: Attempt): void {
    if (!attempt.keyHeld) return;
    attempt.keyHeld = false;
    this.deps.gates.release(this.supplierGate(attempt.upstreamKeyId));
  }

  private insufficientBalance(session: RoutingSession): DomainError {
    return new DomainError(
      "insufficient_balance",
      "Confirmed USDC balance is too low for this request (pending top-ups do not count). Fund the account first.",
      { supportReference: session.supportReference },
    );
  }

  /** Why nothing can clear this request (SPEC "Errors" 503 codes). */
  private async noSupply(session: RoutingSession): Promise<DomainError> {
    const now = this.deps.clock.now();
    const atCeiling = await eligibleOffers(this.run, { now, maxPriceCents: session.ceilingCents });
    if (atCeiling.length > 0) {
      const total = atCeiling.reduce((a, o) => a + o.routableMicroDiem, 0n);
      const largest = maxBig(0n, ...atCeiling.map((o) => o.routableMicroDiem));
      const untried = atCeiling.filter((o) => !session.tried.includes(o.upstreamKeyId));
      if (session.tried.length > 0 && untried.every((o) => o.routableMicroDiem < session.plan.maxBurnMicroDiem)) {
        return new DomainError(
          "upstream_error",
          "The upstream could not complete the request on any eligible key; safe to retry.",
        );
      }
      return new DomainError(
        "insufficient_routable_at_price",
        "Offers at or below your ceiling lack the routable DIEM for this request; send a smaller request or retry later.",
        { eligibleRoutableDiem: formatDecimal6(total), maxEligibleOfferDiem: formatDecimal6(largest) },
      );
    }
    const all = await eligibleOffers(this.run, { now, maxPriceCents: 80 });
    if (all.length === 0)
      return new DomainError("pool_empty", "Nothing is posted at any price right now; retry later.", {
        retryAfterSeconds: 30,
      });
    const fits = all.filter((o) => o.routableMicroDiem >= session.plan.maxBurnMicroDiem);
    const cheapest = (fits[0] ?? all[0])?.priceCentsPerDollar ?? null;
    return new DomainError(
      "no_eligible_supply",
      `Supply exists but every posted price is above your ceiling of ${session.ceilingCents}; set maxPriceCentsPerDollar to ${cheapest} and retry.`,
      {
        buyerMaxCents: session.ceilingCents,
        cheapestPostedCents: cheapest,
        routableDiemAboveMax: formatDecimal6(all.reduce((a, o) => a + o.routableMicroDiem, 0n)),
      },
    );
  }
}

interface TakeRow {
  outcome: "ok" | "holder_lost" | "key_inactive" | "stale_ceiling" | "insufficient_balance" | "offer_short";
  granted_usdc: bigint;
  available: bigint | null;
  ceiling: number | null;
  granted_diem: bigint;
  routable: bigint | null;
  key_balance: bigint | null;
}

type EscrowReturn = { holder: string; amount: string } & ({ account: string } | { offer: string });

/** One ended request (fields of the SQL type `svc_end_item`; bigints as strings). */
interface EndItem {
  request: string;
  support: string;
  account: string;
  api_key: string;
  route: RouteKind;
  model: string;
  stream: boolean;
  status: "succeeded" | "incomplete" | "failed";
  error_code: string | null;
  ceiling: number;
  admitted: number | null;
  attempt_count: number;
  started: string;
  first_byte: string | null;
  now: string;
  offer: string | null;
  key: string | null;
  supplier: string | null;
  price: number | null;
  burn: string | null;
  gross: string | null;
  fee: string | null;
  share: string | null;
  clear: string | null;
  journal: string | null;
  prompt: number | null;
  completion: number | null;
  cached: number | null;
  buyer_holder: string | null;
  offer_holder: string | null;
  returns: EscrowReturn[];
  attempts: AttemptRecord[];
}

/** Batch rows back in item order; exactly one per item. */
function byIndex<T extends { idx: number }>(rows: T[], n: number): T[] {
  const out = new Array<T>(n);
  for (const row of rows) out[Number(row.idx)] = row;
  for (let i = 0; i < n; i++) if (!out[i]) throw new Error(`batch row ${i} missing`);
  return out;
}
