import { deepStrictEqual, strictEqual } from "node:assert/strict";
import type { Db } from "../src/adapters/db.js";

/**
 * The books balance: every transaction (a journal, or a clear) sums to zero, and every account's
 * balance columns equal the sum of its ledger lines in the matching book. Lines are read from the
 * function `ledger_lines()` (the written entries, the lines each clear implies and the closing lines
 * of retained months, docs/decisions.md "The ledger lines' one definition"), each in one pass: a
 * filter on its result is not pushed into it. Call at the end of every money scenario (tests and the
 * bench); throws an AssertionError naming the broken rule.
 */
export async function assertBooksBalance(db: Db): Promise<void> {
  const unbalanced = await db.$queryRaw<{ id: string; total: bigint }[]>`
    SELECT transaction_id AS id, SUM(amount_micro_usdc)::bigint AS total
      FROM ledger_lines() GROUP BY transaction_id HAVING SUM(amount_micro_usdc) <> 0`;
  deepStrictEqual(unbalanced, [], "every journal sums to zero");

  // a clear's lines balance because it splits exactly (CHECK clears_split says so too: this
  // catches the check gone)
  const unsplit = await db.$queryRaw<{ id: string }[]>`
    SELECT id FROM clears WHERE gross_micro_usdc <> fee_micro_usdc + supplier_micro_usdc`;
  deepStrictEqual(unsplit, [], "every clear's gross is its fee plus the supplier's share");

  const mismatched = await db.$queryRaw<{ id: string }[]>`
    WITH s AS (
      SELECT l.account_id,
             COALESCE(SUM(l.amount_micro_usdc) FILTER (WHERE l.book = 'buyer_confirmed'), 0) AS confirmed,
             COALESCE(SUM(l.amount_micro_usdc) FILTER (WHERE l.book = 'buyer_pending'), 0) AS pending,
             COALESCE(SUM(l.amount_micro_usdc) FILTER (WHERE l.book = 'supplier_payable'), 0) AS payable,
             COALESCE(SUM(l.amount_micro_usdc) FILTER (WHERE l.book = 'supplier_held'), 0) AS held
        FROM ledger_lines() l WHERE l.account_id IS NOT NULL GROUP BY l.account_id)
    SELECT a.id
      FROM accounts a LEFT JOIN s ON s.account_id = a.id
     CROSS JOIN LATERAL svc_account_live(a.id) v
     WHERE v.confirmed <> COALESCE(s.confirmed, 0)
        OR v.pending <> COALESCE(s.pending, 0)
        OR v.payable <> COALESCE(s.payable, 0)
        OR v.held <> COALESCE(s.held, 0)`;
  deepStrictEqual(mismatched, [], "account balances (live: svc_account_live) equal their ledger books");

  // a held share is on hold exactly while its video job may still be refunded: the held balance is
  // the shares of held clears that are neither refunded nor released (an odd count of hold moves)
  const misheld = await db.$queryRaw<{ id: string }[]>`
    SELECT a.id FROM accounts a CROSS JOIN LATERAL svc_account_live(a.id) v
     WHERE v.held <> COALESCE((
       SELECT SUM(c.supplier_micro_usdc) FROM clears c
        WHERE c.supplier_account_id = a.id AND c.supplier_held AND c.refunded_at IS NULL
          AND (SELECT count(*) FROM ledger_transactions t
                WHERE t.clear_id = c.id AND t.kind IN ('release', 'rehold')) % 2 = 0), 0)`;
  deepStrictEqual(misheld, [], "held balances are the shares of unreleased, unrefunded held clears");

  const total = await db.$queryRaw<
    { total: bigint }[]
  >`SELECT COALESCE(SUM(amount_micro_usdc), 0)::bigint AS total FROM ledger_lines()`;
  strictEqual(BigInt(total[0]?.total ?? 0n), 0n, "the whole ledger sums to zero");

  // pay per request (issue 41): each payment's receivable is its booked charge until the cash side
  // is booked, then zero; the cash that came in is what it settled, the loss what it lost, and its
  // charge is its clear's gross. A payment charged in a retired month (retention) has its clear's line
  // in that month's closing line: its cash and loss are still checked
  const unpaid = await db.$queryRaw<{ id: string }[]>`
    WITH paid AS (
      SELECT c.payment_id, c.id AS transaction_id FROM clears c WHERE c.payment_id IS NOT NULL
      UNION ALL
      SELECT t.request_payment_id, t.id FROM ledger_transactions t WHERE t.request_payment_id IS NOT NULL),
    s AS MATERIALIZED (
      SELECT x.payment_id,
             COALESCE(SUM(l.amount_micro_usdc) FILTER (WHERE l.book = 'payment_receivable'), 0) AS receivable,
             COALESCE(SUM(l.amount_micro_usdc) FILTER (WHERE l.book = 'external'), 0) AS cash,
             COALESCE(SUM(l.amount_micro_usdc) FILTER (WHERE l.book = 'platform_loss'), 0) AS loss
        FROM paid x JOIN ledger_lines(p_books => '{payment_receivable,external,platform_loss}') l
          ON l.transaction_id = x.transaction_id
       GROUP BY x.payment_id)
    SELECT p.id FROM request_payments p
      LEFT JOIN s ON s.payment_id = p.id
      CROSS JOIN LATERAL (
        SELECT EXISTS (SELECT 1 FROM retention_months r
                        WHERE r.state <> 'blocked' AND p.charged_at >= r.month
                          AND p.charged_at < r.month + interval '1 month') AS retired) r
     WHERE (NOT r.retired AND COALESCE(s.receivable, 0) <> CASE WHEN p.status IN ('charged', 'settling', 'reconciling')
                                                   THEN -COALESCE(p.charge_micro_usdc, 0) ELSE 0 END)
        OR COALESCE(s.cash, 0) <> -COALESCE(p.settled_micro_usdc, 0)
        OR COALESCE(s.loss, 0) <> -COALESCE(p.lost_micro_usdc, 0)
        OR (NOT r.retired AND COALESCE((SELECT c.gross_micro_usdc FROM clears c WHERE c.payment_id = p.id), 0)
                              <> COALESCE(p.charge_micro_usdc, 0))`;
  deepStrictEqual(unpaid, [], "pay-per-request payments: receivable, cash and loss match each payment's state");

  // what is reserved is exactly what escrow holders hold (no reservation without a slice, no
  // slice uncounted), and every escrow belongs to a registered holder
  const unheld = await db.$queryRaw<{ id: string }[]>`
    SELECT a.id FROM accounts a
     WHERE a.reserved_micro_usdc <> COALESCE((SELECT SUM(e.amount_micro_usdc) FROM buyer_escrows e WHERE e.account_id = a.id), 0)
    UNION ALL
    SELECT o.id FROM offers o
     WHERE o.reserved_micro_diem <> COALESCE((SELECT SUM(e.amount_micro_diem) FROM offer_escrows e WHERE e.offer_id = o.id), 0)`;
  deepStrictEqual(unheld, [], "reserved balances and DIEM equal the escrow slices");

  // a holder's slices cover what its appended clears charged and burned and the fold has not yet
  // applied (docs/decisions.md "One append per clear"): the fold can always apply them
  const uncovered = await db.$queryRaw<{ id: string }[]>`
    SELECT u.buyer_account_id::text AS id FROM svc_unfolded() u
     WHERE u.payment_id IS NULL
     GROUP BY u.buyer_account_id, u.holder
    HAVING sum(u.gross_micro_usdc) > COALESCE((SELECT e.amount_micro_usdc FROM buyer_escrows e
                                                 WHERE e.account_id = u.buyer_account_id AND e.holder = u.holder), 0)
    UNION ALL
    SELECT u.offer_id::text FROM svc_unfolded() u
     GROUP BY u.offer_id, u.holder
    HAVING sum(u.burn_micro_diem) > COALESCE((SELECT e.amount_micro_diem FROM offer_escrows e
                                                WHERE e.offer_id = u.offer_id AND e.holder = u.holder), 0)`;
  deepStrictEqual(uncovered, [], "every holder's slices cover its unfolded charges and burns");

  // the stored check's rules the lines above do not cover, in one call (each call reads every row):
  // each clear names parties on record (no foreign key holds them: docs/decisions.md "The append
  // names its parties without locking them");
  // each slice counts exactly its holder's unfolded clears on it (the live figures read the counts);
  // the market's totals (folded day rows, refunds out, plus the unfolded clears) are the clears' own,
  // day by day and modality by modality (docs/decisions.md "Market totals at the fold"), and so are its
  // hours per model, whose named buyers cleared there ("Model statistics at the fold")
  const checked = await db.$queryRaw<{ rule: string; subject: string }[]>`
    SELECT rule, subject FROM svc_books_check()
     WHERE rule IN ('clear_parties', 'slice_count', 'market_days', 'model_hours')`;
  const broken = (rule: string) => checked.filter((r) => r.rule === rule);
  deepStrictEqual(
    broken("clear_parties"),
    [],
    "every clear names a buyer, an offer with its supplier and key, and a key of its buyer, all on record",
  );
  deepStrictEqual(
    broken("slice_count"),
    [],
    "every slice's count of unfolded charges is its holder's unfolded clears' sum",
  );
  deepStrictEqual(broken("market_days"), [], "the market's day totals equal its unrefunded clears'");
  deepStrictEqual(
    broken("model_hours"),
    [],
    "the market's hours per model equal its unrefunded clears', and name buyers who cleared",
  );
}
