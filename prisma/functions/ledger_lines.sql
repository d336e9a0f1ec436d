-- The whole ledger, and the one statement of how its lines come about (docs/decisions.md "Clears
-- are transfers", "The ledger lines' one definition"): every reader of the ledger calls this, the
-- account pages (src/domain/ledger/ledger-lines.ts), the books check (svc_books_check), the
-- retention's month closing (src/domain/maintenance/month-closing.ts) and the tests' books
-- (testkit/books.ts). One line is a signed change to one book, in micro-USDC:
--   a written entry      funding, its confirmation and reversal, refunds, payouts and their
--                        reversals, releases and reholds of held shares, payments' cash and losses:
--                        the entry itself, with its journal's kind
--   a clear              no journal: its row is the transfer, and it implies (each only when not zero)
--                        the buyer's debit, -gross, on buyer_confirmed (payment_receivable when paid
--                        per request: the payment's receivable), kind buyer_debit; the supplier's
--                        credit, +share, on supplier_payable (supplier_held while a video job's share
--                        is on hold: clears.supplier_held), kind supplier_credit; the platform's fee,
--                        +fee, on platform_fee, no account. A derived line's id is
--                        md5('<clear id>:buyer' | ':supplier' | ':fee')::uuid, its transaction id the
--                        clear's id, its transaction kind `clear`, its time the clear's.
--   a closing            a retained month's clear lines summed per account and book (ledger_closings,
--                        written as the month's partitions are detached): transaction id
--                        md5('closing:<month>'), kind `closing`, at the month's last millisecond.
-- Columns beyond these on clears (e.g. a holder or a sequence) are not the ledger's.
--
-- Filters (each NULL: no filter), so a reader asks for what it needs and the planner prunes:
--   p_account            one account's lines (the platform's fee has none: never on an account's)
--   p_books              only these books
--   p_since, p_until     created_at in [p_since, p_until): a month, a bound ahead of now; the clears'
--                        month partitions outside it are pruned when the bounds are known at planning
--   p_older_*, p_newer_* keyset bounds on (created_at, id), strictly older or newer than the key (with
--                        the key's time as a plain bound as well, which prunes partitions)
--   p_newest_first, p_limit
--                        each source's first p_limit lines, newest (or oldest) first: a page is the
--                        first p_limit of what this returns, in the same order. NULL: all, unordered.
--
-- Why each source carries the same filter, order and limit: Postgres 15 builds no ordered path for a
-- partitioned table inside a UNION ALL, so an ORDER BY … LIMIT over the union reads every line of
-- the account (a supplier with 200,000 clears: all of them, then a top-N sort). Ordered and limited
-- inside each source, a page reads its newest month's index backwards and stops at the page. Called
-- in FROM with plain arguments, the function is inlined (LANGUAGE sql, STABLE, not STRICT) and its
-- NULL filters and ORDER BY CASEs fold away at planning; a source whose book is filtered out is never
-- run. The sources' rows are not flattened into the caller (their LIMIT): filter through the
-- parameters, not with a WHERE on the result, when it matters.
CREATE OR REPLACE FUNCTION ledger_lines(
  p_account uuid DEFAULT NULL,
  p_books ledger_book[] DEFAULT NULL,
  p_since timestamptz DEFAULT NULL,
  p_until timestamptz DEFAULT NULL,
  p_older_at timestamptz DEFAULT NULL,
  p_older_id uuid DEFAULT NULL,
  p_newer_at timestamptz DEFAULT NULL,
  p_newer_id uuid DEFAULT NULL,
  p_newest_first boolean DEFAULT NULL,
  p_limit integer DEFAULT NULL)
RETURNS TABLE (id uuid, transaction_id uuid, transaction_kind ledger_transaction_kind, account_id uuid,
               book ledger_book, kind ledger_entry_kind, amount_micro_usdc bigint, created_at timestamptz)
LANGUAGE sql STABLE AS $$
-- the written entries
(SELECT l.* FROM (
   SELECT e.id, e.transaction_id, t.kind AS transaction_kind, e.account_id, e.book, e.kind,
          e.amount_micro_usdc, e.created_at
     FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id) l
  WHERE (p_account IS NULL OR l.account_id = p_account) AND (p_books IS NULL OR l.book = ANY (p_books))
    AND (p_since IS NULL OR l.created_at >= p_since) AND (p_until IS NULL OR l.created_at < p_until)
    AND (p_older_at IS NULL OR (l.created_at <= p_older_at AND (l.created_at, l.id) < (p_older_at, p_older_id)))
    AND (p_newer_at IS NULL OR (l.created_at >= p_newer_at AND (l.created_at, l.id) > (p_newer_at, p_newer_id)))
  ORDER BY CASE WHEN p_newest_first THEN l.created_at END DESC, CASE WHEN p_newest_first THEN l.id END DESC,
           CASE WHEN NOT p_newest_first THEN l.created_at END, CASE WHEN NOT p_newest_first THEN l.id END
  LIMIT p_limit)
UNION ALL
-- a clear: the buyer's debit, from its confirmed balance
(SELECT l.* FROM (
   SELECT md5(c.id::text || ':buyer')::uuid AS id, c.id AS transaction_id, 'clear'::ledger_transaction_kind AS transaction_kind,
          c.buyer_account_id AS account_id, 'buyer_confirmed'::ledger_book AS book, 'buyer_debit'::ledger_entry_kind AS kind,
          -c.gross_micro_usdc AS amount_micro_usdc, c.created_at
     FROM clears c WHERE c.gross_micro_usdc > 0 AND c.payment_id IS NULL) l
  WHERE (p_account IS NULL OR l.account_id = p_account) AND (p_books IS NULL OR l.book = ANY (p_books))
    AND (p_since IS NULL OR l.created_at >= p_since) AND (p_until IS NULL OR l.created_at < p_until)
    AND (p_older_at IS NULL OR (l.created_at <= p_older_at AND (l.created_at, l.id) < (p_older_at, p_older_id)))
    AND (p_newer_at IS NULL OR (l.created_at >= p_newer_at AND (l.created_at, l.id) > (p_newer_at, p_newer_id)))
  ORDER BY CASE WHEN p_newest_first THEN l.created_at END DESC, CASE WHEN p_newest_first THEN l.id END DESC,
           CASE WHEN NOT p_newest_first THEN l.created_at END, CASE WHEN NOT p_newest_first THEN l.id END
  LIMIT p_limit)
UNION ALL
-- a clear paid per request: the buyer's debit, on the receivable its payment settles
(SELECT l.* FROM (
   SELECT md5(c.id::text || ':buyer')::uuid AS id, c.id AS transaction_id, 'clear'::ledger_transaction_kind AS transaction_kind,
          c.buyer_account_id AS account_id, 'payment_receivable'::ledger_book AS book, 'buyer_debit'::ledger_entry_kind AS kind,
          -c.gross_micro_usdc AS amount_micro_usdc, c.created_at
     FROM clears c WHERE c.gross_micro_usdc > 0 AND c.payment_id IS NOT NULL) l
  WHERE (p_account IS NULL OR l.account_id = p_account) AND (p_books IS NULL OR l.book = ANY (p_books))
    AND (p_since IS NULL OR l.created_at >= p_since) AND (p_until IS NULL OR l.created_at < p_until)
    AND (p_older_at IS NULL OR (l.created_at <= p_older_at AND (l.created_at, l.id) < (p_older_at, p_older_id)))
    AND (p_newer_at IS NULL OR (l.created_at >= p_newer_at AND (l.created_at, l.id) > (p_newer_at, p_newer_id)))
  ORDER BY CASE WHEN p_newest_first THEN l.created_at END DESC, CASE WHEN p_newest_first THEN l.id END DESC,
           CASE WHEN NOT p_newest_first THEN l.created_at END, CASE WHEN NOT p_newest_first THEN l.id END
  LIMIT p_limit)
UNION ALL
-- a clear: the supplier's credit, payable
(SELECT l.* FROM (
   SELECT md5(c.id::text || ':supplier')::uuid AS id, c.id AS transaction_id, 'clear'::ledger_transaction_kind AS transaction_kind,
          c.supplier_account_id AS account_id, 'supplier_payable'::ledger_book AS book,
          'supplier_credit'::ledger_entry_kind AS kind, c.supplier_micro_usdc AS amount_micro_usdc, c.created_at
     FROM clears c WHERE c.supplier_micro_usdc > 0 AND NOT c.supplier_held) l
  WHERE (p_account IS NULL OR l.account_id = p_account) AND (p_books IS NULL OR l.book = ANY (p_books))
    AND (p_since IS NULL OR l.created_at >= p_since) AND (p_until IS NULL OR l.created_at < p_until)
    AND (p_older_at IS NULL OR (l.created_at <= p_older_at AND (l.created_at, l.id) < (p_older_at, p_older_id)))
    AND (p_newer_at IS NULL OR (l.created_at >= p_newer_at AND (l.created_at, l.id) > (p_newer_at, p_newer_id)))
  ORDER BY CASE WHEN p_newest_first THEN l.created_at END DESC, CASE WHEN p_newest_first THEN l.id END DESC,
           CASE WHEN NOT p_newest_first THEN l.created_at END, CASE WHEN NOT p_newest_first THEN l.id END
  LIMIT p_limit)
UNION ALL
-- a clear of a video job: the supplier's credit, held until the job is final
(SELECT l.* FROM (
   SELECT md5(c.id::text || ':supplier')::uuid AS id, c.id AS transaction_id, 'clear'::ledger_transaction_kind AS transaction_kind,
          c.supplier_account_id AS account_id, 'supplier_held'::ledger_book AS book,
          'supplier_credit'::ledger_entry_kind AS kind, c.supplier_micro_usdc AS amount_micro_usdc, c.created_at
     FROM clears c WHERE c.supplier_micro_usdc > 0 AND c.supplier_held) l
  WHERE (p_account IS NULL OR l.account_id = p_account) AND (p_books IS NULL OR l.book = ANY (p_books))
    AND (p_since IS NULL OR l.created_at >= p_since) AND (p_until IS NULL OR l.created_at < p_until)
    AND (p_older_at IS NULL OR (l.created_at <= p_older_at AND (l.created_at, l.id) < (p_older_at, p_older_id)))
    AND (p_newer_at IS NULL OR (l.created_at >= p_newer_at AND (l.created_at, l.id) > (p_newer_at, p_newer_id)))
  ORDER BY CASE WHEN p_newest_first THEN l.created_at END DESC, CASE WHEN p_newest_first THEN l.id END DESC,
           CASE WHEN NOT p_newest_first THEN l.created_at END, CASE WHEN NOT p_newest_first THEN l.id END
  LIMIT p_limit)
UNION ALL
-- a clear: the platform's fee
(SELECT l.* FROM (
   SELECT md5(c.id::text || ':fee')::uuid AS id, c.id AS transaction_id, 'clear'::ledger_transaction_kind AS transaction_kind,
          NULL::uuid AS account_id, 'platform_fee'::ledger_book AS book, 'platform_fee'::ledger_entry_kind AS kind,
          c.fee_micro_usdc AS amount_micro_usdc, c.created_at
     FROM clears c WHERE c.fee_micro_usdc > 0) l
  WHERE (p_account IS NULL OR l.account_id = p_account) AND (p_books IS NULL OR l.book = ANY (p_books))
    AND (p_since IS NULL OR l.created_at >= p_since) AND (p_until IS NULL OR l.created_at < p_until)
    AND (p_older_at IS NULL OR (l.created_at <= p_older_at AND (l.created_at, l.id) < (p_older_at, p_older_id)))
    AND (p_newer_at IS NULL OR (l.created_at >= p_newer_at AND (l.created_at, l.id) > (p_newer_at, p_newer_id)))
  ORDER BY CASE WHEN p_newest_first THEN l.created_at END DESC, CASE WHEN p_newest_first THEN l.id END DESC,
           CASE WHEN NOT p_newest_first THEN l.created_at END, CASE WHEN NOT p_newest_first THEN l.id END
  LIMIT p_limit)
UNION ALL
-- a retained month's clear lines, summed per account and book
(SELECT l.* FROM (
   SELECT k.id, md5('closing:' || k.month::text)::uuid AS transaction_id, 'closing'::ledger_transaction_kind AS transaction_kind,
          k.account_id, k.book, 'closing'::ledger_entry_kind AS kind, k.amount_micro_usdc, k.created_at
     FROM ledger_closings k) l
  WHERE (p_account IS NULL OR l.account_id = p_account) AND (p_books IS NULL OR l.book = ANY (p_books))
    AND (p_since IS NULL OR l.created_at >= p_since) AND (p_until IS NULL OR l.created_at < p_until)
    AND (p_older_at IS NULL OR (l.created_at <= p_older_at AND (l.created_at, l.id) < (p_older_at, p_older_id)))
    AND (p_newer_at IS NULL OR (l.created_at >= p_newer_at AND (l.created_at, l.id) > (p_newer_at, p_newer_id)))
  ORDER BY CASE WHEN p_newest_first THEN l.created_at END DESC, CASE WHEN p_newest_first THEN l.id END DESC,
           CASE WHEN NOT p_newest_first THEN l.created_at END, CASE WHEN NOT p_newest_first THEN l.id END
  LIMIT p_limit)
$$;
