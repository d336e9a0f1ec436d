-- The books check, for the service itself (retention closes a month only after it passes; the
-- scale script runs it on 10 million rows): one row per broken rule and subject, none when the books
-- balance. The same rules as the tests' assertBooksBalance (testkit/books.ts), in one pass over the
-- ledger (the function ledger_lines, prisma/functions/ledger_lines.sql) rather than one query per
-- account:
--   journal_unbalanced   a written journal whose entries do not sum to zero (subject: its id)
--   clear_unsplit        a clear whose gross is not its fee plus the supplier's share (its id)
--   clear_parties        a clear whose buyer is not on record, whose offer is not on record with its
--                        supplier and supplier key, or whose API key is not its buyer's (its id: no
--                        foreign key holds them, docs/decisions.md "The append names its parties
--                        without locking them")
--   closing_unbalanced   a retained month whose closing lines do not sum to zero (the month)
--   account_books        an account whose live balances differ from its ledger books (its id)
--   slice_count          an escrow slice whose count of unfolded charges is not the sum of its
--                        holder's unfolded clears on it (subject: buyer|offer:<id>:<holder>)
--   market_days          the market's totals of a day and modality (svc_market_days) differ from its
--                        unrefunded clears' (subject: <day>:<modality>, or <month>:retired)
--   model_hours          the market's totals of an hour and model (svc_model_hours) differ from its
--                        unrefunded clears', or a buyer they name has none there
--                        (subject: <yyyy-mm-ddThh>:<model>[:<buyer>])
--   ledger_total         the whole ledger does not sum to zero
-- Reads one snapshot (a single statement): balances and lines are written in one transaction, so a
-- check during traffic sees both or neither of a write.
CREATE OR REPLACE FUNCTION svc_books_check()
RETURNS TABLE (rule text, subject text)
LANGUAGE sql STABLE AS $$
  WITH by_account AS MATERIALIZED (
    SELECT l.account_id,
           COALESCE(sum(l.amount_micro_usdc) FILTER (WHERE l.book = 'buyer_confirmed'), 0) AS confirmed,
           COALESCE(sum(l.amount_micro_usdc) FILTER (WHERE l.book = 'buyer_pending'), 0) AS pending,
           COALESCE(sum(l.amount_micro_usdc) FILTER (WHERE l.book = 'supplier_payable'), 0) AS payable,
           COALESCE(sum(l.amount_micro_usdc) FILTER (WHERE l.book = 'supplier_held'), 0) AS held,
           sum(l.amount_micro_usdc) AS total
      FROM ledger_lines() l
     GROUP BY l.account_id
  ),
  -- the live balances (svc_account_live's rule, for every account in one pass): the clears appended
  -- and not yet folded are in the lines already, not yet in the balance columns
  unfolded AS MATERIALIZED (
    SELECT x.account_id, sum(x.gross)::bigint AS gross, sum(x.payable)::bigint AS payable, sum(x.held)::bigint AS held
      FROM (SELECT u.buyer_account_id AS account_id,
                   CASE WHEN u.payment_id IS NULL THEN u.gross_micro_usdc ELSE 0 END AS gross, 0 AS payable, 0 AS held
              FROM svc_unfolded() u
            UNION ALL
            SELECT u.supplier_account_id, 0,
                   CASE WHEN u.supplier_held THEN 0 ELSE u.supplier_micro_usdc END,
                   CASE WHEN u.supplier_held THEN u.supplier_micro_usdc ELSE 0 END
              FROM svc_unfolded() u) x
     GROUP BY x.account_id
  ),
  -- the market's totals against the clears themselves: a retired month's days as its one closing
  -- (whose modality and prices are not kept), every other day by modality
  retired AS MATERIALIZED (SELECT DISTINCT k.month FROM clear_closings k),
  market_kept AS MATERIALIZED (
    SELECT CASE WHEN r.month IS NULL THEN m.day ELSE r.month END AS day,
           CASE WHEN r.month IS NULL THEN m.modality END AS modality,
           sum(m.clears) AS clears, sum(m.burn_micro_diem) AS burn, sum(m.gross_micro_usdc) AS gross,
           sum(CASE WHEN r.month IS NULL THEN m.weighted ELSE 0 END) AS weighted
      FROM svc_market_days() m LEFT JOIN retired r ON r.month = date_trunc('month', m.day)::date
     GROUP BY 1, 2
  ),
  model_kept AS MATERIALIZED (SELECT * FROM svc_model_hours('-infinity', 'infinity')),
  -- the unrefunded clears by hour, model and modality, in one pass over the table; the days are
  -- summed from these hours
  model_truth AS MATERIALIZED (
    SELECT date_trunc('hour', c.created_at, 'UTC') AS hour, c.model, c.modality, count(*) AS clears,
           sum(c.burn_micro_diem) AS burn, sum(c.gross_micro_usdc) AS gross,
           sum(c.burn_micro_diem * c.price_cents_per_dollar) AS weighted
      FROM clears c WHERE c.refunded_at IS NULL GROUP BY 1, 2, 3
  ),
  market_truth AS MATERIALIZED (
    SELECT (t.hour AT TIME ZONE 'UTC')::date AS day, t.modality, sum(t.clears) AS clears, sum(t.burn) AS burn,
           sum(t.gross) AS gross, sum(t.weighted) AS weighted
      FROM model_truth t GROUP BY 1, 2
    UNION ALL
    SELECT k.month, NULL, sum(k.clears), sum(k.burn_micro_diem), sum(k.gross_micro_usdc), 0
      FROM clear_closings k GROUP BY k.month
  )
  SELECT 'journal_unbalanced', e.transaction_id::text
    FROM ledger_entries e GROUP BY e.transaction_id HAVING sum(e.amount_micro_usdc) <> 0
  UNION ALL
  SELECT r.rule, x.id::text
    FROM (SELECT c.id, c.gross_micro_usdc <> c.fee_micro_usdc + c.supplier_micro_usdc AS unsplit,
                 (o.id IS NULL OR o.account_id <> c.supplier_account_id OR o.upstream_key_id <> c.upstream_key_id
                  OR b.id IS NULL OR (c.api_key_id IS NOT NULL AND k.id IS NULL)) AS unnamed
            FROM clears c
            LEFT JOIN offers o ON o.id = c.offer_id
            LEFT JOIN accounts b ON b.id = c.buyer_account_id
            LEFT JOIN api_keys k ON k.id = c.api_key_id AND k.account_id = c.buyer_account_id) x
   CROSS JOIN LATERAL (VALUES ('clear_unsplit', x.unsplit), ('clear_parties', x.unnamed)) r(rule, broken)
   WHERE (x.unsplit OR x.unnamed) AND r.broken
  UNION ALL
  SELECT 'closing_unbalanced', k.month::text
    FROM ledger_closings k GROUP BY k.month HAVING sum(k.amount_micro_usdc) <> 0
  UNION ALL
  SELECT 'account_books', a.id::text
    FROM accounts a LEFT JOIN by_account s ON s.account_id = a.id
    LEFT JOIN unfolded u ON u.account_id = a.id
   WHERE a.confirmed_micro_usdc - COALESCE(u.gross, 0) <> COALESCE(s.confirmed, 0)
      OR a.pending_micro_usdc <> COALESCE(s.pending, 0)
      OR a.supplier_payable_micro_usdc + COALESCE(u.payable, 0) <> COALESCE(s.payable, 0)
      OR a.supplier_held_micro_usdc + COALESCE(u.held, 0) <> COALESCE(s.held, 0)
  UNION ALL
  SELECT 'slice_count', 'buyer:' || COALESCE(e.account_id, u.account)::text || ':' || COALESCE(e.holder, u.holder)::text
    FROM (SELECT b.account_id, b.holder, b.charged_micro_usdc FROM buyer_escrows b WHERE b.charged_micro_usdc <> 0) e
    FULL JOIN (SELECT x.buyer_account_id AS account, x.holder, sum(x.gross_micro_usdc) AS gross
                 FROM svc_unfolded() x WHERE x.payment_id IS NULL GROUP BY 1, 2) u
      ON u.account = e.account_id AND u.holder = e.holder
   WHERE COALESCE(e.charged_micro_usdc, 0) <> COALESCE(u.gross, 0)
  UNION ALL
  SELECT 'slice_count', 'offer:' || COALESCE(e.offer_id, u.offer)::text || ':' || COALESCE(e.holder, u.holder)::text
    FROM (SELECT o.offer_id, o.holder, o.charged_micro_diem FROM offer_escrows o WHERE o.charged_micro_diem <> 0) e
    FULL JOIN (SELECT x.offer_id AS offer, x.holder, sum(x.burn_micro_diem) AS burn
                 FROM svc_unfolded() x GROUP BY 1, 2) u
      ON u.offer = e.offer_id AND u.holder = e.holder
   WHERE COALESCE(e.charged_micro_diem, 0) <> COALESCE(u.burn, 0)
  UNION ALL
  SELECT 'market_days', COALESCE(a.day, b.day)::text || ':' || COALESCE(COALESCE(a.modality, b.modality)::text, 'retired')
    FROM market_kept a FULL JOIN market_truth b ON b.day = a.day AND b.modality IS NOT DISTINCT FROM a.modality
   WHERE COALESCE(a.clears, 0) <> COALESCE(b.clears, 0) OR COALESCE(a.burn, 0) <> COALESCE(b.burn, 0)
      OR COALESCE(a.gross, 0) <> COALESCE(b.gross, 0) OR COALESCE(a.weighted, 0) <> COALESCE(b.weighted, 0)
  UNION ALL
  SELECT 'model_hours', to_char(COALESCE(a.hour, b.hour) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') || ':' || COALESCE(a.model, b.model)
    FROM model_kept a FULL JOIN model_truth b ON b.hour = a.hour AND b.model = a.model AND b.modality = a.modality
   WHERE COALESCE(a.clears, 0) <> COALESCE(b.clears, 0) OR COALESCE(a.burn_micro_diem, 0) <> COALESCE(b.burn, 0)
  UNION ALL
  SELECT 'model_hours', to_char(a.hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') || ':' || a.model || ':' || x.b::text
    FROM model_kept a CROSS JOIN LATERAL unnest(a.buyers) x(b)
   WHERE NOT EXISTS (SELECT 1 FROM clears c
                      WHERE c.buyer_account_id = x.b AND c.model = a.model AND c.refunded_at IS NULL
                        AND c.created_at >= a.hour AND c.created_at < a.hour + interval '1 hour')
  UNION ALL
  SELECT 'ledger_total', (SELECT COALESCE(sum(s.total), 0) FROM by_account s)::text
   WHERE (SELECT COALESCE(sum(s.total), 0) FROM by_account s) <> 0
$$;
