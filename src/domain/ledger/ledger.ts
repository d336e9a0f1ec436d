import type { Prisma } from "../../generated/prisma/client.js";
import { DomainError } from "../../lib/errors.js";
import { foldClearOf, foldVideoClearOf } from "./live-figures.js";
import { takeOutOfMarket } from "./market-totals.js";

/**
 * Double-entry postings (docs/decisions.md "Books"). Each function writes one balanced journal and
 * the matching balance-column updates, inside the caller's transaction. Journals carry a natural
 * idempotency key: posting the same event twice fails on the unique index instead of doubling.
 * Balance updates are guarded in the write itself (never read-check-write).
 */
type Tx = Prisma.TransactionClient;

export type Book =
  | "buyer_confirmed"
  | "buyer_pending"
  | "supplier_payable"
  | "supplier_held"
  | "platform_fee"
  | "external"
  | "payment_receivable"
  | "platform_loss";
export type EntryKind =
  | "top_up"
  | "confirmation"
  | "reversal"
  | "buyer_debit"
  | "supplier_credit"
  | "platform_fee"
  | "refund"
  | "payout"
  | "release"
  | "rehold"
  | "request_payment"
  | "payment_loss";
/** A clear writes no journal: it is the transfer its lines derive from (function ledger_lines; CHECK ledger_transactions_no_clear_journal). */
export type JournalKind =
  | "top_up"
  | "confirmation"
  | "reversal"
  | "refund"
  | "payout"
  | "payout_reversal"
  | "release"
  | "rehold"
  | "request_payment"
  | "payment_loss";

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
    requestPaymentId?: string;
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
      requestPaymentId: input.requestPaymentId ?? null,
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
  /** taken back from the supplier: its whole share, from the held balance or the payable one */
  supplierMicroUsdc: bigint;
  /** true when the share was still on hold (a video job not final); false: taken from payable */
  fromHeld: boolean;
  /** given back by the platform: its fee, never more */
  platformMicroUsdc: bigint;
  burnMicroDiem: bigint;
  offerId: string;
}

/**
 * Whether a held clear's share is released now: its release and rehold journals alternate (release,
 * rehold, release…), so an odd count means released. `moves` numbers the next journal's key. Read
 * under the clear's row lock (the caller's).
 */
async function holdState(tx: Tx, clearId: string): Promise<{ moves: number; released: boolean }> {
  const rows = await tx.$queryRaw<{ n: bigint }[]>`
    SELECT count(*)::bigint AS n FROM ledger_transactions
     WHERE clear_id = ${clearId}::uuid AND kind IN ('release', 'rehold')`;
  const moves = Number(rows[0]?.n ?? 0n);
  return { moves, released: moves % 2 === 1 };
}

/** What a hold move moved: the share of one clear between its supplier's held and payable balances. */
export interface HoldMoved {
  clearId: string;
  supplierAccountId: string;
  amountMicroUsdc: bigint;
}

/**
 * Moves the held share of the clear of video request `requestId` between the supplier's held and payable
 * balances (docs/decisions.md "Payout hold"): `release` when its video job became final (delivered
 * or expired): supplier_held −share, supplier_payable +share; `rehold` when the delivery that
 * released it was undone: the reverse. Journal `release:<clearId>:<n>` / `rehold:<clearId>:<n>`
 * (n counts the clear's hold moves). The caller holds the job's row (its conditional transition in
 * this transaction), so a job moves once; here the clear's row is locked, and a share that is
 * already where it goes, a clear whose share was never held (written before holds), a refunded
 * clear or a zero share move nothing (null). Folds the clear first (`foldVideoClearOf`), then locks the
 * supplier's account.
 * @throws internal_error if the held balance does not cover a release (books would break)
 */
export async function moveHeldShare(
  tx: Tx,
  input: { requestId: string; videoJobId?: string; move: "release" | "rehold" },
): Promise<HoldMoved | null> {
  await foldVideoClearOf(tx, input.requestId);
  const rows = await tx.$queryRaw<
    { id: string; supplier: string; share: bigint; held: boolean; refunded_at: Date | null }[]
  >`
    SELECT id, supplier_account_id AS supplier, supplier_micro_usdc AS share, supplier_held AS held, refunded_at
      FROM clears WHERE request_id = ${input.requestId}::uuid AND modality = 'video' FOR NO KEY UPDATE`;
  const c = rows[0];
  if (!c?.held || c.refunded_at !== null) return null;
  const share = BigInt(c.share);
  if (share === 0n) return null;
  const state = await holdState(tx, c.id);
  if (state.released === (input.move === "release")) return null;
  const toPayable = input.move === "release" ? share : -share;
  await postJournal(tx, {
    kind: input.move,
    idempotencyKey: `${input.move}:${c.id}:${state.moves + 1}`,
    clearId: c.id,
    videoJobId: input.videoJobId,
    postings: [
      { book: "supplier_held", accountId: c.supplier, kind: input.move, amountMicroUsdc: -toPayable },
      { book: "supplier_payable", accountId: c.supplier, kind: input.move, amountMicroUsdc: toPayable },
    ],
  });
  // the payable side may go negative on a rehold (a payout took it meanwhile): carried forward
  const moved = await tx.$executeRaw`
    UPDATE accounts SET supplier_held_micro_usdc = supplier_held_micro_usdc - ${toPayable},
                        supplier_payable_micro_usdc = supplier_payable_micro_usdc + ${toPayable}, updated_at = now()
     WHERE id = ${c.supplier}::uuid AND supplier_held_micro_usdc - ${toPayable} >= 0`;
  if (moved !== 1) throw new DomainError("internal_error", "supplier held balance does not cover the release");
  return { clearId: c.id, supplierAccountId: c.supplier, amountMicroUsdc: share };
}

/**
 * THE refund of a clear (a video job the provider failed or rejected): exactly once — the clear row
 * is claimed by a conditional UPDATE (`refunded_at`), and the journal's idempotency key is
 * `refund:<clearId>` — so concurrent or repeated calls refund once; the later ones return null.
 * The buyer gets the whole charge back (buyer_confirmed +gross), the supplier's share is taken back
 * whole and the platform gives back only its fee (platform_fee −fee): the platform never pays for a
 * refund. The share comes off the held balance while it is on hold (a video job not final: it was
 * never payable), else off the payable balance, which may go negative: a share already paid out is
 * recovered from the supplier's later earnings (carried forward; the payout run pays only a balance
 * at or above its minimum). Folds the clear first (`foldClearOf`: an unfolded clear is not yet in the
 * balances it moves; a caller that locks accounts before calling folds first, as the video refund
 * does). Lock order as everywhere: the buyer's account, then the supplier's. The offer's DIEM is the
 * caller's concern (it comes back only when the upstream refunded it).
 * @throws internal_error if a held share is not covered by the held balance (books would break)
 */
export async function refundClear(tx: Tx, input: { clearId: string; at: Date }): Promise<Refunded | null> {
  await foldClearOf(tx, input.clearId);
  const claimed = await tx.$queryRaw<
    (Record<"buyer" | "supplier" | "offer", string> &
      Record<"gross" | "fee" | "share" | "burn", bigint> & { held: boolean; at: Date })[]
  >`
    UPDATE clears SET refunded_at = ${input.at}
     WHERE id = ${input.clearId}::uuid AND refunded_at IS NULL
    RETURNING buyer_account_id AS buyer, supplier_account_id AS supplier, gross_micro_usdc AS gross,
              fee_micro_usdc AS fee, supplier_micro_usdc AS share, supplier_held AS held,
              burn_micro_diem AS burn, offer_id AS offer, created_at AS at`;
  const c = claimed[0];
  if (!c) return null;
  const gross = BigInt(c.gross);
  const fee = BigInt(c.fee);
  const share = BigInt(c.share);
  const fromHeld = c.held && !(await holdState(tx, input.clearId)).released;
  await tx.$executeRaw`SELECT 1 FROM accounts WHERE id = ${c.buyer}::uuid FOR NO KEY UPDATE`;
  await tx.$executeRaw`SELECT 1 FROM accounts WHERE id = ${c.supplier}::uuid FOR NO KEY UPDATE`;
  await takeOutOfMarket(tx, { id: input.clearId, at: c.at });
  if (gross > 0n) {
    await postJournal(tx, {
      kind: "refund",
      idempotencyKey: `refund:${input.clearId}`,
      clearId: input.clearId,
      postings: [
        { book: "buyer_confirmed", accountId: c.buyer, kind: "refund", amountMicroUsdc: gross },
        {
          book: fromHeld ? "supplier_held" : "supplier_payable",
          accountId: c.supplier,
          kind: "refund",
          amountMicroUsdc: -share,
        },
        { book: "platform_fee", accountId: null, kind: "refund", amountMicroUsdc: -fee },
      ],
    });
    await tx.$executeRaw`
      UPDATE accounts SET confirmed_micro_usdc = confirmed_micro_usdc + ${gross}, updated_at = now()
       WHERE id = ${c.buyer}::uuid`;
    if (share > 0n) {
      const moved = fromHeld
        ? await tx.$executeRaw`
            UPDATE accounts SET supplier_held_micro_usdc = supplier_held_micro_usdc - ${share}, updated_at = now()
             WHERE id = ${c.supplier}::uuid AND supplier_held_micro_usdc >= ${share}`
        : await tx.$executeRaw`
            UPDATE accounts SET supplier_payable_micro_usdc = supplier_payable_micro_usdc - ${share}, updated_at = now()
             WHERE id = ${c.supplier}::uuid`;
      if (moved !== 1) throw new DomainError("internal_error", "supplier held balance does not cover the refund");
    }
  }
  return {
    clearId: input.clearId,
    buyerAccountId: c.buyer,
    buyerMicroUsdc: gross,
    supplierMicroUsdc: share,
    fromHeld,
    platformMicroUsdc: fee,
    burnMicroDiem: BigInt(c.burn),
    offerId: c.offer,
  };
}
