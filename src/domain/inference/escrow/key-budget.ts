import type { Clock } from "../../../lib/clock.js";
import { DomainError } from "../../../lib/errors.js";
import { formatDecimal6 } from "../../../lib/money.js";
import { budgetPeriods } from "../../keys/key-period.js";
import { MAX_PLANS } from "../pipeline/admission.js";
import { refused } from "../pipeline/diagnostics.js";
import type { AdmissionDraft, InferenceSession, KeyRules, RoutableModel } from "../pipeline/session.js";
import type { KeyBudgetStore } from "../settlement/stores.js";
import { planRequest } from "./escrow-take.js";
import type { HolderLease } from "./holder-lease.js";

/**
 * Per-key rules at admission (docs/decisions.md "Key budgets"): the models a key may call
 * (`allowModel`) and its budget (`KeyBudgets.hold`). A key with a limit holds each request's
 * maximum charge against what its period leaves (`svc_key_reserve`: the key's spend of the period,
 * summed from `api_key_spend`, plus the holds of its requests in flight, under the key row's lock),
 * before any upstream call; the ending charges the actual cost and deletes the hold in the same
 * transaction as the charge (`svc_end_items`). So N concurrent requests on one key, in any number of
 * processes, never charge more than the limit in a period.
 */

/** 403 `model_not_allowed` when the key lists models and this is not one of them. */
export function allowModel(rules: KeyRules | undefined, model: RoutableModel): void {
  if (!rules || rules.models.length === 0 || rules.models.includes(model.id)) return;
  throw new DomainError(
    "model_not_allowed",
    `This API key may not call ${model.id}; it may call ${rules.models.join(", ")}.`,
    { field: "model" },
  );
}

/** 402 `key_budget_exceeded`: what the period leaves, and when it starts again (no `accepts`: funding does not help). */
export function keyBudgetExceeded(session: InferenceSession, remaining: bigint, resetsAt: Date | null): DomainError {
  return new DomainError(
    "key_budget_exceeded",
    resetsAt
      ? `This API key's budget for the period cannot cover this request; it has ${formatDecimal6(remaining)} USDC left until ${resetsAt.toISOString()}.`
      : `This API key's budget cannot cover this request; it has ${formatDecimal6(remaining)} USDC left and does not reset.`,
    {
      remainingUsdc: formatDecimal6(remaining),
      resetsAt: resetsAt ? resetsAt.toISOString() : null,
      supportReference: session.supportReference,
    },
  );
}

export interface KeyBudgetDeps {
  budgets: KeyBudgetStore;
  lease: HolderLease;
  clock: Clock;
}

/** Tries before a request gives up on a hold that keeps changing under it (holder lost, policy changed). */
const MAX_HOLD_TRIES = 6;

export class KeyBudgets {
  /** the holder each held request's hold is filed under (it follows the request: `follow`) */
  private readonly holders = new WeakMap<InferenceSession, string>();

  constructor(private readonly deps: KeyBudgetDeps) {}

  /**
   * Holds the request's maximum charge against the calling key's budget and every budgeted
   * ancestor's (a planned request; nothing when no key of the chain has a limit). The periods are
   * those of the request's start (`session.startedAt`), the instant its charge is counted in
   * (`api_key_spend` by start day), so a hold and its charge never fall in different periods, even
   * when the admission (a video quote) crosses a boundary. A maximum the budgets cannot cover is
   * planned again against what the tightest leaves (an unbounded request sized down, as for a short
   * balance); 402 `key_budget_exceeded` when even the smallest request does not fit. After the hold
   * every plan stays within it (`planRequest`).
   */
  async hold(session: AdmissionDraft, rules: KeyRules | undefined): Promise<void> {
    if (!rules?.budgeted) return;
    const { budgets, lease, clock } = this.deps;
    const periods = budgetPeriods(session.startedAt);
    for (let tries = 0; ; tries++) {
      const current = lease.current();
      const holder = current instanceof Promise ? await current : current;
      const amount = session.plan.maxChargeMicroUsdc;
      const r = await budgets.reserve({
        holder: holder.id,
        requestId: session.requestId,
        apiKeyId: session.apiKeyId,
        periods,
        amountMicroUsdc: amount,
        now: clock.now(),
      });
      if (r.outcome === "ok") {
        session.budgetHold = amount;
        this.holders.set(session, holder.id);
        return;
      }
      if (r.outcome === "unlimited") return;
      if (r.outcome === "key_inactive") throw new DomainError("authentication_failed", "Invalid or revoked API key.");
      const resetsAt = r.reset ? periods[r.reset].end : null;
      if (tries >= MAX_HOLD_TRIES) throw refused(keyBudgetExceeded(session, 0n, resetsAt));
      if (r.outcome === "holder_lost") {
        lease.lose(holder);
      } else {
        // exceeded: plan again within what the tightest budget leaves, or refuse
        const left = r.remainingMicroUsdc ?? 0n;
        if (session.plans >= MAX_PLANS + 2 || !planRequest(session, left))
          throw refused(keyBudgetExceeded(session, left, resetsAt));
      }
    }
  }

  /** The admitted request (a frozen copy of its draft) keeps the draft's hold where it was filed. */
  carry(draft: InferenceSession, admitted: InferenceSession): void {
    const filed = this.holders.get(draft);
    if (filed !== undefined) this.holders.set(admitted, filed);
  }

  /**
   * Before each attempt: a held request whose process lost the holder its hold was taken under (the
   * lease expired and a top-up registered a new one) moves the hold to the holder it now runs under
   * (`svc_key_rehold`). The sweeper deletes a dead holder's holds with it, and a hold gone while its
   * request may still charge would let other requests spend what it holds (found by reading,
   * 2026-11-30). A hold already gone is taken again; 402 `key_budget_exceeded` when the budgets no
   * longer cover it (before any further upstream call).
   */
  async follow(session: InferenceSession, holder: { id: string }): Promise<"ok" | "holder_lost"> {
    const filed = this.holders.get(session);
    if (session.budgetHold === null || filed === undefined || filed === holder.id) return "ok";
    const periods = budgetPeriods(session.startedAt);
    const r = await this.deps.budgets.rehold({
      holder: holder.id,
      requestId: session.requestId,
      apiKeyId: session.apiKeyId,
      periods,
      amountMicroUsdc: session.budgetHold,
      now: this.deps.clock.now(),
    });
    if (r.outcome === "holder_lost") return "holder_lost";
    if (r.outcome === "key_inactive") throw new DomainError("authentication_failed", "Invalid or revoked API key.");
    if (r.outcome === "exceeded") {
      throw refused(keyBudgetExceeded(session, r.remainingMicroUsdc ?? 0n, r.reset ? periods[r.reset].end : null));
    }
    this.holders.set(session, holder.id);
    return "ok";
  }
}
