-- The market's clears by UTC hour and model (docs/decisions.md "Model statistics at the fold"), for
-- the whole hours from p_from (an hour's start) until p_until: the rows the folds and refunds keep
-- (model_hours), plus the clears appended and not yet folded (svc_unfolded: a refunded one among them
-- is already taken out of its hour's row, so it counts here whole). The one place of the rule;
-- GET /v1/models/stats reads it for the whole hours of its window, svc_books_check compares it with the
-- clears themselves. `buyers`: buyers that certainly have an unrefunded clear in the hour and model
-- (the rows' pairs when no refund was taken out of the hour, and the unfolded clears' own buyers),
-- never all of them. What it reads is the rows (hours × models × folding processes) and the unfolded
-- clears, never the whole table of clears.
CREATE OR REPLACE FUNCTION svc_model_hours(p_from timestamptz, p_until timestamptz)
RETURNS TABLE (hour timestamptz, model text, modality modality, clears bigint, burn_micro_diem bigint, buyers uuid[])
LANGUAGE sql STABLE AS $$
  SELECT p.hour, p.model, p.modality, sum(p.clears)::bigint, sum(p.burn)::bigint,
         ARRAY(SELECT DISTINCT b
                 FROM unnest(CASE WHEN sum(p.refunds) = 0 THEN array_agg(p.low) || array_agg(p.high) END
                             || array_agg(p.exact)) b
                WHERE b IS NOT NULL ORDER BY b)
    FROM (SELECT m.hour, m.model, m.modality, m.clears, m.burn_micro_diem AS burn, m.refunds,
                 m.buyer_low AS low, m.buyer_high AS high, NULL::uuid AS exact
            FROM model_hours m
           WHERE m.hour >= p_from AND m.hour < p_until
          UNION ALL
          SELECT date_trunc('hour', u.created_at, 'UTC'), u.model, u.modality, 1, u.burn_micro_diem, 0, NULL, NULL,
                 CASE WHEN u.refunded_at IS NULL THEN u.buyer_account_id END
            FROM svc_unfolded() u
           WHERE u.created_at >= p_from AND u.created_at < p_until) p
   GROUP BY p.hour, p.model, p.modality
$$;
