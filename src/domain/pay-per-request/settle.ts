import type { Address } from "viem";
import { type Facilitator, settleVerdict, type UptoPayment } from "../../adapters/facilitator/types.js";
import { DomainError, type HeaderField } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { Settled } from "../inference/pipeline/session.js";
import { uptoReceipt } from "./challenge.js";
import type { RequestPaymentStore } from "./payment-store.js";

/**
 * The settle of a pay-per-request charge (docs/decisions.md "Pay per request"): after the
 * request's ending booked the charge C against the payment (`svc_end_items`: the clear, the payment
 * charged), C is settled with the facilitator — 0 moves nothing and asks nobody — and its cash side
 * is booked in the same transaction as the payment's new state:
 *
 * - the facilitator settled: `request_payment:<id>` (the receivable paid in cash);
 * - it refused (nothing moved, and this authorization cannot pay C): `payment_loss:<id>`, and the
 *   answer is withheld where it still can be (a buffered body); a stream's last frame says so;
 * - it cannot say, or never sent it: `reconciling`, queued for the chain to decide (never "pay again").
 */

/** A payment as the settle needs it: its row, its payer, and the payment and requirements the facilitator takes. */
export interface PaidPayment {
  id: string;
  payer: Address;
  upto: UptoPayment;
}

export type SettleOutcome =
  | { kind: "settled"; amount: bigint; transaction: string | null; header: HeaderField }
  | { kind: "reconciling"; amount: bigint; transaction: string | null; header: HeaderField }
  /** the facilitator refused: nothing moved (with `final`, the charge was booked as lost) */
  | { kind: "refused"; amount: bigint; reason: string; header: HeaderField };

export interface ReconciliationQueue {
  enqueue(paymentId: string): Promise<void>;
}

export class PaymentSettler {
  constructor(
    private readonly deps: {
      facilitator: Facilitator;
      store: RequestPaymentStore;
      reconciliation: ReconciliationQueue;
    },
  ) {}

  /**
   * `RequestPayment.settle` of a request: settles its charge before the answer goes out, and tells
   * the answer how (`Settled.payment`).
   * @throws invalid_payment (402) when the facilitator refused: the charge is the platform's loss,
   *   and the answer is withheld (a stream's content already went: its last frame is this error)
   */
  async settleCharge(p: PaidPayment, settled: Settled): Promise<Settled> {
    const o = await this.settle(p, settled.costMicroUsdc, { final: true });
    if (o.kind === "refused") {
      throw new DomainError(
        "invalid_payment",
        `The payment could not be settled (${o.reason}); nothing moved, and the answer is withheld. Sign a new payment to ask again.`,
        { supportReference: settled.supportReference, paymentResponse: o.header },
      );
    }
    return {
      ...settled,
      payment: { status: o.kind, amountMicroUsdc: o.amount, transaction: o.transaction, header: o.header },
    };
  }

  /**
   * Settles `charge`, the payment's booked charge (0: nothing moves). `final`: a refusal books the
   * charge as lost (the request's own settle); otherwise it is reported and the payment left
   * `settling` for the caller to look at the chain (a reconciler's settle, which may follow a settle
   * that did land).
   */
  async settle(p: PaidPayment, charge: bigint, o: { final: boolean }): Promise<SettleOutcome> {
    const { facilitator, store } = this.deps;
    const receipt = (success: boolean, transaction: string | null, amount: bigint, errorReason?: string) =>
      uptoReceipt({
        success,
        transaction,
        chainId: p.upto.requirements.chainId,
        payer: p.payer,
        amountMicroUsdc: amount,
        ...(errorReason ? { errorReason } : {}),
      });
    if (charge === 0n) {
      // nothing is owed: the port answers a settle of 0 without sending anything
      const zero = await facilitator.settleUpto(p.upto, 0n);
      if (!zero.ok) logger.warn({ paymentId: p.id, failure: zero.failure.message }, "a settle of 0 failed");
      await store.settledZero(p.id);
      return { kind: "settled", amount: 0n, transaction: null, header: receipt(true, null, 0n) };
    }
    // write-ahead: from here the settle may have been sent (a crash leaves it `settling`: the
    // reconciler asks the chain)
    if (!(await store.startSettle(p.id, charge))) {
      throw new DomainError("internal_error", "The payment is not charged with this amount; nothing was settled.");
    }
    const r = await facilitator.settleUpto(p.upto, charge);
    if (r.ok) {
      const tx = r.value.transaction === "" ? null : r.value.transaction.toLowerCase();
      try {
        await store.settled(p.id, charge, tx);
      } catch (e) {
        // settled but not recorded: the chain has it, the reconciler books it
        logger.error({ err: e, paymentId: p.id, transaction: tx }, "settled pay-per-request charge not recorded");
        await this.later(p.id, tx, "settled, not recorded");
      }
      return { kind: "settled", amount: charge, transaction: tx, header: receipt(true, tx, charge) };
    }
    const f = r.failure;
    const tx = f.transaction ? f.transaction.toLowerCase() : null;
    if (settleVerdict(f) === "refused") {
      const reason = f.reason ?? f.message;
      if (o.final) await store.lost(p.id, `settle refused: ${reason}`);
      return { kind: "refused", amount: charge, reason, header: receipt(false, tx, 0n, reason) };
    }
    // unknown (money may have moved) or not sent: the chain decides, the reconciler books it
    logger.warn({ paymentId: p.id, transaction: tx, failure: f.message }, "pay-per-request settle outcome unknown");
    await this.later(p.id, tx, `${f.kind}: ${f.message}`);
    return { kind: "reconciling", amount: charge, transaction: tx, header: receipt(false, tx, charge) };
  }

  /**
   * A payment whose request ended without a charge (refused, failed, the buyer gone) and nothing
   * settled: it settles 0 — nothing is sent — and is done (open → settled 0). Its receipt, or
   * undefined when the payment had moved on (charged, settled).
   */
  async settleUnused(p: PaidPayment): Promise<HeaderField | undefined> {
    if (!(await this.deps.store.settledZero(p.id))) return undefined;
    await this.deps.facilitator.settleUpto(p.upto, 0n);
    return uptoReceipt({
      success: true,
      transaction: null,
      chainId: p.upto.requirements.chainId,
      payer: p.payer,
      amountMicroUsdc: 0n,
    });
  }

  /** Marks the payment for reconciliation and queues it; the periodic scan covers it should the queue fail. */
  private async later(id: string, tx: string | null, note: string): Promise<void> {
    await this.deps.store.reconciling(id, tx, note).catch((e: unknown) => {
      logger.error({ err: e, paymentId: id }, "pay-per-request payment could not be marked for reconciliation");
    });
    await this.deps.reconciliation.enqueue(id).catch((e: unknown) => {
      logger.error({ err: e, paymentId: id }, "pay-per-request reconciliation could not be queued");
    });
  }
}
