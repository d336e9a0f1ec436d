import { type Address, getAddress } from "viem";
import { lockAccountRow } from "../../adapters/account-lock.js";
import type { Db } from "../../adapters/db.js";
import type { UptoPayment, UptoRequirements } from "../../adapters/facilitator/types.js";
import { Prisma, type RequestPayment } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { upsertAccountByWallet } from "../accounts/account-upsert.js";
import type { RouteKind } from "../inference/pipeline/session.js";
import { bookPaymentLoss, bookRequestPayment } from "../ledger/request-payments.js";
import type { RecordedPaidAnswer } from "./answers.js";

/**
 * The `request_payments` table (docs/decisions.md "Pay per request"): one row per `upto`
 * authorization, written before its request runs, moved through its states by conditional writes
 * only (a state is left once, by whoever moves it first), each cash-side move in one transaction
 * with its journal (ledger/request-payments.ts). The ending's charge is written by `svc_end_items`
 * (open → charged), never here.
 */

export type RequestPaymentRow = RequestPayment;

/** The requirements as the row keeps them (JSON: the maximum as a decimal string). */
export function storedRequirements(r: UptoRequirements): Record<string, unknown> {
  return { ...r, maxAmountMicroUsdc: r.maxAmountMicroUsdc.toString() };
}

/** The payment a row records, as the facilitator takes it again (a reconciler's settle). */
export function paymentOf(row: RequestPaymentRow): { id: string; payer: Address; upto: UptoPayment } {
  const r = row.requirements as unknown as UptoRequirements & { maxAmountMicroUsdc: string };
  return {
    id: row.id,
    payer: getAddress(row.payerAddress),
    upto: {
      payload: row.payload as unknown as UptoPayment["payload"],
      requirements: { ...r, maxAmountMicroUsdc: BigInt(r.maxAmountMicroUsdc) },
    },
  };
}

/** What a verified payment is recorded with before its request runs. */
export interface PaymentClaim {
  payer: string;
  route: RouteKind;
  payTo: string;
  asset: string;
  facilitator: string;
  nonce: bigint;
  maxMicroUsdc: bigint;
  deadline: Date;
  fingerprint: string;
  payload: unknown;
  requirements: Record<string, unknown>;
}

/** The states whose charge is booked and whose cash side is not. */
const UNSETTLED = ["charged", "settling", "reconciling"] as const;

export class RequestPaymentStore {
  constructor(private readonly deps: { db: Db; clock: Clock }) {}

  find(payer: string, nonce: bigint): Promise<RequestPaymentRow | null> {
    return this.deps.db.requestPayment.findUnique({
      where: { payerAddress_permit2Nonce: { payerAddress: payer.toLowerCase(), permit2Nonce: nonce.toString() } },
    });
  }

  byId(id: string): Promise<RequestPaymentRow | null> {
    return this.deps.db.requestPayment.findUnique({ where: { id } });
  }

  /**
   * The payer's account (made on first use, as an x402 signup makes one, with no key) and the
   * payment's row, in one transaction; `null` when the authorization is recorded already (its
   * Permit2 nonce is used once: a concurrent duplicate loses the insert). Refused (nothing written)
   * when the payer left a charge unpaid (a booked loss), or when what its unsettled payments may
   * still pull, with this one's maximum, exceeds `coverMicroUsdc` (its USDC balance read after
   * verify): many authorizations verified against one balance cannot all settle, so each would
   * buy content the platform is never paid for. The account row is locked (`lockAccountRow`), so
   * concurrent claims of one payer are counted one after the other.
   */
  async claim(c: PaymentClaim, coverMicroUsdc: bigint): Promise<RequestPaymentRow | null | { refused: string }> {
    try {
      return await this.deps.db.$transaction(async (tx) => {
        const account = await upsertAccountByWallet(tx, { walletAddress: c.payer, provider: "x402" });
        await lockAccountRow(tx, account.id);
        const payer = c.payer.toLowerCase();
        if ((await tx.requestPayment.count({ where: { payerAddress: payer, status: "lost" } })) > 0) {
          return { refused: "this wallet left an earlier pay-per-request charge unpaid; use a prepaid key" };
        }
        const [owed] = await tx.$queryRaw<{ owed: bigint }[]>`
          SELECT COALESCE(SUM(COALESCE(charge_micro_usdc, max_micro_usdc)), 0)::bigint AS owed
            FROM request_payments
           WHERE payer_address = ${payer} AND status IN ('open', 'charged', 'settling', 'reconciling')`;
        if ((owed?.owed ?? 0n) + c.maxMicroUsdc > coverMicroUsdc) {
          return {
            refused: "the wallet's USDC does not cover this payment's maximum beside its payments still unsettled",
          };
        }
        return tx.requestPayment.create({
          data: {
            accountId: account.id,
            route: c.route,
            payerAddress: c.payer.toLowerCase(),
            payToAddress: c.payTo.toLowerCase(),
            assetAddress: c.asset.toLowerCase(),
            facilitatorAddress: c.facilitator.toLowerCase(),
            permit2Nonce: c.nonce.toString(),
            maxMicroUsdc: c.maxMicroUsdc,
            deadline: c.deadline,
            fingerprint: c.fingerprint,
            payload: c.payload as Prisma.InputJsonValue,
            requirements: c.requirements as Prisma.InputJsonValue,
          },
        });
      });
    } catch (e) {
      if (e instanceof Prisma.PrismaClientKnownRequestError && e.code === "P2002") return null;
      throw e;
    }
  }

  /** The answer a duplicate of the payment gets (the first one recorded stays). */
  async recordAnswer(id: string, answer: RecordedPaidAnswer): Promise<void> {
    await this.deps.db.requestPayment.updateMany({
      where: { id, response: { equals: Prisma.DbNull } },
      data: { response: answer as unknown as Prisma.InputJsonValue },
    });
  }

  /** The request ended without a charge and nothing was settled: nothing is owed (open → void). */
  async voidIfOpen(id: string): Promise<boolean> {
    const r = await this.deps.db.requestPayment.updateMany({
      where: { id, status: "open" },
      data: { status: "void", updatedAt: this.deps.clock.now() },
    });
    return r.count === 1;
  }

  /** A charge of 0 (nothing charged, or charged 0): settled with nothing moved (open or charged → settled). */
  async settledZero(id: string): Promise<boolean> {
    const now = this.deps.clock.now();
    const r = await this.deps.db.requestPayment.updateMany({
      where: { id, status: { in: ["open", "charged"] }, OR: [{ chargeMicroUsdc: null }, { chargeMicroUsdc: 0n }] },
      data: { status: "settled", chargeMicroUsdc: 0n, settledMicroUsdc: 0n, settledAt: now, updatedAt: now },
    });
    return r.count === 1;
  }

  /**
   * Write-ahead before the settle of `charge` is sent: charged (with that charge) → settling; or, for
   * the reconciler, a payment left settling or reconciling whose authorization the chain shows unused.
   */
  async startSettle(id: string, charge: bigint): Promise<boolean> {
    const r = await this.deps.db.requestPayment.updateMany({
      where: { id, status: { in: [...UNSETTLED] }, chargeMicroUsdc: charge },
      data: { status: "settling", updatedAt: this.deps.clock.now() },
    });
    return r.count === 1;
  }

  /**
   * `amount` moved on chain in `txHash`: settled, and the cash side booked (`request_payment:<id>`),
   * in one transaction; what the charge exceeds it by is booked as a loss. False when the payment
   * had left the unsettled states already (booked by someone else).
   */
  async settled(id: string, amount: bigint, txHash: string | null): Promise<boolean> {
    const now = this.deps.clock.now();
    return this.deps.db.$transaction(async (tx) => {
      const p = await tx.requestPayment.findUniqueOrThrow({ where: { id } });
      const charge = p.chargeMicroUsdc ?? 0n;
      const short = charge > amount ? charge - amount : 0n;
      const moved = await tx.requestPayment.updateMany({
        where: { id, status: { in: [...UNSETTLED] } },
        data: {
          status: "settled",
          settledMicroUsdc: amount,
          ...(short > 0n ? { lostMicroUsdc: short } : {}),
          settlementTxHash: txHash ? txHash.toLowerCase() : null,
          settledAt: now,
          updatedAt: now,
        },
      });
      if (moved.count !== 1) return false;
      await bookRequestPayment(tx, { paymentId: id, accountId: p.accountId, amountMicroUsdc: amount });
      await bookPaymentLoss(tx, { paymentId: id, accountId: p.accountId, amountMicroUsdc: short });
      return true;
    });
  }

  /** The charge can never move: lost, and written off (`payment_loss:<id>`), in one transaction. */
  async lost(id: string, reason: string): Promise<boolean> {
    const now = this.deps.clock.now();
    return this.deps.db.$transaction(async (tx) => {
      const p = await tx.requestPayment.findUniqueOrThrow({ where: { id } });
      const charge = p.chargeMicroUsdc ?? 0n;
      const moved = await tx.requestPayment.updateMany({
        where: { id, status: { in: [...UNSETTLED] } },
        data: { status: "lost", lostMicroUsdc: charge, failureReason: reason.slice(0, 500), updatedAt: now },
      });
      if (moved.count !== 1) return false;
      await bookPaymentLoss(tx, { paymentId: id, accountId: p.accountId, amountMicroUsdc: charge });
      return true;
    });
  }

  /** The settle's outcome is unknown (or it was never sent): the chain decides (settling or charged → reconciling). */
  async reconciling(id: string, txHash: string | null, note: string): Promise<boolean> {
    const r = await this.deps.db.requestPayment.updateMany({
      where: { id, status: { in: ["settling", "charged"] } },
      data: {
        status: "reconciling",
        failureReason: note.slice(0, 500),
        ...(txHash ? { settlementTxHash: txHash.toLowerCase() } : {}),
        updatedAt: this.deps.clock.now(),
      },
    });
    return r.count === 1;
  }

  /** Payments whose cash side is not booked, oldest first (the reconciler's scan). */
  outstanding(o: { olderThan: Date; openBefore: Date; take: number }): Promise<{ id: string }[]> {
    return this.deps.db.requestPayment.findMany({
      where: {
        OR: [
          { status: "reconciling" },
          { status: { in: ["charged", "settling"] }, updatedAt: { lt: o.olderThan } },
          // a request that never ended cannot be settled once its authorization expired
          { status: "open", deadline: { lt: o.openBefore } },
        ],
      },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      take: o.take,
      select: { id: true },
    });
  }
}
