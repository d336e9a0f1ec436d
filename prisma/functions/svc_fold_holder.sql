-- The fold (docs/decisions.md "One append per clear"): applies a holder's unfolded clears (seq above
-- its folded_seq) to the hot rows, in one transaction, then marks them folded. The holder's fold lock
-- (svc_fold_key) is taken alone first: every append of the holder holds it shared, so no append of
-- the holder commits during a fold and every later one takes a higher seq. Then the lock order of every
-- money path: buyers in id order, offers in id order, supplier keys, suppliers. Per clear:
--   the buyer's confirmed and reserved balance, and the holder's slice of it and the slice's count of
--     unfolded charges, down by the gross (not for a charge paid per request: its payment took it);
--   the offer's remaining and reserved, and the holder's slice of it and its count, down by the burn;
--   the supplier key's last known balance down by the burn (not below 0);
--   the supplier's payable up by the share (held, for a video job's);
--   the API key's spend of the request's start day up by the gross;
--   the market's totals of the clear's day and modality, and of its hour and model (svc_market_add:
--     market_days and model_hours, the holder's rows) up by it.
-- A slice's count is its holder's unfolded clears' sum (the append adds each, under the slice's
-- CHECK charged <= amount), so a short count, slice or balance is a broken invariant and raises. Returns the live offers it
-- sold out: the caller marks them depleted with their webhook (OfferService.markDepletedIfEmpty; the
-- expiry job catches any a crash left). Callers: the holder's own process (a timer, its close),
-- the sweeper before it releases a dead holder (svc_release_expired), svc_fold_all.
CREATE OR REPLACE FUNCTION svc_fold_holder(p_holder uuid)
RETURNS TABLE (offer_id uuid, account_id uuid)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_from bigint;
  v_after timestamptz;
  v_to bigint;
  v_through timestamptz;
  c integer;
  n integer;
BEGIN
  PERFORM pg_advisory_xact_lock(svc_fold_key(p_holder));
  SELECT h.folded_seq, h.folded_through - interval '1 day' INTO v_from, v_after
    FROM escrow_holders h WHERE h.id = p_holder;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT max(x.seq), max(x.created_at) INTO v_to, v_through
    FROM svc_holder_clears(p_holder, v_from, 9223372036854775807, v_after) x;
  IF v_to IS NULL THEN
    RETURN;
  END IF;

  -- buyers (in id order), their slices, their balances
  PERFORM 1 FROM accounts a
   WHERE a.id IN (SELECT x.buyer_account_id FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x
                   WHERE x.payment_id IS NULL)
   ORDER BY a.id FOR NO KEY UPDATE;
  WITH g AS (SELECT x.buyer_account_id AS account, sum(x.gross_micro_usdc)::bigint AS gross
               FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x
              WHERE x.payment_id IS NULL
              GROUP BY 1 HAVING sum(x.gross_micro_usdc) > 0),
       s AS (UPDATE buyer_escrows e SET amount_micro_usdc = e.amount_micro_usdc - g.gross,
                                         charged_micro_usdc = e.charged_micro_usdc - g.gross
               FROM g WHERE e.account_id = g.account AND e.holder = p_holder AND e.charged_micro_usdc >= g.gross
             RETURNING e.account_id),
       b AS (UPDATE accounts a
                SET confirmed_micro_usdc = a.confirmed_micro_usdc - g.gross,
                    reserved_micro_usdc = a.reserved_micro_usdc - g.gross
               FROM g WHERE a.id = g.account AND a.reserved_micro_usdc >= g.gross
                 AND a.confirmed_micro_usdc >= a.reserved_micro_usdc
             RETURNING a.id)
  SELECT (SELECT count(*) FROM g) - (SELECT count(*) FROM s), (SELECT count(*) FROM g) - (SELECT count(*) FROM b)
    INTO c, n;
  IF c <> 0 OR n <> 0 THEN
    RAISE EXCEPTION 'fold: a buyer slice or balance does not cover its unfolded charges' USING ERRCODE = 'P0001';
  END IF;
  DELETE FROM buyer_escrows e WHERE e.holder = p_holder AND e.amount_micro_usdc = 0;

  -- offers (in id order), their slices, remaining and reserved
  PERFORM 1 FROM offers o
   WHERE o.id IN (SELECT x.offer_id FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x)
   ORDER BY o.id FOR NO KEY UPDATE;
  WITH g AS (SELECT x.offer_id AS offer, sum(x.burn_micro_diem)::bigint AS burn, max(x.created_at) AS t
               FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x
              GROUP BY 1 HAVING sum(x.burn_micro_diem) > 0),
       s AS (UPDATE offer_escrows e SET amount_micro_diem = e.amount_micro_diem - g.burn,
                                         charged_micro_diem = e.charged_micro_diem - g.burn
               FROM g WHERE e.offer_id = g.offer AND e.holder = p_holder AND e.charged_micro_diem >= g.burn
             RETURNING e.offer_id),
       o AS (UPDATE offers o
                SET remaining_micro_diem = o.remaining_micro_diem - g.burn,
                    reserved_micro_diem = o.reserved_micro_diem - g.burn,
                    updated_at = g.t
               FROM g WHERE o.id = g.offer AND o.reserved_micro_diem >= g.burn AND o.remaining_micro_diem >= g.burn
             RETURNING o.id)
  SELECT (SELECT count(*) FROM g) - (SELECT count(*) FROM s), (SELECT count(*) FROM g) - (SELECT count(*) FROM o)
    INTO c, n;
  IF c <> 0 OR n <> 0 THEN
    RAISE EXCEPTION 'fold: an offer slice or remaining does not cover its unfolded burns' USING ERRCODE = 'P0001';
  END IF;
  DELETE FROM offer_escrows e WHERE e.holder = p_holder AND e.amount_micro_diem = 0;

  UPDATE upstream_keys k SET last_balance_micro_diem = GREATEST(k.last_balance_micro_diem - s.b, 0)
    FROM (SELECT x.upstream_key_id AS key, sum(x.burn_micro_diem)::bigint AS b
            FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x
           GROUP BY 1 HAVING sum(x.burn_micro_diem) > 0 ORDER BY 1) s
   WHERE k.id = s.key AND k.last_balance_micro_diem IS NOT NULL;

  UPDATE accounts a SET supplier_payable_micro_usdc = a.supplier_payable_micro_usdc + s.p,
                        supplier_held_micro_usdc = a.supplier_held_micro_usdc + s.h
    FROM (SELECT x.supplier_account_id AS supplier,
                 COALESCE(sum(x.supplier_micro_usdc) FILTER (WHERE NOT x.supplier_held), 0)::bigint AS p,
                 COALESCE(sum(x.supplier_micro_usdc) FILTER (WHERE x.supplier_held), 0)::bigint AS h
            FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x
           GROUP BY 1 HAVING sum(x.supplier_micro_usdc) > 0 ORDER BY 1) s
   WHERE a.id = s.supplier;

  INSERT INTO api_key_spend (api_key_id, day, spent_micro_usdc)
  SELECT x.api_key_id, x.spend_day, sum(x.gross_micro_usdc)::bigint
    FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x
   WHERE x.api_key_id IS NOT NULL AND x.gross_micro_usdc > 0
   GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (api_key_id, day)
  DO UPDATE SET spent_micro_usdc = api_key_spend.spent_micro_usdc + EXCLUDED.spent_micro_usdc;

  -- the market's totals (svc_market_days, svc_model_hours): the holder's own rows, so no other fold waits on them
  PERFORM svc_market_add(p_holder, 1, ARRAY(SELECT x FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x));

  UPDATE escrow_holders h SET folded_seq = v_to, folded_through = GREATEST(h.folded_through, v_through)
   WHERE h.id = p_holder;

  RETURN QUERY
    SELECT o.id, o.account_id FROM offers o
     WHERE o.id IN (SELECT x.offer_id FROM svc_holder_clears(p_holder, v_from, v_to, v_after) x)
       AND o.status IN ('active', 'paused') AND o.remaining_micro_diem = 0;
END $$;
