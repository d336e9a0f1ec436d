-- The market's clears by UTC day and modality (docs/decisions.md "Market totals at the fold"): the
-- rows the folds and refunds keep (market_days), plus the clears appended and not yet folded
-- (svc_unfolded: a refunded one among them is already taken out of its day's row, so it counts here
-- whole). The one place of the rule; GET /v1/market/stats reads it, svc_books_check compares it with
-- the clears themselves. A NULL modality is a month retired before market_days existed (its first
-- day). What it reads is the rows (days × folding processes × modalities) and the unfolded clears,
-- never the whole table of clears.
CREATE OR REPLACE FUNCTION svc_market_days()
RETURNS TABLE (day date, modality modality, clears bigint, burn_micro_diem bigint, gross_micro_usdc bigint,
               weighted bigint)
LANGUAGE sql STABLE AS $$
  SELECT x.day, x.modality, sum(x.clears)::bigint, sum(x.burn)::bigint, sum(x.gross)::bigint, sum(x.weighted)::bigint
    FROM (SELECT m.day, m.modality, m.clears, m.burn_micro_diem AS burn, m.gross_micro_usdc AS gross, m.weighted
            FROM market_days m
          UNION ALL
          SELECT (u.created_at AT TIME ZONE 'UTC')::date, u.modality, 1, u.burn_micro_diem, u.gross_micro_usdc,
                 u.burn_micro_diem * u.price_cents_per_dollar
            FROM svc_unfolded() u) x
   GROUP BY x.day, x.modality
$$;
