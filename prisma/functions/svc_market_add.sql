-- The market's running totals, the one place they are written (docs/decisions.md "Market totals at
-- the fold", "Model statistics at the fold"): adds clears (p_sign = 1) to, or takes them out of
-- (p_sign = -1), their UTC day's row per modality (market_days: GET /v1/market/stats) and their UTC
-- hour's row per model (model_hours: GET /v1/models/stats), under one source. Callers:
--   the holder's fold (svc_fold_holder): the clears it applies, under the holder (its own rows, so no
--     two folds wait on one row);
--   a refund (refundClear): its clear, taken out under the nil source, counted in the hour's refunds;
--   fixtures and migrations that write clears as already folded, under the nil source.
-- An hour's buyer_low and buyer_high are the lowest and highest buyer of the unrefunded clears added
-- there (never changed by a take-out: the hour's refunds say its pair may be a refunded buyer).
CREATE OR REPLACE FUNCTION svc_market_add(p_source uuid, p_sign integer, p_clears clears[])
RETURNS void LANGUAGE sql AS $$
  INSERT INTO market_days (day, modality, source, clears, burn_micro_diem, gross_micro_usdc, weighted)
  SELECT (c.created_at AT TIME ZONE 'UTC')::date, c.modality, p_source, p_sign * count(*),
         p_sign * sum(c.burn_micro_diem)::bigint, p_sign * sum(c.gross_micro_usdc)::bigint,
         p_sign * sum(c.burn_micro_diem * c.price_cents_per_dollar)::bigint
    FROM unnest(p_clears) c
   GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT ON CONSTRAINT market_days_key
  DO UPDATE SET clears = market_days.clears + EXCLUDED.clears,
                burn_micro_diem = market_days.burn_micro_diem + EXCLUDED.burn_micro_diem,
                gross_micro_usdc = market_days.gross_micro_usdc + EXCLUDED.gross_micro_usdc,
                weighted = market_days.weighted + EXCLUDED.weighted;

  INSERT INTO model_hours (hour, model, modality, source, clears, burn_micro_diem, refunds, buyer_low, buyer_high)
  SELECT date_trunc('hour', c.created_at, 'UTC'), c.model, c.modality, p_source, p_sign * count(*),
         p_sign * sum(c.burn_micro_diem)::bigint, CASE WHEN p_sign < 0 THEN count(*) ELSE 0 END,
         CASE WHEN p_sign > 0 THEN min(c.buyer_account_id::text COLLATE "C") FILTER (WHERE c.refunded_at IS NULL) END::uuid,
         CASE WHEN p_sign > 0 THEN max(c.buyer_account_id::text COLLATE "C") FILTER (WHERE c.refunded_at IS NULL) END::uuid
    FROM unnest(p_clears) c
   GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT ON CONSTRAINT model_hours_key
  DO UPDATE SET clears = model_hours.clears + EXCLUDED.clears,
                burn_micro_diem = model_hours.burn_micro_diem + EXCLUDED.burn_micro_diem,
                refunds = model_hours.refunds + EXCLUDED.refunds,
                buyer_low = LEAST(model_hours.buyer_low, EXCLUDED.buyer_low),
                buyer_high = GREATEST(model_hours.buyer_high, EXCLUDED.buyer_high);
$$;
