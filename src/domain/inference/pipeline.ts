import { randomUUID } from "node:crypto";
import type { EventBus, RoutingChange } from "../../adapters/pubsub.js";
import type { EscrowUsageBoard } from "../../adapters/redis/escrow-usage.js";
import type { GateLeases } from "../../adapters/redis/gate-leases.js";
import type { InFlightRegistry } from "../../adapters/redis/in-flight.js";
import type { RedisKeys } from "../../adapters/redis/keys.js";
import type { Sql } from "../../adapters/sql.js";
import type { Config } from "../../config.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import { type Metrics, noMetrics } from "../../lib/metrics.js";
import { computeCharge, maxBig, minBig } from "../../lib/money.js";
import type { SecretBox } from "../../lib/secret-box.js";
import { NO_PLAN, UNLIMITED_MICRO_USDC } from "./admission.js";
import { type AttemptResult, type Lane, runAttempts } from "./attempt-loop.js";
import { Attempts, type BorrowedKey, type KeyMarks, planRequest } from "./attempts.js";
import { Ceilings } from "./ceilings.js";
import { ClearEvents } from "./clear-events.js";
import { MAX_ATTEMPTS } from "./clearing.js";
import { insufficientBalance, keyWaitTimeout } from "./diagnostics.js";
import { HolderLease, releaseExpiredHolders } from "./escrow.js";
import { EscrowGiveBack } from "./escrow-give-back.js";
import { EscrowUsage } from "./escrow-usage.js";
import { InFlightBridge } from "./in-flight-bridge.js";
import { OfferBook } from "./offer-book.js";
import { takeRequestGates } from "./request-gates.js";
import { listenForChanges } from "./routing-changes.js";
import {
  type Attempt,
  type AttemptingSession,
  type AttemptScope,
  type BurnPricer,
  type InferenceSession,
  type Modality,
  ROUTE_LABEL,
  type RoutableModel,
  type RouteKind,
  type Settled,
  type Usage,
} from "./session.js";
import { type Ending, endItem, Settlement } from "./settlement.js";
import { billIncomplete } from "./usage.js";

export interface PipelineDeps {
  /** pg pool for the hot path (the stored functions of the initial migration) */
  sql: Sql;
  config: Config;
  clock: Clock;
  bus: EventBus;
  /** in-flight gates (buyer keys, supplier keys, the small-model tier), leased per process */
  gates: GateLeases;
  keys: RedisKeys;
  secrets: SecretBox;
  /** the one key-marking path (cooldown, auth failure), shared with the supply service */
  keyHealth: KeyMarks;
  resolveModel: (id: string) => Promise<RoutableModel>;
  /** after an upstream 402: refresh the key's balance (best effort, async) */
  onKeyExhausted?: (upstreamKeyId: string) => Promise<void>;
  /** streamed requests in flight, so their support reference resolves before their record is written */
  inFlight?: InFlightRegistry;
  /** where processes answer what their requests in flight use of a buyer's slice (`EscrowUsage`) */
  escrowUsage?: EscrowUsageBoard;
  /** an API key revoked in another process: drop it from this process's authentication cache */
  forgetApiKey?: (apiKeyId: string) => void;
  /** operators' counters (clears, fall-forwards, settlement failures, key waits) */
  metrics?: Metrics;
}

/** What a modality opens a request with. */
export type OpenInput = {
  accountId: string;
  apiKeyId: string;
  /** the transport's request id (see `Caller.requestId`); a fresh uuid when absent */
  requestId?: string;
  route: RouteKind;
  /** the modality the route serves (a model of another modality is refused) */
  modality: Modality;
  /** the model as the buyer sent it (bare or `svc/`) */
  model: string;
  stream: boolean;
} & (
  | {
      /** the modality's price rules for this request, given the resolved model */
      price: (model: RoutableModel) => BurnPricer;
    }
  | {
      /**
       * price rules that must be asked of the upstream (a video job's quote, on a borrowed key):
       * asked once the request is open — its gate slots taken, its support reference made — so
       * that a refusal (503 `pool_empty`, `key_wait_timeout`, …) ends the request, recorded under
       * that reference like any other refusal (SPEC "Errors" rule 2)
       */
      askPrice: (session: InferenceSession) => Promise<BurnPricer>;
    }
);

/** What a call answers with on the request's answer: the ending to settle, and the call's own value. */
export interface Answered<V> {
  ending: Ending;
  value: V;
}

/** The call's answer: `run` settles `ending` and resolves with `value` and the settlement. */
export function answered<V>(ending: Ending, value: V): { kind: "ok"; value: Answered<V> } {
  return { kind: "ok", value: { ending, value } };
}

/** The price rules of a request whose price is still being asked (`OpenInput.askPrice`): nothing is admissible. */
const UNPRICED: BurnPricer = Object.freeze({ plan: () => undefined, burn: () => 0n });

/**
 * The inference pipeline (SPEC "What the service does" 3–6), the same for every modality:
 * admit (resolve the model, take the request's gate slots, price its maximum burn, admit it on the
 * cheapest eligible offer against this process's escrow slices: `open`) → attempts with
 * fall-forward (`run`, the one attempt loop; admission of each attempt is `Attempts`) → end (settle
 * the actual burn on an `Ending` in one group-committed transaction, or abort and release). A
 * modality supplies validation, pricing, the upstream call and the answer's shape (docs/decisions.md
 * "Inference pipeline"); its buffered and streamed calls are `buffered.ts` and `streamed.ts`.
 */
export class InferencePipeline {
  readonly book: OfferBook;
  private readonly lease: HolderLease;
  private readonly giveBack: EscrowGiveBack;
  private readonly usage: EscrowUsage;
  private readonly ceilings: Ceilings;
  private readonly attempts: Attempts;
  private readonly settlement: Settlement;
  private readonly events: ClearEvents;
  private readonly bridge: InFlightBridge;
  private stopListening: (() => void) | null = null;
  private readonly metrics: Metrics;

  constructor(private readonly deps: PipelineDeps) {
    this.metrics = deps.metrics ?? noMetrics;
    this.lease = new HolderLease(deps.sql, deps.clock, randomUUID);
    // a slice given back outside an ending: its buyer's dashboard reads the balances again
    this.giveBack = new EscrowGiveBack(deps.sql, this.lease, deps.config.limits.escrowLingerMs, undefined, (ids) => {
      const at = deps.clock.now().toISOString();
      for (const id of ids) deps.bus.publish("balanceChanged", id, { accountId: id, kind: "escrow_returned", at });
    });
    this.usage = new EscrowUsage(deps.sql, this.lease, deps.escrowUsage, (id, query) =>
      deps.bus.publish("routingChanged", { kind: "escrow_usage", id, query }),
    );
    this.book = new OfferBook(deps.sql, deps.clock);
    this.ceilings = new Ceilings(deps.sql);
    this.settlement = new Settlement(deps.sql);
    this.events = new ClearEvents(deps.bus);
    this.bridge = new InFlightBridge(deps.inFlight, deps.clock);
    this.attempts = new Attempts({
      ...deps,
      lease: this.lease,
      book: this.book,
      ceilings: this.ceilings,
      onKeyWait: (seconds) => this.metrics.gateWait(seconds),
      onBalancePressure: (accountId) => deps.bus.publish("routingChanged", { kind: "escrow_pressure", id: accountId }),
      idleElsewhere: (accountId) => this.usage.idleElsewhere(accountId),
      fail: (session, err) => this.fail(session, err),
    });
  }

  /** This process's in-flight gate leases. */
  get gates(): GateLeases {
    return this.deps.gates;
  }

  /** Group-commit and escrow figures (observability, tests). */
  batchStats() {
    return { ends: this.settlement.stats, escrow: { ...this.attempts.stats } };
  }

  /**
   * Admits a request: resolves the model (404; another modality or not live: 400), takes the buyer
   * key's in-flight slot (429) and the small tier's (429), prices its maximum (an asked price is
   * asked here; 402), and admits its first attempt (503s). Its record is written when it ends
   * (refusals included) with its support reference.
   */
  async open(input: OpenInput): Promise<AttemptingSession> {
    const start = performance.now();
    this.listen();
    const model = await this.model(input.model, input.modality, input.route);
    // the ceiling as last seen by this process (a top-up verifies it)
    const ceilingCents = await this.ceilings.of(input.accountId);
    // the modality's price rules first: a request they refuse (400) holds nothing
    const pricer = "price" in input ? input.price(model) : UNPRICED;
    const held = await takeRequestGates(this.deps, model, input);
    // the balance is unknown, so the first plan is uncapped and the buyer's slice (or its top-up) decides
    const session: InferenceSession = {
      requestId: input.requestId ?? randomUUID(),
      supportReference: randomUUID(),
      accountId: input.accountId,
      apiKeyId: input.apiKeyId,
      route: input.route,
      model,
      stream: input.stream,
      ceilingCents,
      pricer,
      plan: NO_PLAN,
      plans: 0,
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
      timing: { start },
    };
    try {
      if ("askPrice" in input) session.pricer = await this.askPrice(session, input.askPrice);
      if (!planRequest(session, UNLIMITED_MICRO_USDC)) throw await this.fail(session, insufficientBalance(session));
      const attempt = await this.attempts.next(session);
      session.timing.admitMs = performance.now() - start;
      if (session.stream) this.bridge.open(session);
      return Object.assign(session, { attempt });
    } catch (e) {
      // a refusal ended the request through fail(); anything else still holding escrow is ended here
      // (recorded); an error before any escrow (a revoked key) leaves nothing but its gate slots
      if (!session.done && (session.touched.size > 0 || session.attempts.length > 0)) {
        await this.abort(session, e instanceof DomainError ? e.code : "internal_error");
      } else if (!session.done) {
        this.attempts.releaseSlots(session, null);
      }
      throw e;
    }
  }

  /** The request's price asked (`OpenInput.askPrice`); a refusal ends the request, recorded. */
  private async askPrice(
    session: InferenceSession,
    ask: (session: InferenceSession) => Promise<BurnPricer>,
  ): Promise<BurnPricer> {
    try {
      return await ask(session);
    } catch (e) {
      if (e instanceof DomainError) throw await this.fail(session, e);
      throw e;
    }
  }

  /**
   * The live catalog row a route may call: unknown → 404 `model_not_found`; another modality's
   * model → 400 `unsupported_modality`; listed but not live → 400 `model_not_live`.
   */
  async model(id: string, modality: Modality, route: RouteKind): Promise<RoutableModel> {
    const model = await this.deps.resolveModel(id);
    if (model.modality !== modality) {
      throw new DomainError(
        "unsupported_modality",
        `${model.id} is a ${model.modality} model; it cannot be called through ${ROUTE_LABEL[route]}.`,
      );
    }
    if (model.status !== "live") {
      throw new DomainError(
        "model_not_live",
        `${model.id} is listed but not live yet (coming_soon); pick a live model from /v1/models.`,
      );
    }
    return model;
  }

  /** The buyer's ceiling as this process last saw it (a top-up verifies it). */
  ceilingOf(accountId: string): Promise<number> {
    return this.ceilings.of(accountId);
  }

  /**
   * THE attempt loop of a request (`runAttempts`, docs/decisions.md "Inference pipeline"): `call`
   * makes the current attempt's upstream call and answers what happened (`Attempted`); the pipeline
   * alone classifies upstream failures, acts on the key (cooldown, auth mark), falls forward to the
   * next offer, ends the request on every path (aborted, recorded, everything released; a thrown
   * DomainError carries the support reference) and settles an answer on its `Ending`. Resolves with
   * the call's value and the settlement, or with what `closed` gave when the buyer left.
   */
  run<V, C = never>(
    session: AttemptingSession,
    call: (scope: AttemptScope) => Promise<AttemptResult<Answered<V>, C>>,
  ): Promise<{ value: V; settled: Settled } | C> {
    const lane: Lane<Attempt, Answered<V>, C, { value: V; settled: Settled }> = {
      finish: async (attempt, { ending, value }) => {
        this.firstByte(session);
        return { value, settled: await this.charge(session, attempt, ending) };
      },
      fallForward: async (_attempt, failure) => {
        this.metrics.fallForward(failure.kind);
        await this.attempts.end(session, failure);
        return this.attempts.next(session);
      },
      reject: async (_attempt, error) => {
        await this.abort(session, error.code, "request_rejected");
        error.details.supportReference = session.supportReference;
        return error;
      },
      lost: async (_attempt, detail, error) => {
        await this.attempts.end(session, { kind: "retryable", detail: `answer lost: ${detail}` });
        await this.abort(session, "upstream_answer_lost");
        error.details.supportReference = session.supportReference;
        return error;
      },
      closed: async (_attempt, value) => {
        await this.abort(session, "client_closed");
        return value;
      },
      cleanUp: async (_attempt, e) => {
        if (!session.done) await this.abort(session, e instanceof DomainError ? e.code : "internal_error");
        if (e instanceof DomainError) e.details.supportReference ??= session.supportReference;
      },
    };
    return runAttempts(session.attempt, (attempt) => call(this.scope(session, attempt)), lane);
  }

  /**
   * The attempt loop over supplier keys lent outside a request (a video quote; see
   * `Attempts.borrowKey`): up to MAX_ATTEMPTS distinct keys, each failed one acted on through the
   * same key-health path as an attempt (402 → cooldown, 401/403 → auth mark) and given back; the
   * buyer's own 4xx is thrown. With `waitForKey`, a busy key is waited for as an attempt waits (then
   * 503 key_wait_timeout); otherwise `refuse("busy")`. `refuse("none")` when no key is routable,
   * `refuse("exhausted")` when every key asked failed.
   */
  async runBorrowed<T>(
    o: { ceilingCents: number; waitForKey: boolean; refuse: (why: "busy" | "none" | "exhausted") => DomainError },
    call: (key: BorrowedKey) => Promise<AttemptResult<T>>,
  ): Promise<T> {
    const tried: string[] = [];
    const borrow = async (): Promise<BorrowedKey> => {
      const key = await this.attempts.borrowKey(o.ceilingCents, tried, o.waitForKey);
      if (key === "busy") throw o.waitForKey ? keyWaitTimeout() : o.refuse("busy");
      if (key === "none") throw o.refuse(tried.length > 0 ? "exhausted" : "none");
      tried.push(key.upstreamKeyId);
      return key;
    };
    const lane: Lane<BorrowedKey, T, never, T> = {
      finish: async (key, value) => {
        key.release();
        return value;
      },
      fallForward: async (key, failure) => {
        await this.attempts.markKey(key.upstreamKeyId, failure);
        key.release();
        if (tried.length >= MAX_ATTEMPTS) throw o.refuse("exhausted");
        return borrow();
      },
      reject: async (key, error) => {
        key.release();
        return error;
      },
      lost: async (key, _detail, error) => {
        key.release();
        return error;
      },
      closed: async (key, value) => {
        key.release();
        return value;
      },
      cleanUp: async (key) => key.release(),
    };
    return runAttempts(await borrow(), call, lane);
  }

  /** What a call is given for one attempt. */
  private scope(session: AttemptingSession, attempt: Attempt): AttemptScope {
    return {
      session,
      attempt,
      firstByte: () => this.firstByte(session),
      preCallBalance: (reported) => notePreCallBalance(session, attempt, reported),
      renew: () => this.bridge.renew(session),
    };
  }

  /**
   * Ends a request on its attempt's answer, outside `run` (tests, tools): see `run` and `Ending`.
   * Only a session with an attempt in flight can be settled.
   */
  settle(session: AttemptingSession, ending: Ending): Promise<Settled> {
    return this.charge(session, session.attempt, ending);
  }

  /**
   * Ends a request with a charge, in one group-committed transaction: buyer debit out of its slice,
   * supplier credit (gross − fee), platform fee (`computeCharge`: the fee in basis points of the
   * gross), offer remaining decreased (depleted at zero), the clear, the request and attempt records,
   * the ending's extra rows, and what the slices no longer need given back. The burn: `settled` — the
   * modality's price of the usage, never above the admitted maximum; `incomplete` — SPEC "Events" Chat
   * SSE 6 / Responses SSE 4, priced by `billIncomplete` (estimated usage capped at the admitted
   * max_tokens; burn capped at the admitted maximum and at the supplier's pre-call balance noted
   * when the upstream answered), recorded `incomplete`; `uncharged` — nothing charged, no clear, the
   * request recorded as succeeded with the reason as its error code. If it does not commit: nothing
   * is charged, the request is recorded as failed, 500 settle_failed.
   */
  private async charge(session: InferenceSession, attempt: Attempt, ending: Ending): Promise<Settled> {
    if (session.done || !session.buyerSlice) throw new DomainError("internal_error", "request already ended");
    const { usage, burn } = this.burnOf(session, attempt, ending);
    const incomplete = ending.kind === "incomplete";
    const uncharged = ending.kind === "uncharged" ? ending.reason : undefined;
    const split = computeCharge(burn, attempt.priceCentsPerDollar, this.deps.config.fees.platformFeeBps);
    const now = this.deps.clock.now();
    const settleStart = performance.now();
    const buyer = session.buyerSlice;
    this.attempts.record(session, attempt, incomplete ? "incomplete" : "succeeded", null, now);
    // the charge leaves the slices now; what they no longer need goes back in the same commit
    buyer.spend(split.grossMicroUsdc);
    attempt.offerSlice.spend(burn);
    const item = endItem(session, now, this.giveBack.lingering, {
      status: incomplete ? "incomplete" : "succeeded",
      error_code: incomplete ? "stream_incomplete" : (uncharged ?? null),
      charge:
        ending.kind === "uncharged"
          ? undefined
          : {
              offer: attempt.offerId,
              key: attempt.upstreamKeyId,
              supplier: attempt.supplierAccountId,
              price: attempt.priceCentsPerDollar,
              burn: burn.toString(),
              gross: split.grossMicroUsdc.toString(),
              fee: split.feeMicroUsdc.toString(),
              share: split.supplierMicroUsdc.toString(),
              clear: randomUUID(),
              journal: randomUUID(),
              prompt: usage.promptTokens,
              completion: usage.completionTokens,
              cached: usage.cachedTokens ?? 0,
              buyer_holder: buyer.holder,
              offer_holder: attempt.offerSlice.holder,
            },
      ...(ending.kind === "settled" && ending.extra ? { extra: ending.extra } : {}),
    });
    let balance: bigint;
    try {
      balance = await this.settlement.submit(item.item);
    } catch (e) {
      logger.error({ err: e, requestId: session.requestId }, "settlement did not commit");
      this.metrics.settleFailed();
      // nothing of it happened: the slices hold the charge and what was to go back again; the
      // request is recorded as failed (its attempt aborted)
      buyer.restore(split.grossMicroUsdc);
      attempt.offerSlice.restore(burn);
      item.undo();
      const last = session.attempts[session.attempts.length - 1];
      if (last) last.outcome = "aborted";
      this.attempts.freeKey(attempt);
      throw await this.fail(
        session,
        new DomainError("settle_failed", "Settlement did not commit; nothing was charged. Safe to retry.", {
          supportReference: session.supportReference,
        }),
      );
    }
    session.done = true;
    session.timing.settleMs = performance.now() - settleStart;
    this.attempts.releaseSlots(session, attempt);
    void this.bridge.close(session);
    if (ending.kind !== "uncharged") {
      this.metrics.clear(session.model.modality, split.grossMicroUsdc);
      this.events.cleared(
        {
          at: now.toISOString(),
          model: session.model.id,
          modality: session.model.modality,
          priceCentsPerDollar: attempt.priceCentsPerDollar,
          burnMicroDiem: burn,
          grossMicroUsdc: split.grossMicroUsdc,
        },
        session.accountId,
        attempt.supplierAccountId,
        now,
      );
    }
    return {
      costMicroUsdc: split.grossMicroUsdc,
      ...(uncharged ? { uncharged } : {}),
      clearingPriceCents: attempt.priceCentsPerDollar,
      burnMicroDiem: burn,
      balanceRemainingMicroUsdc: balance,
      supportReference: session.supportReference,
      requestId: session.requestId,
    };
  }

  /** The usage recorded and the burn charged for an ending (see `charge`). */
  private burnOf(session: InferenceSession, attempt: Attempt, ending: Ending): { usage: Usage; burn: bigint } {
    if (ending.kind === "uncharged") return { usage: { promptTokens: 0, completionTokens: 0 }, burn: 0n };
    if (ending.kind === "settled") {
      return { usage: ending.usage, burn: minBig(session.pricer.burn(ending.usage), session.plan.maxBurnMicroDiem) };
    }
    const { usage, burnMicroDiem } = billIncomplete(
      session.plan,
      (u) => session.pricer.burn(u),
      ending.stream,
      attempt.preCallBalance ?? notePreCallBalance(session, attempt, null),
    );
    return { usage, burn: burnMicroDiem };
  }

  /**
   * Ends a request without a charge (the buyer's 4xx relayed from the upstream, a client abort before
   * any content, a refusal, an unexpected error): its admissions and slots are released, the record
   * says why. Idempotent.
   */
  async abort(
    session: InferenceSession,
    errorCode: string,
    outcome: "request_rejected" | "aborted" = "aborted",
  ): Promise<void> {
    if (session.done) return;
    session.done = true;
    const now = this.deps.clock.now();
    const attempt = session.attempt;
    if (attempt) this.attempts.record(session, attempt, outcome, null, now);
    const ending = endItem(session, now, this.giveBack.lingering, { status: "failed", error_code: errorCode });
    try {
      await this.settlement.submit(ending.item);
    } catch (e) {
      ending.undo();
      // a give-back that cannot commit (a slice the sweeper took from a stalled process) must not
      // cost the record: write it alone; the slices stay as they are
      const alone =
        ending.item.returns.length > 0 ? this.settlement.submit({ ...ending.item, returns: [] }) : Promise.reject(e);
      await alone.catch((err: unknown) =>
        logger.error({ err, requestId: session.requestId }, "could not record an ended request"),
      );
    }
    void this.bridge.close(session);
    this.attempts.releaseSlots(session, attempt);
  }

  /** Records the failure of the whole request (releasing everything) and returns the error to throw. */
  private async fail(session: InferenceSession, err: DomainError): Promise<DomainError> {
    err.details.supportReference ??= session.supportReference;
    if (!session.done) {
      if (session.attempt) await this.attempts.end(session, null).catch(() => undefined);
      await this.abort(session, err.code);
    }
    return err;
  }

  /** Marks the first byte sent to the buyer (timings). */
  private firstByte(session: InferenceSession): void {
    session.firstByteAt ??= this.deps.clock.now();
    const t = session.timing;
    if (t.upstreamMs === undefined) t.upstreamMs = performance.now() - t.start - (t.admitMs ?? 0);
  }

  // ─────────────────────────── caches, events, lifecycle ───────────────────────────

  /** A supply change (here, or heard from another process): read the offer book again before routing. */
  invalidateBook(): void {
    this.book.invalidate();
  }

  /** The buyer changed their ceiling: plan this account's next request from the database. */
  forgetCeiling(accountId: string): void {
    this.ceilings.forget(accountId);
  }

  /** Applies a change heard from another process (or this one) through `routingChanged`. */
  applyChange(change: RoutingChange): void {
    if (change.kind === "supply_changed") this.invalidateBook();
    else if (change.kind === "ceiling_changed") this.forgetCeiling(change.id);
    else if (change.kind === "api_key_revoked") this.deps.forgetApiKey?.(change.id);
    else if (change.kind === "gate_pressure") this.deps.gates.yieldIdle(change.id);
    else if (change.kind === "escrow_pressure") void this.giveBack.yieldBuyer(change.id);
    else if (change.kind === "escrow_usage") this.usage.answer(change.id, change.query);
  }

  /**
   * Starts hearing supply changes and cache invalidations from every process, and the idle escrow
   * give-back timer (on the first request).
   */
  private listen(): void {
    if (this.stopListening) return;
    this.giveBack.start();
    this.stopListening = listenForChanges(this.deps.bus, {
      capacity: () => this.invalidateBook(),
      routing: (e) => this.applyChange(e),
    });
  }

  /** Stops listening and gives every escrow slice and gate slot back (call after the server drained). */
  async close(): Promise<void> {
    this.stopListening?.();
    this.giveBack.stop();
    await Promise.all([this.lease.close(), this.deps.gates.close()]);
  }

  /** Sweeper (worker): gives back the slices of holders whose lease expired (see `releaseExpiredHolders`). */
  releaseExpiredHolds(): Promise<{ released: number }> {
    return releaseExpiredHolders(this.deps.sql, this.deps.clock.now());
  }

  /** Gives back the slices that lingered idle long enough now (the timer does it four times per linger period). */
  returnIdleEscrow(): Promise<number> {
    return this.giveBack.returnIdle();
  }

  /**
   * What requests in flight use of each of `holders`' slices of the buyer's balance (micro-USDC);
   * a holder that did not answer in time is absent (see `EscrowUsage`).
   */
  escrowInUse(accountId: string, holders: readonly string[]): Promise<Map<string, bigint>> {
    return this.usage.inUse(accountId, holders);
  }

  /** This process's holder id and slices (tests, diagnostics). */
  escrowSnapshot(): { holder: string | null; buyers: number; offers: number } {
    return this.lease.snapshot();
  }

  /** Renews the holder's lease now (tests; the heartbeat does it every HOLDER_RENEW_MS). */
  heartbeat(): Promise<void> {
    return this.lease.heartbeat();
  }
}

/**
 * The upstream answered the attempt, reporting the key's balance before the call
 * (`reportedMicroDiem`, null when it did not): notes the supplier's pre-call balance as known now —
 * that, the key's last known balance, and the admitted maxima of the other requests in flight on
 * the key at this moment (this process's slice of the key's one live offer: none of theirs is
 * debited upstream yet, so the reported balance does not net them).
 */
function notePreCallBalance(
  session: InferenceSession,
  attempt: Attempt,
  reportedMicroDiem: bigint | null,
): NonNullable<Attempt["preCallBalance"]> {
  const noted = {
    reportedMicroDiem,
    knownMicroDiem: attempt.keyBalanceMicroDiem,
    othersInFlightMicroDiem: maxBig(attempt.offerSlice.used - session.plan.maxBurnMicroDiem, 0n),
  };
  attempt.preCallBalance = noted;
  return noted;
}
