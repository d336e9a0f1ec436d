import type { Db } from "../../adapters/db.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { CursorKey } from "../../lib/cursor.js";
import { newestReadBound } from "../../lib/partitions.js";
import type { Book } from "./ledger.js";

/**
 * The one reader of an account's ledger lines (docs/decisions.md "Clears are transfers", "The ledger
 * lines' one definition"): a page of what the stored function `ledger_lines` yields for the account
 * (prisma/functions/ledger_lines.sql: the written entries, the lines each clear implies, the closing
 * lines of retained months). The rules are the function's alone; this file knows none of them.
 * Writes stay in ledger.ts.
 *
 * The function orders and limits each of its sources itself (`p_newest_first`, `p_limit`), on the
 * source's own index, read backwards, months newest first, stopping at the page; this statement
 * merges those few rows into the page. test/integration/db/ledger-lines.test.ts holds the pages to
 * the whole ledger and the books' expectations; partition-plans.test.ts bounds what a page reads.
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
  const books = q.books ?? (q.book ? [q.book] : undefined);
  if (books?.length === 0) return [];
  const dir = q.oldestFirst ? Prisma.sql`ASC` : Prisma.sql`DESC`;
  // the bound ahead of now, said explicitly: the planner prunes the DEFAULT partition with it, which
  // keeps the months in order (lib/partitions.ts); a cursor bounds the time as well (the function)
  const until = newestReadBound(q.now);
  const rows = await db.$queryRaw<Row[]>`
    SELECT l.id::text AS id, l.transaction_id::text AS transaction_id, l.transaction_kind::text AS transaction_kind,
           l.book::text AS book, l.kind::text AS kind, l.amount_micro_usdc, l.created_at
      FROM ledger_lines(
             p_account => ${q.accountId}::uuid,
             p_books => ${books ? [...books] : null}::text[]::ledger_book[],
             p_until => ${until}::timestamptz,
             p_older_at => ${q.olderThan?.at ?? null}::timestamptz,
             p_older_id => ${q.olderThan?.id ?? null}::uuid,
             p_newer_at => ${q.newerThan?.at ?? null}::timestamptz,
             p_newer_id => ${q.newerThan?.id ?? null}::uuid,
             p_newest_first => ${!q.oldestFirst}::boolean,
             p_limit => ${q.limit}::integer) l
     ORDER BY l.created_at ${dir}, l.id ${dir}
     LIMIT ${q.limit}`;
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
