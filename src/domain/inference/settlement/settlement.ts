import { Batcher } from "../../../lib/batcher.js";
import { logger } from "../../../lib/logger.js";
import type { EndItem, EscrowPlan, EscrowReturn } from "./end-item.js";
import type { SettlementStore } from "./stores.js";

/** Request endings per group commit (see Batcher). One batch in flight keeps a process's endings in order. */
const BATCH = { maxBatch: 64, maxInFlight: 1 };

/**
 * THE settlement adapter: what `end` returns — an `EndItem` and its `EscrowPlan` — applied to this
 * process's slices and committed (`svc_end_batch`), group-committed: one transaction for the endings
 * that arrive while the previous batch commits. Resolves each with the buyer's confirmed balance
 * after it.
 */
export class Settlement {
  private readonly batcher: Batcher<EndItem, bigint>;

  constructor(
    private readonly store: SettlementStore,
    /** whether an ending keeps an idle slice with the process (see `Slice.giveBack`, `EscrowGiveBack`) */
    private readonly lingering: boolean,
    /** an ending with a charge committed (its holder folds it soon) */
    private readonly appended: () => Promise<void> | undefined = () => undefined,
  ) {
    this.batcher = new Batcher(
      (items) => store.commit(items),
      async (i) => (await store.commit([i]))[0] ?? 0n,
      BATCH,
    );
  }

  /**
   * Applies `escrow` and commits `item` with the give-backs it found. A commit that throws is asked
   * about (its answer may have been lost after COMMIT): committed, it counts; not, the spends and
   * give-backs are held again and — for an ending without a charge, whose record must not be lost
   * to a give-back that cannot commit (a slice the sweeper took from a stalled process) — the
   * record is written alone; otherwise the error is thrown.
   */
  async commit(item: EndItem, escrow: EscrowPlan): Promise<bigint> {
    const applied = applyEscrow(escrow, this.lingering);
    try {
      return await this.submit({ ...item, returns: applied.returns });
    } catch (e) {
      const confirmed = await this.committed(item.requestId, item.status);
      if (confirmed !== null) {
        logger.warn({ err: e, requestId: item.requestId }, "settlement committed; its answer was lost");
        return confirmed;
      }
      applied.undo();
      if (item.charge !== null || applied.returns.length === 0) throw e;
      return this.submit({ ...item, returns: [] });
    }
  }

  private async submit(item: EndItem): Promise<bigint> {
    const confirmed = await this.batcher.submit(item);
    // with no fold delay the clear is folded before the answer (ESCROW_FOLD_MS=0)
    if (item.charge !== null) await this.appended();
    return confirmed;
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
        const record = await this.store.ended(requestId);
        return record && record.status === status ? record.confirmed : null;
      } catch (e) {
        logger.warn({ err: e, requestId }, "could not read whether a settlement committed");
        await new Promise((r) => setTimeout(r, 50 * (tries + 1)));
      }
    }
    return null;
  }

  get stats() {
    return { ...this.batcher.stats };
  }
}

/**
 * An ending's escrow plan applied to the slices now: the holds released (once), the charge spent,
 * what each touched slice no longer needs given back (none for an idle slice that lingers). `undo`
 * holds the spends and give-backs again if the ending does not commit; a released hold stays
 * released (the request no longer uses it either way).
 */
function applyEscrow(plan: EscrowPlan, lingering: boolean): { returns: EscrowReturn[]; undo: () => void } {
  for (const h of plan.release) h.release();
  for (const s of plan.spend) s.slice.spend(s.amount);
  const returns: EscrowReturn[] = [];
  const given: Array<() => void> = [];
  const nowMs = performance.now();
  for (const slice of plan.giveBack) {
    const back = slice.giveBack(lingering, nowMs);
    if (back <= 0n) continue;
    returns.push(
      slice.kind === "buyer"
        ? { holder: slice.holder, accountId: slice.id, amountMicroUsdc: back }
        : { holder: slice.holder, offerId: slice.id, amountMicroDiem: back },
    );
    given.push(() => slice.restore(back));
  }
  return {
    returns,
    undo: () => {
      for (const s of plan.spend) s.slice.restore(s.amount);
      for (const g of given) g();
    },
  };
}
