import { randomUUID } from "node:crypto";
import type { EventBus } from "../../adapters/pubsub.js";
import { Batcher } from "../../lib/batcher.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { Metrics } from "../../lib/metrics.js";
import { computeCharge, formatDecimal6, maxBig, minBig } from "../../lib/money.js";
import { withSpan } from "../../lib/tracing.js";
import type { Attempts } from "./attempts.js";
import { ClearEvents } from "./clear-events.js";
import type { InFlightBridge } from "./in-flight-bridge.js";
import type { Attempt, InferenceSession, Settled, Usage } from "./session.js";
import { type EndItem, type Ending, endItem } from "./settlement.js";
import type { SettlementStore } from "./stores.js";
import type { SupplierKeys } from "./supplier-keys.js";
import { billIncomplete } from "./usage.js";

/** Request endings per group commit (see Batcher). One batch in flight keeps a process's endings in order. */
const BATCH = { maxBatch: 64, maxInFlight: 1 };

/**
 * Submits endings to the settlement store (`svc_end_batch`), group-committed: one transaction for
 * the endings that arrive while the previous batch commits. Resolves each with the buyer's
 * confirmed balance after it.
 */
export class Settlement {
  private readonly batcher: Batcher<EndItem, bigint>;

  constructor(
    store: SettlementStore,
    /** an ending with a charge committed (its holder folds it soon) */
    private readonly appended: () => Promise<void> | undefined = () => undefined,
  ) {
    this.batcher = new Batcher(
      (items) => store.commit(items),
      async (i) => (await store.commit([i]))[0] ?? 0n,
      BATCH,
    );
  }

  /** Commits one ending (with others); the buyer's confirmed balance after it. */
  async submit(item: EndItem): Promise<bigint> {
    const confirmed = await this.batcher.submit(item);
    // with no fold delay the clear is folded before the answer (ESCROW_FOLD_MS=0)
    if (item.clear !== null) await this.appended();
    return confirmed;
  }

  get stats() {
    return { ...this.batcher.stats };
  }
}

export interface EndingDeps {
  clock: Clock;
  bus: EventBus;
  settlement: SettlementStore;
  attempts: Attempts;
  keys: SupplierKeys;
  bridge: InFlightBridge;
  metrics: Metrics;
  /** the platform fee in basis points of the gross (`computeCharge`) */
  platformFeeBps: number;
  /** whether an ending keeps an idle slice with the process (see `Slice.giveBack`, `EscrowGiveBack`) */
  lingering: boolean;
  /** an ending with a charge committed: the process's fold applies it soon (`ProcessEscrow.appended`) */
  appended?: () => Promise<void> | undefined;
}

/**
 * How a request ends (docs/decisions.md "Inference pipeline" 3), once: charged on its attempt's
 * answer (`charge`, on an `Ending`), or not (`abort`; `fail` for a refusal), each one `EndItem`
 * group-committed (`Settlement`), its slices and slots given back and its events published.
 */
export class Endings {
  private readonly settlement: Settlement;
  private readonly events: ClearEvents;

  constructor(private readonly deps: EndingDeps) {
    this.settlement = new Settlement(deps.settlement, deps.appended);
    this.events = new ClearEvents(deps.bus);
  }

  /** Group-commit figures (observability, tests). */
  get stats() {
    return this.settlement.stats;
  }

  /**
   * Ends a request with a charge, in one group-committed transaction: buyer debit out of its slice,
   * supplier credit (gross − fee), platform fee (`computeCharge`: the fee in basis points of the
   * gross), offer remaining decreased (depleted at zero), the clear, the request and attempt records,
   * the ending's extra rows, and what the slices no longer need given back. The burn: `settled` — the
   * modality's price of the usage, never above the admitted maximum; `incomplete` — SPEC "Events" Chat
   * SSE 6 / Responses SSE 4, priced by `billIncomplete` (estimated usage capped at the admitted
   * max_tokens; burn capped at the admitted maximum and at the supplier's pre-call balance noted
   * when the upstream answered), recorded `incomplete`; `flagged` — what the provider burned on the
   * key for an answer it flagged, never above the admitted maximum, recorded as succeeded with the
   * reason as its error code; `uncharged` — nothing charged, no clear, the request recorded as
   * succeeded with the reason as its error code. If it does not commit: nothing is charged, the
   * request is recorded as failed, 500 settle_failed.
   */
  async charge(session: InferenceSession, attempt: Attempt, ending: Ending): Promise<Settled> {
    if (session.done || (!session.buyerSlice && !session.payment))
      throw new DomainError("internal_error", "request already ended");
    const { attempts } = this.deps;
    const { usage, burn } = burnOf(session, attempt, ending);
    const incomplete = ending.kind === "incomplete";
    const uncharged = ending.kind === "uncharged" ? ending.reason : undefined;
    const flagged = ending.kind === "flagged" ? ending.reason : undefined;
    const split = computeCharge(burn, attempt.priceCentsPerDollar, this.deps.platformFeeBps);
    const now = this.deps.clock.now();
    const settleStart = performance.now();
    // paid per request: no buyer slice; the ending books the charge against the payment
    const buyer = session.buyerSlice;
    attempts.record(session, attempt, incomplete ? "incomplete" : "succeeded", null, now);
    // the charge leaves the slices now; what they no longer need goes back in the same commit
    buyer?.spend(split.grossMicroUsdc);
    attempt.offerSlice.spend(burn);
    const item = endItem(session, now, this.deps.lingering, {
      status: incomplete ? "incomplete" : "succeeded",
      error_code: incomplete ? "stream_incomplete" : (uncharged ?? flagged ?? null),
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
              prompt: usage.promptTokens,
              completion: usage.completionTokens,
              cached: usage.cachedTokens ?? 0,
              cache_write: usage.cacheWriteTokens ?? 0,
              buyer_holder: buyer?.holder ?? null,
              offer_holder: attempt.offerSlice.holder,
            },
      ...(ending.kind === "settled" && ending.extra ? { extra: ending.extra } : {}),
    });
    let balance: bigint;
    try {
      balance = await withSpan(
        "settlement",
        () => ({
          "svc.ending": ending.kind,
          "svc.support_reference": session.supportReference,
          "svc.clearing_price_cents": attempt.priceCentsPerDollar,
          "svc.cost_usdc": formatDecimal6(split.grossMicroUsdc),
          "svc.burn_diem": formatDecimal6(burn),
        }),
        () => this.settlement.submit(item.item),
      );
    } catch (e) {
      // the answer may be lost after COMMIT: the request's record says whether it happened
      const committed = await this.committed(session.requestId, item.item.status);
      if (committed !== null) {
        logger.warn({ err: e, requestId: session.requestId }, "settlement committed; its answer was lost");
        balance = committed;
      } else {
        throw await this.notCommitted(session, attempt, e, () => {
          buyer?.restore(split.grossMicroUsdc);
          attempt.offerSlice.restore(burn);
          item.undo();
        });
      }
    }
    session.done = true;
    session.timing.settleMs = performance.now() - settleStart;
    attempts.releaseSlots(session, attempt);
    void this.deps.bridge.close(session);
    if (ending.kind !== "uncharged") {
      this.deps.metrics.clear(session.model.modality, split.grossMicroUsdc);
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
      ...(flagged ? { flagged } : {}),
      clearingPriceCents: attempt.priceCentsPerDollar,
      burnMicroDiem: burn,
      cachedTokens: usage.cachedTokens ?? 0,
      cacheWriteTokens: usage.cacheWriteTokens ?? 0,
      balanceRemainingMicroUsdc: balance,
      supportReference: session.supportReference,
      requestId: session.requestId,
    };
  }

  /**
   * The buyer's confirmed balance when request `requestId`'s ending committed with `status` (its
   * record exists), else null: asked after a commit that threw, whose answer may have been lost after
   * COMMIT. A lookup that fails is asked again twice; one that never answers counts as not committed
   * (the request is then recorded as failed, and that insert loses to a committed record).
   */
  private async committed(requestId: string, status: string): Promise<bigint | null> {
    for (let tries = 0; tries < 3; tries++) {
      try {
        const record = await this.deps.settlement.ended(requestId);
        return record && record.status === status ? record.confirmed : null;
      } catch (e) {
        logger.warn({ err: e, requestId }, "could not read whether a settlement committed");
        await new Promise((r) => setTimeout(r, 50 * (tries + 1)));
      }
    }
    return null;
  }

  /** A charge that did not commit: nothing of it happened; the request is recorded as failed, 500 settle_failed. */
  private async notCommitted(
    session: InferenceSession,
    attempt: Attempt,
    e: unknown,
    undo: () => void,
  ): Promise<DomainError> {
    logger.error({ err: e, requestId: session.requestId }, "settlement did not commit");
    this.deps.metrics.settleFailed();
    // the slices hold the charge and what was to go back again; its attempt is aborted
    undo();
    const last = session.attempts[session.attempts.length - 1];
    if (last) last.outcome = "aborted";
    this.deps.keys.free(attempt);
    return this.fail(
      session,
      new DomainError("settle_failed", "Settlement did not commit; nothing was charged. Safe to retry.", {
        supportReference: session.supportReference,
      }),
    );
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
    if (attempt) this.deps.attempts.record(session, attempt, outcome, null, now);
    const ending = endItem(session, now, this.deps.lingering, { status: "failed", error_code: errorCode });
    try {
      await withSpan(
        "settlement",
        () => ({
          "svc.ending": "failed",
          "svc.error_code": errorCode,
          "svc.support_reference": session.supportReference,
        }),
        () => this.settlement.submit(ending.item),
      );
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
    void this.deps.bridge.close(session);
    this.deps.attempts.releaseSlots(session, attempt);
  }

  /** Records the failure of the whole request (releasing everything) and returns the error to throw. */
  async fail(session: InferenceSession, err: DomainError): Promise<DomainError> {
    err.details.supportReference ??= session.supportReference;
    if (!session.done) {
      if (session.attempt) await this.deps.attempts.end(session, null).catch(() => undefined);
      await this.abort(session, err.code);
    }
    return err;
  }

  /** Marks the first byte sent to the buyer (timings). */
  firstByte(session: InferenceSession): void {
    session.firstByteAt ??= this.deps.clock.now();
    const t = session.timing;
    if (t.upstreamMs === undefined) t.upstreamMs = performance.now() - t.start - (t.admitMs ?? 0);
  }
}

/** The usage recorded and the burn charged for an ending (see `Endings.charge`). */
function burnOf(session: InferenceSession, attempt: Attempt, ending: Ending): { usage: Usage; burn: bigint } {
  if (ending.kind === "uncharged") return { usage: { promptTokens: 0, completionTokens: 0 }, burn: 0n };
  if (ending.kind === "settled") {
    return { usage: ending.usage, burn: minBig(session.pricer.burn(ending.usage), session.plan.maxBurnMicroDiem) };
  }
  if (ending.kind === "flagged") {
    return {
      usage: { promptTokens: 0, completionTokens: 0 },
      burn: minBig(maxBig(ending.burnMicroDiem, 0n), session.plan.maxBurnMicroDiem),
    };
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
 * The upstream answered the attempt, reporting the key's balance before the call
 * (`reportedMicroDiem`, null when it did not): notes the supplier's pre-call balance as known now —
 * that, the key's last known balance, and the admitted maxima of the other requests in flight on
 * the key at this moment (this process's slice of the key's one live offer: none of theirs is
 * debited upstream yet, so the reported balance does not net them).
 */
export function notePreCallBalance(
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
