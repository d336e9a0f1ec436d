import type { Prisma } from "../../generated/prisma/client.js";
import { DomainError } from "../../lib/errors.js";

/**
 * Double-entry postings (docs/decisions.md "Books"). Each function writes one balanced journal and
 * the matching balance-column updates, inside the caller's transaction. Journals carry a natural
 * idempotency key: posting the same event twice fails on the unique index instead of doubling.
 * Balance updates are guarded in the write itself (never read-check-write).
 */
type Tx = Prisma.TransactionClient;

export type Book = "buyer_confirmed" | "buyer_pending" | "supplier_payable" | "platform_fee" | "external";
export type EntryKind =
  | "top_up"
  | "confirmation"
  | "reversal"
  | "buyer_debit"
  | "supplier_credit"
  | "platform_fee"
  | "refund"
  | "payout";
/** A clear writes no journal: it is the transfer its lines derive from (ledger-lines.ts; CHECK ledger_transactions_no_clear_journal). */
export type JournalKind = "top_up" | "confirmation" | "reversal" | "refund" | "payout" | "payout_reversal";

export interface Posting {
  book: Book;
  accountId: string | null;
  kind: EntryKind;
  amountMicroUsdc: bigint;
}

/** Writes one journal; throws if its postings do not sum to zero (the database would refuse it too). */
export async function postJournal(
  tx: Tx,
  input: {
    kind: JournalKind;
    idempotencyKey: string;
    paymentId?: string;
    clearId?: string;
    payoutId?: string;
    videoJobId?: string;
    postings: Posting[];
  },
): Promise<string> {
  const total = input.postings.reduce((a, p) => a + p.amountMicroUsdc, 0n);
  if (total !== 0n) throw new Error(`unbalanced journal ${input.idempotencyKey}: ${total}`);
  const journal = await tx.ledgerTransaction.create({
    data: {
      kind: input.kind,
      idempotencyKey: input.idempotencyKey,
      paymentId: input.paymentId ?? null,
      clearId: input.clearId ?? null,
      payoutId: input.payoutId ?? null,
      videoJobId: input.videoJobId ?? null,
    },
  });
  const postings = input.postings.filter((p) => p.amountMicroUsdc !== 0n);
  if (postings.length > 0) {
    await tx.ledgerEntry.createMany({
      data: postings.map((p) => ({
        transactionId: journal.id,
        accountId: p.accountId,
        book: p.book,
        kind: p.kind,
        amountMicroUsdc: p.amountMicroUsdc,
      })),
    });
  }
  return journal.id;
}

/** A settled top-up credited as pending: buyer_pending +x, external −x. */
export async function creditPendingTopUp(
  tx: Tx,
  input: { accountId: string; paymentId: string; amountMicroUsdc: bigint },
): Promise<void> {
  await postJournal(tx, {
    kind: "top_up",
    idempotencyKey: `top_up:${input.paymentId}`,
    paymentId: input.paymentId,
    postings: [
      { book: "buyer_pending", accountId: input.accountId, kind: "top_up", amountMicroUsdc: input.amountMicroUsdc },
      { book: "external", accountId: null, kind: "top_up", amountMicroUsdc: -input.amountMicroUsdc },
    ],
  });
  await tx.account.update({
    where: { id: input.accountId },
    data: { pendingMicroUsdc: { increment: input.amountMicroUsdc } },
  });
}

/**
 * Pending credit reached confirmation depth: buyer_pending −x, buyer_confirmed +x; sets
 * hasEverFunded and firstFundedAt (first time only).
 * @throws internal_error if the pending balance does not cover it (books would break)
 */
export async function confirmTopUp(
  tx: Tx,
  input: { accountId: string; paymentId: string; amountMicroUsdc: bigint; at: Date },
): Promise<void> {
  await postJournal(tx, {
    kind: "confirmation",
    idempotencyKey: `confirmation:${input.paymentId}`,
    paymentId: input.paymentId,
    postings: [
      {
        book: "buyer_pending",
        accountId: input.accountId,
        kind: "confirmation",
        amountMicroUsdc: -input.amountMicroUsdc,
      },
      {
        book: "buyer_confirmed",
        accountId: input.accountId,
        kind: "confirmation",
        amountMicroUsdc: input.amountMicroUsdc,
      },
    ],
  });
  // one guarded write: both flags move together (CHECK accounts_first_funded)
  const moved = await tx.$executeRaw`
    UPDATE accounts
       SET pending_micro_usdc = pending_micro_usdc - ${input.amountMicroUsdc},
           confirmed_micro_usdc = confirmed_micro_usdc + ${input.amountMicroUsdc},
           has_ever_funded = true,
           first_funded_at = COALESCE(first_funded_at, ${input.at}),
           updated_at = now()
     WHERE id = ${input.accountId}::uuid AND pending_micro_usdc >= ${input.amountMicroUsdc}`;
  if (moved !== 1) throw new DomainError("internal_error", "pending balance does not cover the confirmation");
}

/** A pending transfer left the canonical chain: buyer_pending −x, external +x. */
export async function reverseTopUp(
  tx: Tx,
  input: { accountId: string; paymentId: string; amountMicroUsdc: bigint },
): Promise<void> {
  await postJournal(tx, {
    kind: "reversal",
    idempotencyKey: `reversal:${input.paymentId}`,
    paymentId: input.paymentId,
    postings: [
      { book: "buyer_pending", accountId: input.accountId, kind: "reversal", amountMicroUsdc: -input.amountMicroUsdc },
      { book: "external", accountId: null, kind: "reversal", amountMicroUsdc: input.amountMicroUsdc },
    ],
  });
  const moved = await tx.account.updateMany({
    where: { id: input.accountId, pendingMicroUsdc: { gte: input.amountMicroUsdc } },
    data: { pendingMicroUsdc: { decrement: input.amountMicroUsdc } },
  });
  if (moved.count !== 1) throw new DomainError("internal_error", "pending balance does not cover the reversal");
}

/**
 * A supplier payout recorded before its transfer is sent: supplier_payable −x, external +x, with
 * the payable balance decremented by a guarded write (never below zero).
 * @throws internal_error if the payable balance no longer covers the payout (the caller's
 *   transaction must roll back: the payout row goes with it)
 */
export async function debitPayout(
  tx: Tx,
  input: { accountId: string; payoutId: string; amountMicroUsdc: bigint },
): Promise<void> {
  await postJournal(tx, {
    kind: "payout",
    idempotencyKey: `payout:${input.payoutId}`,
    payoutId: input.payoutId,
    postings: [
      { book: "supplier_payable", accountId: input.accountId, kind: "payout", amountMicroUsdc: -input.amountMicroUsdc },
      { book: "external", accountId: null, kind: "payout", amountMicroUsdc: input.amountMicroUsdc },
    ],
  });
  const moved = await tx.account.updateMany({
    where: { id: input.accountId, supplierPayableMicroUsdc: { gte: input.amountMicroUsdc } },
    data: { supplierPayableMicroUsdc: { decrement: input.amountMicroUsdc } },
  });
  if (moved.count !== 1) throw new DomainError("internal_error", "supplier payable balance does not cover the payout");
}

/**
 * A payout whose transfer failed before any USDC moved: the payout journal reversed
 * (supplier_payable +x, external −x) and the amount returned to the payable balance.
 */
export async function reversePayout(
  tx: Tx,
  input: { accountId: string; payoutId: string; amountMicroUsdc: bigint },
): Promise<void> {
  await postJournal(tx, {
    kind: "payout_reversal",
    idempotencyKey: `payout_reversal:${input.payoutId}`,
    payoutId: input.payoutId,
    postings: [
      {
        book: "supplier_payable",
        accountId: input.accountId,
        kind: "reversal",
        amountMicroUsdc: input.amountMicroUsdc,
      },
      { book: "external", accountId: null, kind: "reversal", amountMicroUsdc: -input.amountMicroUsdc },
    ],
  });
  await tx.account.update({
    where: { id: input.accountId },
    data: { supplierPayableMicroUsdc: { increment: input.amountMicroUsdc } },
  });
}

/** What a refund moved (micro-USDC). */
export interface Refunded {
  clearId: string;
  buyerAccountId: string;
  /** back to the buyer's confirmed balance: the whole charge */
  buyerMicroUsdc: bigint;
  /** taken back from the supplier's payable balance (at most what it still holds) */
  supplierMicroUsdc: bigint;
  /** borne by the platform: the fee, plus any part of the supplier's share already paid out */
  platformMicroUsdc: bigint;
  burnMicroDiem: bigint;
  offerId: string;
}

/**
 * THE refund of a clear (a video job the provider failed or rejected): exactly once — the clear row
 * is claimed by a conditional UPDATE (`refunded_at`), and the journal's idempotency key is
 * `refund:<clearId>` — so concurrent or repeated calls refund once; the later ones return null.
 * The buyer gets the whole charge back (buyer_confirmed +gross); the supplier's credit is taken
 * back from its payable balance as far as that still holds it (a share already paid out is not
 * clawed back); the platform bears the fee and any remainder (platform_fee −). Lock order as
 * everywhere: the buyer's account, then the supplier's. The offer's DIEM is the caller's concern
 * (it comes back only when the upstream refunded it).
 */
export async function refundClear(tx: Tx, input: { clearId: string; at: Date }): Promise<Refunded | null> {
  const claimed = await tx.$queryRaw<
    { buyer: string; supplier: string; gross: bigint; share: bigint; burn: bigint; offer: string }[]
  >`
    UPDATE clears SET refunded_at = ${input.at}
     WHERE id = ${input.clearId}::uuid AND refunded_at IS NULL
    RETURNING buyer_account_id AS buyer, supplier_account_id AS supplier, gross_micro_usdc AS gross,
              supplier_micro_usdc AS share, burn_micro_diem AS burn, offer_id AS offer`;
  const c = claimed[0];
  if (!c) return null;
  const gross = BigInt(c.gross);
  const share = BigInt(c.share);
  await tx.$executeRaw`SELECT 1 FROM accounts WHERE id = ${c.buyer}::uuid FOR NO KEY UPDATE`;
  const held = await tx.$queryRaw<{ payable: bigint }[]>`
    SELECT supplier_payable_micro_usdc AS payable FROM accounts WHERE id = ${c.supplier}::uuid FOR NO KEY UPDATE`;
  const payable = BigInt(held[0]?.payable ?? 0n);
  const clawed = payable < share ? payable : share;
  const platform = gross - clawed;
  if (gross > 0n) {
    await postJournal(tx, {
      kind: "refund",
      idempotencyKey: `refund:${input.clearId}`,
      clearId: input.clearId,
      postings: [
        { book: "buyer_confirmed", accountId: c.buyer, kind: "refund", amountMicroUsdc: gross },
        { book: "supplier_payable", accountId: c.supplier, kind: "refund", amountMicroUsdc: -clawed },
        { book: "platform_fee", accountId: null, kind: "refund", amountMicroUsdc: -platform },
      ],
    });
    await tx.$executeRaw`
      UPDATE accounts SET confirmed_micro_usdc = confirmed_micro_usdc + ${gross}, updated_at = now()
       WHERE id = ${c.buyer}::uuid`;
    if (clawed > 0n) {
      const moved = await tx.$executeRaw`
        UPDATE accounts SET supplier_payable_micro_usdc = supplier_payable_micro_usdc - ${clawed}, updated_at = now()
         WHERE id = ${c.supplier}::uuid AND supplier_payable_micro_usdc >= ${clawed}`;
      if (moved !== 1) throw new DomainError("internal_error", "supplier payable changed under its lock");
    }
  }
  return {
    clearId: input.clearId,
    buyerAccountId: c.buyer,
    buyerMicroUsdc: gross,
    supplierMicroUsdc: clawed,
    platformMicroUsdc: platform,
    burnMicroDiem: BigInt(c.burn),
    offerId: c.offer,
  };
}
