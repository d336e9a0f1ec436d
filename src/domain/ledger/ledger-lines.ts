import type { Db } from "../../adapters/db.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { CursorKey } from "../../lib/cursor.js";
import { newestReadBound } from "../../lib/partitions.js";
import type { Book } from "./ledger.js";

/**
 * The one reader of an account's ledger lines (docs/decisions.md "Clears are transfers"): the
 * written entries (funding, refunds, payouts, their reversals) and the lines each clear implies,
 * as view `ledger_lines` defines them (migration 20261202000000_clear_transfers). Writes stay in
 * ledger.ts.
 *
 * It reads the view's branches itself rather than the view: Postgres pushes `account_id`, `book`
 * and the keyset bound into each branch of the view's UNION ALL, but not the ORDER BY … LIMIT,
 * so a page of the view reads every line of the account (a supplier with 4,000 clears: 4,000 rows
 * and a top-N sort for 21). Each branch here is ordered and limited on its own index
 * (`ledger_entries(account_id, created_at)`, `clears(buyer_account_id, created_at)`,
 * `clears(supplier_account_id, created_at)`, read backwards, ties on the id sorted incrementally)
 * and a Merge Append takes the page: a page reads about `limit` rows per branch. Clears are
 * partitioned by month: each clear branch reads the months newest first (an ordered Append of the
 * partitions' indexes) and stops at the page; a retained month's lines are its closing lines
 * (`ledger_closings`, a branch of its own, as in the view). The derived
 * lines' ids, kinds and books must stay the view's: test/integration/db/ledger-lines.test.ts
 * compares this reader with the view.
 */

/** One line of an account's ledger: a signed change to one of its books, in micro-USDC. */
export interface AccountLedgerLine {
  id: string;
  transactionId: string;
  /** the journal's kind; `clear` for the lines a clear implies (`transactionId` is the clear's id) */
  transactionKind: string;
  book: string;
  kind: string;
  /** signed change to the book */
  amountMicroUsdc: bigint;
  createdAt: Date;
}

export interface AccountLedgerQuery {
  accountId: string;
  /** the reader's clock: no line is newer than it and a day (lib/partitions.ts) */
  now: Date;
  /** only this book's lines */
  book?: Book;
  /** only these books' lines (instead of `book`) */
  books?: readonly Book[];
  /** only lines after this key in newest-first order (older): the next page */
  olderThan?: CursorKey;
  /** only lines before this key in newest-first order (newer) */
  newerThan?: CursorKey;
  /** at most this many lines (ask one more than a page to learn whether another follows) */
  limit: number;
  /** oldest first (a backward page); newest first by default */
  oldestFirst?: boolean;
}

interface Row {
  id: string;
  transaction_id: string;
  transaction_kind: string;
  book: string;
  kind: string;
  amount_micro_usdc: bigint;
  created_at: Date;
}

/** One branch of `ledger_lines`, for one account: its FROM, the id and account columns, its select list. */
interface Branch {
  /** the books the branch's lines can be on */
  books: readonly Book[];
  at: Prisma.Sql;
  id: Prisma.Sql;
  select: Prisma.Sql;
  from: Prisma.Sql;
  where: Prisma.Sql;
}

const BUYER_ID = Prisma.sql`md5(c.id::text || ':buyer')::uuid`;
const SUPPLIER_ID = Prisma.sql`md5(c.id::text || ':supplier')::uuid`;

function branches(accountId: string, books: readonly Book[] | undefined): Branch[] {
  const all: Branch[] = [
    {
      books: ["buyer_confirmed", "buyer_pending", "supplier_payable", "supplier_held", "payment_receivable"],
      at: Prisma.sql`e.created_at`,
      id: Prisma.sql`e.id`,
      select: Prisma.sql`e.id, e.transaction_id, t.kind::text AS transaction_kind, e.book::text AS book,
        e.kind::text AS kind, e.amount_micro_usdc, e.created_at`,
      from: Prisma.sql`ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id`,
      where: books
        ? Prisma.sql`e.account_id = ${accountId}::uuid AND e.book::text = ANY(${[...books]}::text[])`
        : Prisma.sql`e.account_id = ${accountId}::uuid`,
    },
    {
      books: ["buyer_confirmed"],
      at: Prisma.sql`c.created_at`,
      id: BUYER_ID,
      select: Prisma.sql`${BUYER_ID} AS id, c.id AS transaction_id, 'clear' AS transaction_kind,
        'buyer_confirmed' AS book, 'buyer_debit' AS kind, -c.gross_micro_usdc AS amount_micro_usdc, c.created_at`,
      from: Prisma.sql`clears c`,
      where: Prisma.sql`c.buyer_account_id = ${accountId}::uuid AND c.gross_micro_usdc > 0 AND c.payment_id IS NULL`,
    },
    // a request paid per request (no account balance): its debit is on the receivable its payment settles
    {
      books: ["payment_receivable"],
      at: Prisma.sql`c.created_at`,
      id: BUYER_ID,
      select: Prisma.sql`${BUYER_ID} AS id, c.id AS transaction_id, 'clear' AS transaction_kind,
        'payment_receivable' AS book, 'buyer_debit' AS kind, -c.gross_micro_usdc AS amount_micro_usdc, c.created_at`,
      from: Prisma.sql`clears c`,
      where: Prisma.sql`c.buyer_account_id = ${accountId}::uuid AND c.gross_micro_usdc > 0 AND c.payment_id IS NOT NULL`,
    },
    // the supplier's credit is on the book its share was credited to: payable, or held (a video
    // job's until the job is final; column clears.supplier_held)
    {
      books: ["supplier_payable"],
      at: Prisma.sql`c.created_at`,
      id: SUPPLIER_ID,
      select: Prisma.sql`${SUPPLIER_ID} AS id, c.id AS transaction_id, 'clear' AS transaction_kind,
        'supplier_payable' AS book, 'supplier_credit' AS kind, c.supplier_micro_usdc AS amount_micro_usdc, c.created_at`,
      from: Prisma.sql`clears c`,
      where: Prisma.sql`c.supplier_account_id = ${accountId}::uuid AND c.supplier_micro_usdc > 0 AND NOT c.supplier_held`,
    },
    {
      books: ["supplier_held"],
      at: Prisma.sql`c.created_at`,
      id: SUPPLIER_ID,
      select: Prisma.sql`${SUPPLIER_ID} AS id, c.id AS transaction_id, 'clear' AS transaction_kind,
        'supplier_held' AS book, 'supplier_credit' AS kind, c.supplier_micro_usdc AS amount_micro_usdc, c.created_at`,
      from: Prisma.sql`clears c`,
      where: Prisma.sql`c.supplier_account_id = ${accountId}::uuid AND c.supplier_micro_usdc > 0 AND c.supplier_held`,
    },
    // a retained month's clear lines, summed per book (docs/decisions.md "Monthly partitions and
    // retention"): one line per month and book, at the month's last millisecond
    {
      books: ["buyer_confirmed", "supplier_payable", "supplier_held", "payment_receivable"],
      at: Prisma.sql`k.created_at`,
      id: Prisma.sql`k.id`,
      select: Prisma.sql`k.id, md5('closing:' || k.month::text)::uuid AS transaction_id, 'closing' AS transaction_kind,
        k.book::text AS book, 'closing' AS kind, k.amount_micro_usdc, k.created_at`,
      from: Prisma.sql`ledger_closings k`,
      where: books
        ? Prisma.sql`k.account_id = ${accountId}::uuid AND k.book::text = ANY(${[...books]}::text[])`
        : Prisma.sql`k.account_id = ${accountId}::uuid`,
    },
    // the platform's fee line has no account: never on an account's ledger
  ];
  return all.filter((b) => books === undefined || b.books.some((x) => books.includes(x)));
}

/**
 * An account's ledger lines, newest first (or oldest first), ordered by (created_at, id) and
 * bounded by keyset cursors on that pair. Reads only; one statement.
 */
export async function accountLedgerLines(
  db: Pick<Db, "$queryRaw">,
  q: AccountLedgerQuery,
): Promise<AccountLedgerLine[]> {
  if (!Number.isInteger(q.limit) || q.limit < 0) throw new Error(`accountLedgerLines: bad limit ${q.limit}`);
  if (q.limit === 0) return [];
  const dir = q.oldestFirst ? Prisma.sql`ASC` : Prisma.sql`DESC`;
  const books = q.books ?? (q.book ? [q.book] : undefined);
  if (books?.length === 0) return [];
  const parts = branches(q.accountId, books).map((b) => {
    // the time alone as well, bounded above (by now and a day without a cursor): a row comparison
    // prunes no partition, a bound on created_at does, and keeps the months in order (lib/partitions.ts)
    const bounds: Prisma.Sql[] = [
      b.where,
      Prisma.sql`${b.at} <= ${newestReadBound(q.now, q.olderThan?.at)}::timestamptz`,
    ];
    if (q.olderThan)
      bounds.push(Prisma.sql`(${b.at}, ${b.id}) < (${q.olderThan.at}::timestamptz, ${q.olderThan.id}::uuid)`);
    if (q.newerThan)
      bounds.push(Prisma.sql`${b.at} >= ${q.newerThan.at}::timestamptz
        AND (${b.at}, ${b.id}) > (${q.newerThan.at}::timestamptz, ${q.newerThan.id}::uuid)`);
    return Prisma.sql`(SELECT ${b.select} FROM ${b.from} WHERE ${Prisma.join(bounds, " AND ")}
      ORDER BY ${b.at} ${dir}, ${b.id} ${dir} LIMIT ${q.limit})`;
  });
  const rows = await db.$queryRaw<Row[]>`SELECT * FROM (${Prisma.join(parts, " UNION ALL ")}) l
    ORDER BY l.created_at ${dir}, l.id ${dir} LIMIT ${q.limit}`;
  return rows.map((r) => ({
    id: r.id,
    transactionId: r.transaction_id,
    transactionKind: r.transaction_kind,
    book: r.book,
    kind: r.kind,
    amountMicroUsdc: BigInt(r.amount_micro_usdc),
    createdAt: r.created_at,
  }));
}
