import type { EventBus } from "../../../adapters/pubsub.js";
import type { Clock } from "../../../lib/clock.js";
import { DomainError } from "../../../lib/errors.js";
import { logger } from "../../../lib/logger.js";
import type { Metrics } from "../../../lib/metrics.js";
import { computeCharge, formatDecimal6, maxBig, minBig } from "../../../lib/money.js";
import { withSpan } from "../../../lib/tracing.js";
import { uuidV7 } from "../../../lib/uuid7.js";
import { type Attempts, attemptRecord } from "../pipeline/attempts.js";
import type { InFlightBridge } from "../pipeline/in-flight-bridge.js";
import type { Attempt, AttemptRecord, InferenceSession, PreCallBalance, Settled, Usage } from "../pipeline/session.js";
import type { Trail } from "../pipeline/trail.js";
import type { SupplierKeys } from "../routing/supplier-keys.js";
import { ClearEvents } from "./clear-events.js";
import { type EndRows, endItem } from "./end-item.js";
import { Settlement } from "./settlement.js";
import type { SettlementStore } from "./stores.js";
import { billIncomplete, type IncompleteStream } from "./usage.js";

/**
 * How a request ends with its attempt's answer (the pipeline's one ending, see `InferencePipeline.run`):
 * `settled` on the usage the upstream reported (with `extra` rows the modality writes in the same
 * transaction), `incomplete` — a stream that ended without its usage, billed on what the buyer was
 * shown (`billIncomplete`) —, `flagged` — answered, the provider flagged it (`reason`, e.g. a content
 * violation) and burned `burnMicroDiem` on the key for it (`burnedOnKey`): charged that, never above
 * the admitted maximum, `reason` recorded as the error code — or `uncharged`: answered, but the
 * provider did not charge for it (nothing charged, no clear; `reason` recorded as the error code). A
 * request that ends without an answer is aborted (`InferencePipeline.abort`).
 */
export type Ending =
  | { kind: "settled"; usage: Usage; extra?: EndRows }
  | { kind: "incomplete"; stream: IncompleteStream }
  | { kind: "flagged"; reason: string; burnMicroDiem: bigint }
  | { kind: "uncharged"; reason: string };

/** How a request ended: what the end phase answers and keeps (never a flag on the request). */
export type Ended = { kind: "charged"; settled: Settled } | { kind: "aborted"; errorCode: string };

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
 * answer (`charge`, on an `Ending`), or not (`abort`; `fail` for a refusal). Each computes the
 * request's `EndItem` and `EscrowPlan` (`endItem`) and hands both to the settlement adapter, which
 * applies and group-commits them (`Settlement.commit`); then the slots are given back and the events
 * published. How each request ended is kept here (`ended`), keyed by its trail.
 */
export class Endings {
  private readonly settlement: Settlement;
  private readonly events: ClearEvents;
  private readonly ends = new WeakMap<Trail, Ended>();

  constructor(private readonly deps: EndingDeps) {
    this.settlement = new Settlement(deps.settlement, deps.lingering, deps.appended);
    this.events = new ClearEvents(deps.bus);
  }

  /** Group-commit figures (observability, tests). */
  get stats() {
    return this.settlement.stats;
  }

  /** How the request ended; undefined while it has not. */
  ended(session: Pick<InferenceSession, "trail">): Ended | undefined {
    return this.ends.get(session.trail);
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
    if (this.ends.has(session.trail) || (!session.buyerHold && !session.payment))
      throw new DomainError("internal_error", "request already ended");
    const { usage, burn } = burnOf(session, attempt, ending);
    const incomplete = ending.kind === "incomplete";
    const uncharged = ending.kind === "uncharged" ? ending.reason : undefined;
    const flagged = ending.kind === "flagged" ? ending.reason : undefined;
    const split = computeCharge(burn, attempt.priceCentsPerDollar, this.deps.platformFeeBps);
    const now = this.deps.clock.now();
    const settleStart = performance.now();
    const record = attemptRecord(attempt, incomplete ? "incomplete" : "succeeded", null, now);
    const { item, escrow } = endItem(session, now, {
      status: incomplete ? "incomplete" : "succeeded",
      errorCode: incomplete ? "stream_incomplete" : (uncharged ?? flagged ?? null),
      attempt: { attempt, record },
      charge:
        ending.kind === "uncharged"
          ? undefined
          : {
              offerId: attempt.offerId,
              upstreamKeyId: attempt.upstreamKeyId,
              supplierAccountId: attempt.supplierAccountId,
              priceCentsPerDollar: attempt.priceCentsPerDollar,
              burnMicroDiem: burn,
              grossMicroUsdc: split.grossMicroUsdc,
              feeMicroUsdc: split.feeMicroUsdc,
              supplierMicroUsdc: split.supplierMicroUsdc,
              // in time order, as its record's (docs/decisions.md "Record ids in time order")
              clearId: uuidV7(now),
              promptTokens: usage.promptTokens,
              completionTokens: usage.completionTokens,
              cachedTokens: usage.cachedTokens ?? 0,
              cacheWriteTokens: usage.cacheWriteTokens ?? 0,
              // paid per request: no buyer slice; the ending books the charge against the payment
              buyerHolder: session.buyerHold?.slice.holder ?? null,
              offerHolder: attempt.offerHold.slice.holder,
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
        () => this.settlement.commit(item, escrow),
      );
    } catch (e) {
      throw await this.notCommitted(session, attempt, record, e);
    }
    session.trail.ended(record);
    const settled: Settled = {
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
      settleMs: performance.now() - settleStart,
    };
    this.ends.set(session.trail, { kind: "charged", settled });
    this.deps.attempts.releaseSlots(session, attempt);
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
    return settled;
  }

  /** A charge that did not commit: nothing of it happened; the request is recorded as failed, 500 settle_failed. */
  private async notCommitted(
    session: InferenceSession,
    attempt: Attempt,
    record: AttemptRecord,
    e: unknown,
  ): Promise<DomainError> {
    logger.error({ err: e, requestId: session.requestId }, "settlement did not commit");
    this.deps.metrics.settleFailed();
    // the slices hold the charge and what was to go back again (the settlement undid them); its
    // attempt is recorded aborted
    session.trail.ended({ ...record, outcome: "aborted" });
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
   * any content, a refusal, an unexpected error): its holds and slots are released, the record
   * says why. Idempotent.
   */
  async abort(
    session: InferenceSession,
    errorCode: string,
    outcome: "request_rejected" | "aborted" = "aborted",
  ): Promise<void> {
    if (this.ends.has(session.trail)) return;
    this.ends.set(session.trail, { kind: "aborted", errorCode });
    const now = this.deps.clock.now();
    const attempt = session.trail.inFlight();
    const record = attempt ? attemptRecord(attempt, outcome, null, now) : null;
    const { item, escrow } = endItem(session, now, {
      status: "failed",
      errorCode,
      attempt: attempt && record ? { attempt, record } : null,
    });
    if (record) session.trail.ended(record);
    await withSpan(
      "settlement",
      () => ({
        "svc.ending": "failed",
        "svc.error_code": errorCode,
        "svc.support_reference": session.supportReference,
      }),
      () => this.settlement.commit(item, escrow),
    ).catch((err: unknown) => logger.error({ err, requestId: session.requestId }, "could not record an ended request"));
    void this.deps.bridge.close(session);
    this.deps.attempts.releaseSlots(session, attempt);
  }

  /** Records the failure of the whole request (releasing everything) and returns the error to throw. */
  async fail(session: InferenceSession, err: DomainError): Promise<DomainError> {
    err.details.supportReference ??= session.supportReference;
    if (!this.ends.has(session.trail)) {
      if (session.trail.inFlight()) await this.deps.attempts.end(session, null).catch(() => undefined);
      await this.abort(session, err.code);
    }
    return err;
  }

  /** Marks the first byte sent to the buyer (timings). */
  firstByte(session: InferenceSession): void {
    if (session.trail.firstByteAt !== null) return;
    const upstreamMs = performance.now() - session.timingStart - (session.admitMs ?? 0);
    session.trail.firstByte(this.deps.clock.now(), upstreamMs);
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
    session.trail.preCall(attempt.ordinal) ?? preCallBalanceNow(session, attempt, null),
  );
  return { usage, burn: burnMicroDiem };
}

/**
 * The upstream answered the attempt, reporting the key's balance before the call
 * (`reportedMicroDiem`, null when it did not): notes the supplier's pre-call balance as known now
 * on the request's trail (see `preCallBalanceNow`).
 */
export function notePreCallBalance(
  session: InferenceSession,
  attempt: Attempt,
  reportedMicroDiem: bigint | null,
): void {
  session.trail.notePreCall(attempt.ordinal, preCallBalanceNow(session, attempt, reportedMicroDiem));
}

/**
 * The supplier's pre-call balance as known now: the reported balance, the key's last known
 * balance, and the admitted maxima of the other requests in flight on the key at this moment (this
 * process's slice of the key's one live offer: none of theirs is debited upstream yet, so the
 * reported balance does not net them).
 */
function preCallBalanceNow(
  session: InferenceSession,
  attempt: Attempt,
  reportedMicroDiem: bigint | null,
): PreCallBalance {
  return {
    reportedMicroDiem,
    knownMicroDiem: attempt.keyBalanceMicroDiem,
    othersInFlightMicroDiem: maxBig(attempt.offerHold.slice.used - session.plan.maxBurnMicroDiem, 0n),
  };
}
