import { getAddress, type Hex } from "viem";
import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import { Prisma } from "../../generated/prisma/client.js";
import { type Clock, utcDay } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import { debitPayout, reversePayout } from "../ledger/ledger.js";
import type { WebhookOutbox } from "../webhooks/outbox.js";
import { payoutSentData } from "../webhooks/payloads.js";
import type { PayoutRunResult } from "./supply-types.js";

/** A supplier is paid once their payable balance reaches 1 USDC (docs/decisions.md "Supply"). */
export const PAYOUT_MINIMUM_MICRO = 1_000_000n;
/** A payout whose send was attempted but not recorded is looked for on chain after this long. */
export const PAYOUT_RESEND_AFTER_MS = 10 * 60_000;
/** How far back the chain is searched for an unrecorded payout transfer (~5 h of Base blocks). */
export const PAYOUT_CHAIN_LOOKBACK_BLOCKS = 9_000n;
/** Older unrecorded attempts fall outside what the lookback can vouch for: a human decides. */
export const PAYOUT_AUTO_RESEND_WINDOW_MS = 4 * 3_600_000;
/** One payout run at a time across processes (they share the treasury key and its nonces). */
export const PAYOUT_RUN_LEASE_MS = 15 * 60_000;
const PAYOUT_LEASE = { name: "payouts-run", period: "lease" } as const;
const PAYOUT_BATCH = 500;

type PayoutRow = Prisma.PayoutGetPayload<object>;

export interface PayoutDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  chain: ChainGateway | undefined;
  /** depth at which a sent payout counts as confirmed (CONFIRMATION_BLOCKS) */
  confirmationBlocks: number;
  /** `payout.sent` is written to the outbox with the recorded hash (never lost, never early) */
  webhooks?: Pick<WebhookOutbox, "emit" | "dispatch">;
}

/**
 * The daily supplier payout run (EarningsService.runDailyPayouts). Money leaves the payable book
 * before any USDC moves, and a transfer is sent at most once:
 *
 * 1. `pending`: one transaction inserts the payout (unique per account and UTC day) and posts
 *    supplier_payable −x, external +x with a guarded decrement of the payable balance.
 * 2. The send is claimed by a compare-and-set on `submittedAt` (null → now) so only one process
 *    sends; the tx hash is recorded right after `transferUsdc` returns (`submitted`).
 * 3. `confirmed` once the transfer reaches CONFIRMATION_BLOCKS; `failed` + a payout_reversal
 *    journal when the transfer reverted or was refused before sending.
 *
 * Crash recovery: `pending` with `submittedAt` null was never sent and is sent by the next run.
 * `pending` with `submittedAt` set and no hash means a crash (or an unknown RPC outcome) during the
 * send: after PAYOUT_RESEND_AFTER_MS, and only when the treasury has no transaction in its mempool,
 * the chain is searched for a matching unrecorded transfer; one found is adopted, otherwise the
 * transfer is sent again. Residual risk: a transfer broadcast but dropped and re-broadcast by the
 * node after that check could be doubled; attempts older than PAYOUT_AUTO_RESEND_WINDOW_MS are
 * left for a human (logged `PAYOUT NEEDS MANUAL RECOVERY`).
 *
 * One run at a time across processes: a lease row in scheduled_runs (the processes share the
 * treasury key, and concurrent senders would race for its nonces). A run that finds the lease
 * held returns `busy` and leaves the work to the holder or the next run.
 */
export class PayoutRunner {
  private warnedDisabled = false;

  constructor(private readonly deps: PayoutDeps) {}

  async run(): Promise<PayoutRunResult> {
    const result: PayoutRunResult = {
      paid: 0,
      created: 0,
      confirmed: 0,
      failed: 0,
      adopted: 0,
      disabled: false,
      busy: false,
    };
    const chain = this.deps.chain;
    if (!chain) {
      if (!this.warnedDisabled) {
        logger.warn("PAYOUT_PRIVATE_KEY is not set: supplier payouts are not sent");
        this.warnedDisabled = true;
      }
      return { ...result, disabled: true };
    }
    const lease = await this.acquireLease();
    if (!lease) return { ...result, busy: true };
    try {
      await this.confirmSubmitted(chain, result);
      await this.resumePending(chain, result);
      await this.createDue(chain, result);
    } finally {
      await this.releaseLease(lease).catch((e: unknown) => logger.warn({ err: e }, "payout lease not released"));
    }
    return result;
  }

  /**
   * A lease row in scheduled_runs: taken when free (done) or stale (a crashed holder), by one
   * conditional upsert. Returns the lease start that identifies this holder.
   */
  private async acquireLease(): Promise<Date | null> {
    const now = this.deps.clock.now();
    const staleBefore = new Date(now.getTime() - PAYOUT_RUN_LEASE_MS);
    const rows = await this.deps.db.$queryRaw<{ started_at: Date }[]>`
      INSERT INTO scheduled_runs (name, period, started_at, done_at)
      VALUES (${PAYOUT_LEASE.name}, ${PAYOUT_LEASE.period}, ${now}, NULL)
      ON CONFLICT (name, period) DO UPDATE SET started_at = EXCLUDED.started_at, done_at = NULL
       WHERE scheduled_runs.done_at IS NOT NULL OR scheduled_runs.started_at < ${staleBefore}
      RETURNING started_at`;
    return rows[0]?.started_at ?? null;
  }

  private async releaseLease(startedAt: Date): Promise<void> {
    await this.deps.db.scheduledRun.updateMany({
      where: { name: PAYOUT_LEASE.name, period: PAYOUT_LEASE.period, startedAt, doneAt: null },
      data: { doneAt: this.deps.clock.now() },
    });
  }

  /** Step 3: sent payouts reach confirmation depth (or turn out reverted). */
  private async confirmSubmitted(chain: ChainGateway, result: PayoutRunResult): Promise<void> {
    const rows = await this.deps.db.payout.findMany({
      where: { status: "submitted" },
      orderBy: { createdAt: "asc" },
      take: PAYOUT_BATCH,
    });
    for (const p of rows) {
      if (!p.txHash) continue;
      const c = await chain.getConfirmations(p.txHash as Hex);
      if (!c.ok) {
        if (c.failure.kind !== "not_found") {
          logger.warn({ payoutId: p.id, kind: c.failure.kind }, "payout confirmation not read");
        }
        continue;
      }
      if (c.value.status === "reverted") {
        if (await this.fail(p, "transfer reverted on chain")) result.failed += 1;
        continue;
      }
      if (c.value.confirmations < this.deps.confirmationBlocks) continue;
      const moved = await this.deps.db.payout.updateMany({
        where: { id: p.id, status: "submitted" },
        data: { status: "confirmed", confirmedAt: this.deps.clock.now() },
      });
      if (moved.count === 1) {
        result.confirmed += 1;
        this.publish(p.accountId, `payout:${p.id}:confirmed`, false);
      }
    }
  }

  /** Crash leftovers: payouts recorded but not (known to be) sent. */
  private async resumePending(chain: ChainGateway, result: PayoutRunResult): Promise<void> {
    const rows = await this.deps.db.payout.findMany({
      where: { status: "pending", txHash: null },
      orderBy: { createdAt: "asc" },
      take: PAYOUT_BATCH,
    });
    const now = this.deps.clock.now().getTime();
    for (const p of rows) {
      if (p.submittedAt === null) {
        await this.send(chain, p, null, result);
        continue;
      }
      const age = now - p.submittedAt.getTime();
      if (age < PAYOUT_RESEND_AFTER_MS) continue;
      const earlier = await this.findUnrecordedTransfer(chain, p);
      if (earlier === "unknown") continue;
      if (earlier !== null) {
        await this.adopt(p, earlier, result);
        continue;
      }
      if (age > PAYOUT_AUTO_RESEND_WINDOW_MS) {
        logger.error(
          { payoutId: p.id, accountId: p.accountId, amountMicroUsdc: p.amountMicroUsdc.toString() },
          "PAYOUT NEEDS MANUAL RECOVERY: send attempted long ago, outcome unknown and no transfer found",
        );
        continue;
      }
      await this.send(chain, p, p.submittedAt, result);
    }
  }

  /** Steps 1–2 for every supplier due today. */
  private async createDue(chain: ChainGateway, result: PayoutRunResult): Promise<void> {
    const { db } = this.deps;
    const period = utcDay(this.deps.clock.now());
    // every holder folds first, so the payables hold every clear appended so far (docs/decisions.md
    // "One append per clear"); a share appended after this is paid in the next run
    await db.$queryRaw`SELECT count(*)::int AS sold_out FROM svc_fold_all()`;
    const due = await db.account.findMany({
      where: { supplierPayableMicroUsdc: { gte: PAYOUT_MINIMUM_MICRO }, payouts: { none: { period } } },
      select: { id: true, walletAddress: true, supplierPayableMicroUsdc: true },
      orderBy: { id: "asc" },
      take: PAYOUT_BATCH,
    });
    for (const a of due) {
      let payout: PayoutRow;
      try {
        payout = await db.$transaction(async (tx) => {
          const p = await tx.payout.create({
            data: { accountId: a.id, period, toAddress: a.walletAddress, amountMicroUsdc: a.supplierPayableMicroUsdc },
          });
          await debitPayout(tx, { accountId: a.id, payoutId: p.id, amountMicroUsdc: a.supplierPayableMicroUsdc });
          return p;
        });
      } catch (e) {
        // another process created today's payout first: already done
        if (e instanceof Prisma.PrismaClientKnownRequestError && e.code === "P2002") continue;
        logger.error({ err: e, accountId: a.id }, "payout not recorded; retried on the next run");
        continue;
      }
      result.created += 1;
      this.publish(a.id, `payout:${payout.id}:pending`, true);
      await this.send(chain, payout, null, result);
    }
  }

  /**
   * Claims the send (compare-and-set on submittedAt), transfers, records the hash at once.
   * `expectedSubmittedAt` is what this run saw: another process that claimed it first wins.
   */
  private async send(
    chain: ChainGateway,
    p: PayoutRow,
    expectedSubmittedAt: Date | null,
    result: PayoutRunResult,
  ): Promise<void> {
    const { db } = this.deps;
    const claimed = await db.payout.updateMany({
      where: { id: p.id, status: "pending", txHash: null, submittedAt: expectedSubmittedAt },
      data: { submittedAt: this.deps.clock.now() },
    });
    if (claimed.count !== 1) return;
    const r = await chain.transferUsdc({ to: getAddress(p.toAddress), amountMicro: p.amountMicroUsdc });
    if (r.ok) {
      result.paid += 1;
      try {
        const sent = { txHash: r.value.txHash.toLowerCase(), submittedAt: this.deps.clock.now() };
        await this.recordSent(p, sent, (tx) =>
          tx.payout.updateMany({ where: { id: p.id }, data: { status: "submitted", ...sent } }),
        );
      } catch (e) {
        logger.error(
          { err: e, payoutId: p.id, txHash: r.value.txHash },
          "payout sent but its hash was not recorded; a later run adopts it from the chain",
        );
        return;
      }
      this.publish(p.accountId, `payout:${p.id}:submitted`, false);
      return;
    }
    if (r.failure.kind === "reverted" || r.failure.kind === "no_wallet") {
      // refused before broadcast: no USDC moved
      if (await this.fail(p, `transfer refused: ${r.failure.message}`)) result.failed += 1;
      return;
    }
    logger.warn(
      { payoutId: p.id, kind: r.failure.kind },
      "payout transfer outcome unknown; checked against the chain on a later run",
    );
  }

  /**
   * A USDC transfer treasury → payee of exactly this amount, in the lookback window, that no payout
   * has recorded. "unknown" when the chain cannot tell yet (RPC failure, or the treasury has a
   * transaction still in its mempool).
   */
  private async findUnrecordedTransfer(chain: ChainGateway, p: PayoutRow): Promise<Hex | null | "unknown"> {
    const treasury = chain.walletClient?.account.address;
    if (!treasury) return "unknown";
    try {
      const [pendingNonce, minedNonce] = await Promise.all([
        chain.publicClient.getTransactionCount({ address: treasury, blockTag: "pending" }),
        chain.publicClient.getTransactionCount({ address: treasury, blockTag: "latest" }),
      ]);
      if (pendingNonce > minedNonce) return "unknown";
    } catch (e) {
      logger.warn({ err: e, payoutId: p.id }, "treasury nonce not read");
      return "unknown";
    }
    const head = await chain.getBlockNumber();
    if (!head.ok) return "unknown";
    const fromBlock = head.value > PAYOUT_CHAIN_LOOKBACK_BLOCKS ? head.value - PAYOUT_CHAIN_LOOKBACK_BLOCKS : 0n;
    const logs = await chain.getUsdcTransferLogs({
      from: treasury,
      to: getAddress(p.toAddress),
      fromBlock,
      toBlock: head.value,
    });
    if (!logs.ok) return "unknown";
    const hashes = logs.value
      .filter((l) => l.valueMicroUsdc === p.amountMicroUsdc)
      .map((l) => l.txHash.toLowerCase() as Hex);
    if (hashes.length === 0) return null;
    const recorded = await this.deps.db.payout.findMany({
      where: { txHash: { in: hashes } },
      select: { txHash: true },
    });
    const known = new Set(recorded.map((r) => r.txHash));
    return hashes.find((h) => !known.has(h)) ?? null;
  }

  private async adopt(p: PayoutRow, txHash: Hex, result: PayoutRunResult): Promise<void> {
    try {
      const moved = await this.recordSent(p, { txHash, submittedAt: p.submittedAt }, (tx) =>
        tx.payout.updateMany({
          where: { id: p.id, status: "pending", txHash: null, submittedAt: p.submittedAt },
          data: { status: "submitted", txHash },
        }),
      );
      if (moved.count !== 1) return;
    } catch (e) {
      if (e instanceof Prisma.PrismaClientKnownRequestError && e.code === "P2002") return;
      throw e;
    }
    logger.info({ payoutId: p.id, txHash }, "unrecorded payout transfer found on chain and recorded");
    result.adopted += 1;
    this.publish(p.accountId, `payout:${p.id}:submitted`, false);
  }

  /**
   * Records a sent transfer (`write`, the count of payouts it moved: 1 or 0) and, when it moved the
   * payout, `payout.sent` to the supplier's webhooks in the same transaction (never lost, never early).
   */
  private async recordSent(
    p: PayoutRow,
    sent: { txHash: string; submittedAt: Date | null },
    write: (tx: Prisma.TransactionClient) => Promise<{ count: number }>,
  ): Promise<{ count: number }> {
    const { moved, ids } = await this.deps.db.$transaction(async (tx) => {
      const m = await write(tx);
      if (m.count !== 1 || !this.deps.webhooks) return { moved: m, ids: [] as string[] };
      const data = payoutSentData({ ...p, ...sent });
      return { moved: m, ids: await this.deps.webhooks.emit(tx, p.accountId, "payout.sent", data) };
    });
    await this.deps.webhooks?.dispatch(ids);
    return moved;
  }

  /** Conditional: only a pending or submitted payout fails, once, with its amount returned. */
  private async fail(p: PayoutRow, reason: string): Promise<boolean> {
    const failed = await this.deps.db.$transaction(async (tx) => {
      const moved = await tx.payout.updateMany({
        where: { id: p.id, status: { in: ["pending", "submitted"] } },
        data: { status: "failed", failureReason: reason.slice(0, 500) },
      });
      if (moved.count !== 1) return false;
      await reversePayout(tx, { accountId: p.accountId, payoutId: p.id, amountMicroUsdc: p.amountMicroUsdc });
      return true;
    });
    if (failed) {
      logger.warn({ payoutId: p.id, reason }, "payout failed; amount returned to the supplier's payable balance");
      this.publish(p.accountId, `payout:${p.id}:failed`, true);
    }
    return failed;
  }

  /** `earningsChanged` to the owner; `balanceChanged` too when the payable balance moved. */
  private publish(accountId: string, kind: string, payableMoved: boolean): void {
    const at = this.deps.clock.now().toISOString();
    this.deps.bus.publish("earningsChanged", accountId, { accountId, kind, at });
    if (payableMoved) this.deps.bus.publish("balanceChanged", accountId, { accountId, kind: "supplier_payable", at });
  }
}
