import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Clock } from "../../lib/clock.js";
import { decodeCursor, keysetBefore, type Page, pageOf, pageSize } from "../../lib/cursor.js";
import { DomainError } from "../../lib/errors.js";
import { newestReadBound } from "../../lib/partitions.js";
import { accountLedgerLines } from "../ledger/ledger-lines.js";
import { liveBalanceColumns } from "../ledger/live-figures.js";
import type { WebhookOutbox } from "../webhooks/outbox.js";
import { PAYOUT_MINIMUM_MICRO, PayoutRunner } from "./payouts.js";
import type { PayoutRunResult, SupplierClearRow, SupplierLedgerLine, SupplierLedgerPage } from "./supply-types.js";

export interface EarningsDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  /** treasury side of the chain for payouts; undefined when PAYOUT_PRIVATE_KEY is unset */
  payoutChain: ChainGateway | undefined;
  confirmationBlocks: number;
  /** `payout.sent` goes to the outbox with the recorded transfer (never lost, never early) */
  webhooks?: Pick<WebhookOutbox, "emit" | "dispatch">;
}

/** A supplier's earnings: the payable ledger, the clears sold, and the daily payouts (payouts.ts). */
export class EarningsService {
  private readonly payouts: PayoutRunner;

  constructor(private readonly deps: EarningsDeps) {
    this.payouts = new PayoutRunner({
      db: deps.db,
      clock: deps.clock,
      bus: deps.bus,
      chain: deps.payoutChain,
      confirmationBlocks: deps.confirmationBlocks,
      webhooks: deps.webhooks,
    });
  }

  /**
   * The account's supplier_payable and supplier_held lines (its clears' credits, on hold for a video
   * job until it is final, and the written entries: releases of held shares, refunds, payouts, their
   * reversals), newest first, keyset-paginated, with the payable (negative while a refund after a
   * payout is being recovered), held and paid-out totals and the most recent payouts. Reads only.
   */
  async supplierLedger(input: { accountId: string; limit?: number; cursor?: string }): Promise<SupplierLedgerPage> {
    const take = pageSize(input.limit);
    const after = input.cursor ? decodeCursor(input.cursor) : undefined;
    const { db } = this.deps;
    const [account, entries, totals, recent] = await Promise.all([
      liveBalanceColumns(db, input.accountId),
      accountLedgerLines(db, {
        accountId: input.accountId,
        now: this.deps.clock.now(),
        books: ["supplier_payable", "supplier_held"],
        olderThan: after,
        limit: take + 1,
      }),
      db.payout.groupBy({
        by: ["status"],
        where: { accountId: input.accountId },
        _sum: { amountMicroUsdc: true },
      }),
      db.payout.findMany({
        where: { accountId: input.accountId },
        orderBy: [{ createdAt: "desc" }, { id: "desc" }],
        take: 10,
      }),
    ]);
    if (!account) throw new DomainError("not_found", "Account not found.");
    const sum = (s: string) => totals.find((t) => t.status === s)?._sum.amountMicroUsdc ?? 0n;
    const page = pageOf(
      entries,
      take,
      (e): SupplierLedgerLine => ({
        id: e.id,
        book: e.book === "supplier_held" ? "supplier_held" : "supplier_payable",
        kind: e.kind,
        amountMicroUsdc: e.amountMicroUsdc,
        transactionId: e.transactionId,
        transactionKind: e.transactionKind,
        createdAt: e.createdAt,
      }),
      (e) => ({ at: e.createdAt, id: e.id }),
    );
    return {
      payableMicroUsdc: account.supplierPayableMicroUsdc,
      heldMicroUsdc: account.supplierHeldMicroUsdc,
      paidOutMicroUsdc: sum("submitted") + sum("confirmed"),
      payoutPendingMicroUsdc: sum("pending"),
      payoutMinimumMicroUsdc: PAYOUT_MINIMUM_MICRO,
      recentPayouts: recent.map((p) => ({
        id: p.id,
        period: p.period,
        toAddress: p.toAddress,
        amountMicroUsdc: p.amountMicroUsdc,
        status: p.status,
        txHash: p.txHash,
        failureReason: p.failureReason,
        createdAt: p.createdAt,
        submittedAt: p.submittedAt,
        confirmedAt: p.confirmedAt,
      })),
      items: page.items,
      nextCursor: page.nextCursor,
    };
  }

  /** Clears this account sold as the supplier, newest first, keyset-paginated. No buyer identity. */
  async supplierInferenceHistory(input: {
    accountId: string;
    limit?: number;
    cursor?: string;
  }): Promise<Page<SupplierClearRow>> {
    const take = pageSize(input.limit);
    const after = input.cursor ? decodeCursor(input.cursor) : undefined;
    const rows = await this.deps.db.clear.findMany({
      where: {
        supplierAccountId: input.accountId,
        ...keysetBefore(after),
        // newest month first, the DEFAULT partition pruned (lib/partitions.ts)
        createdAt: { lte: newestReadBound(this.deps.clock.now(), after?.at) },
      },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      select: {
        id: true,
        offerId: true,
        upstreamKeyId: true,
        model: true,
        modality: true,
        priceCentsPerDollar: true,
        burnMicroDiem: true,
        grossMicroUsdc: true,
        feeMicroUsdc: true,
        supplierMicroUsdc: true,
        refundedAt: true,
        createdAt: true,
      },
      take: take + 1,
    });
    return pageOf(
      rows,
      take,
      (c): SupplierClearRow => ({
        clearId: c.id,
        offerId: c.offerId,
        upstreamKeyId: c.upstreamKeyId,
        model: c.model,
        modality: c.modality,
        priceCentsPerDollar: c.priceCentsPerDollar,
        burnMicroDiem: c.burnMicroDiem,
        grossMicroUsdc: c.grossMicroUsdc,
        feeMicroUsdc: c.feeMicroUsdc,
        earnedMicroUsdc: c.supplierMicroUsdc,
        refundedAt: c.refundedAt,
        createdAt: c.createdAt,
      }),
      (c) => ({ at: c.createdAt, id: c.id }),
    );
  }

  // ───────────────────────────── payouts ─────────────────────────────

  /**
   * Worker `payouts` (hourly): confirms sent payouts, finishes payouts a crash left unsent, then
   * pays every supplier whose payable balance is at least PAYOUT_MINIMUM_MICRO once per UTC day
   * (held shares are not payable; a negative balance waits for later earnings).
   * See payouts.ts for the crash-safety rules. Does nothing (logged once) without a payout key.
   */
  async runDailyPayouts(): Promise<PayoutRunResult> {
    return this.payouts.run();
  }
}
