import type { EventBus, RoutingChange } from "../../../adapters/pubsub.js";
import type { EscrowUsageBoard } from "../../../adapters/redis/escrow-usage.js";
import type { InFlightRegistry } from "../../../adapters/redis/in-flight.js";
import type { RedisKeys } from "../../../adapters/redis/keys.js";
import type { Config } from "../../../config.js";
import type { Clock } from "../../../lib/clock.js";
import { DomainError } from "../../../lib/errors.js";
import { logger } from "../../../lib/logger.js";
import { type Metrics, noMetrics } from "../../../lib/metrics.js";
import { Running } from "../../../lib/running.js";
import type { SecretBox } from "../../../lib/secret-box.js";
import { tracingOn } from "../../../lib/tracing.js";
import { uuidV7 } from "../../../lib/uuid7.js";
import type { SoldOut } from "../escrow/escrow-fold.js";
import { planRequest } from "../escrow/escrow-take.js";
import { allowModel, KeyBudgets } from "../escrow/key-budget.js";
import { ProcessEscrow } from "../escrow/process-escrow.js";
import {
  type Answered,
  type BorrowOptions,
  borrowedLane,
  type RequestLaneDeps,
  requestLane,
} from "../routing/lanes.js";
import { OfferBook } from "../routing/offer-book.js";
import { listenForChanges } from "../routing/routing-changes.js";
import { type BorrowedKey, SupplierKeys } from "../routing/supplier-keys.js";
import { type Ended, type Ending, Endings, notePreCallBalance } from "../settlement/ending.js";
import type { InFlightGates, InferenceStores, KeyMarks } from "../settlement/stores.js";
import { NO_PLAN, UNLIMITED_MICRO_USDC } from "./admission.js";
import { type AttemptResult, runAttempts } from "./attempt-loop.js";
import { Attempts } from "./attempts.js";
import { Ceilings } from "./ceilings.js";
import { insufficientBalance, isRefusal, refused } from "./diagnostics.js";
import { InFlightBridge } from "./in-flight-bridge.js";
import { callableBy } from "./model-resolver.js";
import type { OpenInput } from "./open-input.js";
import { PipelineTracer } from "./pipeline-trace.js";
import { requestCaps } from "./request-controls.js";
import { takeRequestGates } from "./request-gates.js";
import {
  type AdmissionDraft,
  type Attempt,
  type AttemptingSession,
  type AttemptScope,
  type BurnPricer,
  effectiveCeiling,
  type InferenceSession,
  type Modality,
  PAY_PER_REQUEST_CEILING_CENTS,
  type RoutableModel,
  type RouteKind,
  type Settled,
} from "./session.js";
import { Trail } from "./trail.js";

export interface PipelineDeps {
  /** offers, ceilings, escrow and settlement (`sqlStores` over the hot path's pg pool; see `stores.ts`) */
  stores: InferenceStores;
  /** the offer book requests route on (shared with what marks keys); absent: one over `stores.offers` */
  book?: OfferBook;
  config: Config;
  clock: Clock;
  bus: EventBus;
  /** in-flight gates (buyer keys, supplier keys, the small-model tier), leased per process (`GateLeases`) */
  gates: InFlightGates;
  keys: RedisKeys;
  secrets: SecretBox;
  /** the one key-marking path (cooldown, auth failure), shared with the supply service */
  keyHealth: KeyMarks;
  resolveModel: (id: string) => Promise<RoutableModel>;
  /** after an upstream 402: refresh the key's balance (best effort, async) */
  onKeyExhausted?: (upstreamKeyId: string) => Promise<void>;
  /** after an unclear 401/403: the key's rate-limits read, marking a key refused there (awaited) */
  confirmKey?: (upstreamKeyId: string) => Promise<void>;
  /** streamed requests in flight, so their support reference resolves before their record is written */
  inFlight?: InFlightRegistry;
  /** where processes answer what their requests in flight use of a buyer's slice (`EscrowUsage`) */
  escrowUsage?: EscrowUsageBoard;
  /** an API key revoked in another process: drop it from this process's authentication cache */
  forgetApiKey?: (apiKeyId: string) => void;
  /** operators' counters (clears, fall-forwards, settlement failures, key waits) */
  metrics?: Metrics;
  /** the offers a fold sold out: marked depleted with their webhook (`OfferService.markDepletedIfEmpty`) */
  soldOut?: SoldOut;
}

/** How long `close` waits for requests still running (inside the boot's 25 s hard stop, after its 15 s drain). */
export const CLOSE_DRAIN_MS = 5_000;

/** The price rules of a request whose price is still being asked (`OpenInput.askPrice`): nothing is admissible. */
const UNPRICED: BurnPricer = Object.freeze({ plan: () => undefined, burn: () => 0n });

/**
 * The inference pipeline (SPEC "What the service does" 3–6), the same for every modality:
 * admit (resolve the model, take the request's gate slots, price its maximum burn, admit it on the
 * cheapest eligible offer against this process's escrow slices: `open`) → attempts with
 * fall-forward (`run`, the one attempt loop; admission of each attempt is `Attempts`) → end (settle
 * the actual burn on an `Ending` in one group-committed transaction, or abort and release). A
 * modality supplies validation, pricing, the upstream call and the answer's shape (docs/decisions.md
 * "Inference pipeline"); its buffered and streamed calls are one call path, `call.ts`.
 */
export class InferencePipeline {
  readonly book: OfferBook;
  /** this process as an escrow holder: its lease, give-backs, usage answers and the sweeper */
  readonly escrow: ProcessEscrow;
  private readonly ceilings: Ceilings;
  private readonly keys: SupplierKeys;
  private readonly attempts: Attempts;
  private readonly endings: Endings;
  private readonly budgets: KeyBudgets;
  private readonly lane: RequestLaneDeps;
  private readonly bridge: InFlightBridge;
  private readonly tracer: PipelineTracer;
  private stopListening: (() => void) | null = null;
  /** requests between taking their gate slots and giving them back: `close` waits for them */
  private readonly running = new Running();

  constructor(private readonly deps: PipelineDeps) {
    const { stores, clock, bus } = deps;
    const metrics = deps.metrics ?? noMetrics;
    this.escrow = new ProcessEscrow({
      escrow: stores.escrow,
      clock,
      bus,
      lingerMs: deps.config.limits.escrowLingerMs,
      board: deps.escrowUsage,
      soldOut: deps.soldOut,
      foldDelayMs: deps.config.limits.escrowFoldMs,
    });
    this.book = deps.book ?? new OfferBook(stores.offers, clock);
    this.ceilings = new Ceilings(stores.ceilings);
    this.bridge = new InFlightBridge(deps.inFlight, clock);
    const onKeyWait = (seconds: number) => metrics.gateWait(seconds);
    this.keys = new SupplierKeys({ ...deps, book: this.book, onKeyWait });
    this.attempts = new Attempts({
      ...deps,
      offers: stores.offers,
      escrow: stores.escrow,
      lease: this.escrow.lease,
      book: this.book,
      ceilings: this.ceilings,
      keys: this.keys,
      onKeyWait,
      onBalancePressure: (accountId) => bus.publish("routingChanged", { kind: "escrow_pressure", id: accountId }),
      idleElsewhere: (accountId) => this.escrow.idleElsewhere(accountId),
      running: this.running,
      followBudget: (session, holder) => this.budgets.follow(session, holder),
    });
    this.endings = new Endings({
      clock,
      bus,
      settlement: stores.settlement,
      attempts: this.attempts,
      keys: this.keys,
      bridge: this.bridge,
      metrics,
      platformFeeBps: deps.config.fees.platformFeeBps,
      lingering: this.escrow.lingering,
      appended: () => this.escrow.appended(),
    });
    this.budgets = new KeyBudgets({
      budgets: stores.budgets,
      lease: this.escrow.lease,
      clock,
    });
    this.lane = { attempts: this.attempts, endings: this.endings, metrics };
    this.tracer = new PipelineTracer(deps.config.upstream.baseUrl);
  }

  /** This process's in-flight gate leases. */
  get gates(): InFlightGates {
    return this.deps.gates;
  }

  /** Group-commit and escrow figures (observability, tests). */
  batchStats() {
    return { ends: this.endings.stats, escrow: { ...this.attempts.stats } };
  }

  /**
   * Admits a request: resolves the model (404; another modality or not live: 400), takes the buyer
   * key's in-flight slot (429) and the small tier's (429), prices its maximum (an asked price is
   * asked here; 402), and admits its first attempt (503s). Its record is written when it ends
   * (refusals included) with its support reference. Traced as the request's `admission` span.
   */
  open(input: OpenInput): Promise<AttemptingSession> {
    return this.tracer.admission(input, () => this.admit(input));
  }

  private async admit(input: OpenInput): Promise<AttemptingSession> {
    const start = performance.now();
    this.listen();
    const model = input.resolvedModel ?? (await this.model(input.model, input.modality, input.route));
    allowModel(input.key, model);
    // the ceiling as last seen by this process (a top-up verifies it); paid per request: not the account's
    const accountCeilingCents = input.payment ? PAY_PER_REQUEST_CEILING_CENTS : await this.ceilings.of(input.accountId);
    // the modality's price rules first: a request they refuse (400) holds nothing
    const pricer = "price" in input ? input.price(model) : UNPRICED;
    const caps = requestCaps(input, model);
    const held = await takeRequestGates(this.deps, model, input);
    this.running.enter();
    // the balance is unknown, so the first plan is uncapped and the buyer's slice (or its top-up) decides
    const startedAt = this.deps.clock.now();
    // a v7 uuid of the request's arrival (or of its start): its record is found by it alone
    const requestId = input.requestId ?? uuidV7(startedAt);
    const draft: AdmissionDraft = {
      requestId,
      // the support reference is the request id (decisions.md "The support reference is the request id")
      supportReference: requestId,
      accountId: input.accountId,
      apiKeyId: input.apiKeyId,
      route: input.route,
      model,
      stream: input.stream,
      accountCeilingCents,
      ...caps,
      effectiveCeilingCents: effectiveCeiling(accountCeilingCents, caps.capCents),
      budgetHold: null,
      pricer,
      plan: NO_PLAN,
      plans: 0,
      buyerHold: null,
      payment: input.payment ?? null,
      gates: held,
      startedAt,
      timingStart: start,
      trail: new Trail(),
    };
    try {
      if ("askPrice" in input) draft.pricer = await this.askPrice(draft, input.askPrice);
      if (!planRequest(draft, draft.payment ? draft.payment.maxMicroUsdc : UNLIMITED_MICRO_USDC))
        throw refused(insufficientBalance(draft));
      await this.budgets.hold(draft, input.key);
      const attempt = await this.attempts.next(draft, draft);
      const { plans: _plans, ...decided } = draft;
      const admitted: AttemptingSession = Object.freeze({ ...decided, admitMs: performance.now() - start, attempt });
      this.budgets.carry(draft, admitted);
      if (admitted.stream) this.bridge.open(admitted);
      return admitted;
    } catch (e) {
      // a refusal ends the request recorded; anything else still holding escrow is ended here
      // (recorded); an error before any escrow (a revoked key) leaves nothing but its gate slots
      if (this.endings.ended(draft)) throw e;
      if (isRefusal(e)) throw await this.endings.fail(draft, e);
      if (draft.trail.touched.size > 0 || draft.trail.records.length > 0 || draft.budgetHold !== null) {
        await this.abort(draft, e instanceof DomainError ? e.code : "internal_error");
      } else {
        this.attempts.releaseSlots(draft, null);
      }
      throw e;
    }
  }

  /** The request's price asked (`OpenInput.askPrice`); a refusal ends the request, recorded. */
  private async askPrice(
    session: AdmissionDraft,
    ask: (session: InferenceSession) => Promise<BurnPricer>,
  ): Promise<BurnPricer> {
    try {
      return await ask(session);
    } catch (e) {
      throw e instanceof DomainError ? refused(e) : e;
    }
  }

  /** The live catalog row a route may call (`callableBy`: 404, or 400 for another modality or not live). */
  async model(id: string, modality: Modality, route: RouteKind): Promise<RoutableModel> {
    return callableBy(await this.deps.resolveModel(id), modality, route);
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
  async run<V, C = never>(
    session: InferenceSession,
    call: (scope: AttemptScope) => Promise<AttemptResult<Answered<V>, C>>,
  ): Promise<{ value: V; settled: Settled } | C> {
    const lane = requestLane<V, C>(session, this.lane);
    const attempt = (a: Attempt) => call(this.scope(session, a));
    const first = session.trail.inFlight();
    if (!first) throw new DomainError("internal_error", "request already ended");
    if (!tracingOn()) return runAttempts(first, attempt, lane);
    // one client span per attempt (pipeline-trace.ts)
    const traced = this.tracer.trace(session, lane);
    return runAttempts(first, (a) => traced.call(a, () => attempt(a)), traced.lane);
  }

  /**
   * The attempt loop over supplier keys lent outside a request (a video quote; see
   * `SupplierKeys.borrowKey`): up to MAX_ATTEMPTS distinct keys, each failed one acted on through the
   * same key-health path as an attempt (`SupplierKeys.mark`) and given back; the
   * buyer's own 4xx is thrown. With `waitForKey`, a busy key is waited for as an attempt waits (then
   * 503 key_wait_timeout); otherwise `refuse("busy")`. `refuse("none")` when no key is routable,
   * `refuse("exhausted")` when every key asked failed.
   */
  async runBorrowed<T>(o: BorrowOptions, call: (key: BorrowedKey) => Promise<AttemptResult<T>>): Promise<T> {
    const { first, lane } = borrowedLane<T>(this.keys, o);
    return runAttempts(await first(), call, lane);
  }

  /** What a call is given for one attempt. */
  private scope(session: InferenceSession, attempt: Attempt): AttemptScope {
    return {
      session,
      attempt,
      firstByte: () => this.endings.firstByte(session),
      preCallBalance: (reported) => notePreCallBalance(session, attempt, reported),
      renew: () => this.bridge.renew(session),
    };
  }

  /**
   * Ends a request on its attempt's answer, outside `run` (tests, tools): see `run` and `Ending`
   * (`Endings.charge`). Only a session with an attempt in flight can be settled.
   */
  async settle(session: InferenceSession, ending: Ending): Promise<Settled> {
    const attempt = session.trail.inFlight();
    if (!attempt) throw new DomainError("internal_error", "request already ended");
    return this.endings.charge(session, attempt, ending);
  }

  /**
   * Ends a request without a charge (the buyer's 4xx relayed from the upstream, a client abort before
   * any content, a refusal, an unexpected error): its admissions and slots are released, the record
   * says why. Idempotent.
   */
  abort(session: InferenceSession, errorCode: string, outcome?: "request_rejected" | "aborted"): Promise<void> {
    return this.endings.abort(session, errorCode, outcome);
  }

  /** How the request ended (`Ended`); undefined while it has not. */
  ended(session: InferenceSession): Ended | undefined {
    return this.endings.ended(session);
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
  private applyChange(change: RoutingChange): void {
    if (change.kind === "supply_changed") this.invalidateBook();
    else if (change.kind === "ceiling_changed") this.forgetCeiling(change.id);
    else if (change.kind === "api_key_revoked") this.deps.forgetApiKey?.(change.id);
    else if (change.kind === "gate_pressure") this.deps.gates.yieldIdle(change.id);
    else if (change.kind === "escrow_pressure") void this.escrow.yieldBuyer(change.id);
    else if (change.kind === "escrow_usage") this.escrow.answer(change.id, change.query);
  }

  /**
   * Starts hearing supply changes and cache invalidations from every process, and the idle escrow
   * give-back timer (on the first request).
   */
  private listen(): void {
    if (this.stopListening) return;
    this.escrow.start();
    this.stopListening = listenForChanges(this.deps.bus, {
      capacity: () => this.invalidateBook(),
      routing: (e) => this.applyChange(e),
    });
  }

  /**
   * Stops listening and gives every escrow slice and gate slot back (call after the server
   * drained). A request whose buyer left still runs to its end (a drain counts responses, not
   * requests): a process's stop waits for it, up to `drainMs` (`CLOSE_DRAIN_MS`), so it ends on
   * live slices and slots rather than after they went back (a fall-forward then would lease a gate
   * anew, live after the process exits). Tests and the simulation close at once (0).
   */
  async close(drainMs = 0): Promise<void> {
    if (!(await this.running.idle(drainMs)))
      logger.warn(
        { requests: this.running.size },
        "requests still running at close; their slices and slots go back now",
      );
    this.stopListening?.();
    await Promise.all([this.escrow.close(), this.deps.gates.close()]);
  }
}
