-- Holds a request's maximum charge against the budgets of its API key and of every budgeted ancestor
-- of that key (issues 28 and 38, docs/decisions.md "Key budgets" and "Key scopes and the key tree"),
-- or says why not. A budgeted key's figure is its whole subtree's: what the key and every key below it
-- spent in the key's own period (svc_key_spend: folded and unfolded) plus their requests' holds in flight; so a grandchild
-- cannot spend past its parent's limit. Serialised per budgeted key by its row lock (FOR NO KEY
-- UPDATE, which the foreign-key checks of endings do not wait for), taken root first, the one lock
-- order; the spend and the holds are read after the locks, so an ending that commits meanwhile (its
-- charge appended as an unfolded clear and its hold deleted in one statement) is counted exactly once.
-- p_periods: {"daily": {"start": date, "end": date}, "weekly": …, "monthly": …, "never": {null, null}}
-- as the caller computed them (`budgetPeriod`) at the request's start, so a hold and its charge fall in
-- the same period; each budgeted key is held in the period of its own limit_reset.
-- Outcomes: ok | unlimited | key_inactive | holder_lost | exceeded. `remaining` is what the tightest
-- budget left before this hold (exceeded: what a request may still reserve), `lim` and `reset` that
-- budget's limit and period; all null for unlimited (no key of the chain has a limit: nothing held).
-- Caller: src/domain/inference/escrow/key-budget.ts.
DROP FUNCTION IF EXISTS svc_key_reserve(uuid, uuid, uuid, text, date, date, bigint, timestamptz);
CREATE OR REPLACE FUNCTION svc_key_reserve(
  p_holder uuid, p_request uuid, p_api_key uuid, p_periods jsonb, p_amount bigint, p_now timestamptz)
RETURNS TABLE (outcome text, remaining bigint, lim bigint, reset text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_status text;
  v_chain uuid[];
  v_budgeted uuid[];
  v_left bigint;
  v_start date;
  v_end date;
  r record;
BEGIN
  PERFORM 1 FROM escrow_holders h WHERE h.id = p_holder AND h.expires_at > p_now FOR KEY SHARE;
  IF NOT FOUND THEN
    outcome := 'holder_lost';
    RETURN NEXT;
    RETURN;
  END IF;
  SELECT k.status::text, k.ancestor_ids || k.id INTO v_status, v_chain FROM api_keys k WHERE k.id = p_api_key;
  IF NOT FOUND OR v_status <> 'active' THEN
    outcome := 'key_inactive';
    RETURN NEXT;
    RETURN;
  END IF;
  -- the budgeted keys of the chain, root first, locked in that order; a revoked ancestor ends it
  SELECT array_agg(c.id ORDER BY c.ord) INTO v_budgeted
    FROM unnest(v_chain) WITH ORDINALITY AS c(id, ord) JOIN api_keys k ON k.id = c.id
   WHERE k.limit_micro_usdc IS NOT NULL OR k.status <> 'active';
  IF v_budgeted IS NULL THEN
    outcome := 'unlimited';
    RETURN NEXT;
    RETURN;
  END IF;
  FOR r IN SELECT k.id, k.limit_micro_usdc, k.limit_reset::text AS lr, k.status::text AS st
             FROM unnest(v_budgeted) WITH ORDINALITY AS c(id, ord) JOIN api_keys k ON k.id = c.id
            ORDER BY c.ord
              FOR NO KEY UPDATE OF k
  LOOP
    IF r.st <> 'active' THEN
      outcome := 'key_inactive';
      remaining := NULL; lim := NULL; reset := NULL;
      RETURN NEXT;
      RETURN;
    END IF;
    CONTINUE WHEN r.limit_micro_usdc IS NULL;
    v_start := (p_periods -> r.lr ->> 'start')::date;
    v_end := (p_periods -> r.lr ->> 'end')::date;
    SELECT r.limit_micro_usdc
           - COALESCE((SELECT sum(s.spent_micro_usdc) FROM svc_key_spend() s JOIN api_keys d ON d.id = s.api_key_id
                        WHERE (d.id = r.id OR d.ancestor_ids @> ARRAY[r.id])
                          AND (v_start IS NULL OR s.day >= v_start)
                          AND (v_end IS NULL OR s.day < v_end)), 0)
           - COALESCE((SELECT sum(h.amount_micro_usdc) FROM key_budget_holds h JOIN api_keys d ON d.id = h.api_key_id
                        WHERE d.id = r.id OR d.ancestor_ids @> ARRAY[r.id]), 0)
      INTO v_left;
    v_left := GREATEST(v_left, 0);
    IF remaining IS NULL OR v_left < remaining THEN
      remaining := v_left;
      lim := r.limit_micro_usdc;
      reset := r.lr;
    END IF;
  END LOOP;
  IF lim IS NULL THEN
    outcome := 'unlimited';
  ELSIF p_amount > remaining THEN
    outcome := 'exceeded';
  ELSE
    INSERT INTO key_budget_holds (request_id, api_key_id, holder, amount_micro_usdc, created_at)
    VALUES (p_request, p_api_key, p_holder, p_amount, p_now);
    outcome := 'ok';
  END IF;
  RETURN NEXT;
END $$;
