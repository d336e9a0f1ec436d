-- Holds a request's maximum charge against its API key's budget (issue 28, docs/decisions.md
-- "Key budgets"), or says why not. Serialised per key by the key row's lock (FOR NO KEY UPDATE, which
-- the foreign-key checks of endings do not wait for); the key's spend in the period and its holds
-- are read in one statement, so an ending that commits meanwhile (its charge added to api_key_spend
-- and its hold deleted in one transaction) is counted exactly once.
-- p_period_start / p_period_end: the period's UTC days [start, end) as the caller computed them from
-- p_reset (null start: all time); a key whose limit_reset is no longer p_reset answers
-- 'stale_policy' with the key's `reset` (the caller plans again with it), one without a limit
-- 'unlimited' (nothing held).
-- Outcomes: ok | unlimited | stale_policy | key_inactive | holder_lost | exceeded; `remaining` is the
-- budget left before this hold (for exceeded: what a request may still reserve), `lim` the limit.
-- Caller: src/domain/inference/key-budget.ts.
CREATE OR REPLACE FUNCTION svc_key_reserve(
  p_holder uuid, p_request uuid, p_api_key uuid, p_reset text, p_period_start date, p_period_end date,
  p_amount bigint, p_now timestamptz)
RETURNS TABLE (outcome text, remaining bigint, lim bigint, reset text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_status text;
BEGIN
  PERFORM 1 FROM escrow_holders h WHERE h.id = p_holder AND h.expires_at > p_now FOR KEY SHARE;
  IF NOT FOUND THEN
    outcome := 'holder_lost';
    RETURN NEXT;
    RETURN;
  END IF;
  SELECT k.limit_micro_usdc, k.limit_reset::text, k.status::text INTO lim, reset, v_status
    FROM api_keys k WHERE k.id = p_api_key FOR NO KEY UPDATE;
  IF NOT FOUND OR v_status <> 'active' THEN
    outcome := 'key_inactive';
  ELSIF lim IS NULL THEN
    outcome := 'unlimited';
  ELSIF reset IS DISTINCT FROM p_reset THEN
    outcome := 'stale_policy';
  ELSE
    SELECT lim
           - COALESCE((SELECT sum(s.spent_micro_usdc) FROM api_key_spend s
                        WHERE s.api_key_id = p_api_key
                          AND (p_period_start IS NULL OR s.day >= p_period_start)
                          AND (p_period_end IS NULL OR s.day < p_period_end)), 0)
           - COALESCE((SELECT sum(h.amount_micro_usdc) FROM key_budget_holds h WHERE h.api_key_id = p_api_key), 0)
      INTO remaining;
    remaining := GREATEST(remaining, 0);
    IF p_amount > remaining THEN
      outcome := 'exceeded';
    ELSE
      INSERT INTO key_budget_holds (request_id, api_key_id, holder, amount_micro_usdc, created_at)
      VALUES (p_request, p_api_key, p_holder, p_amount, p_now);
      outcome := 'ok';
    END IF;
  END IF;
  RETURN NEXT;
END $$;
