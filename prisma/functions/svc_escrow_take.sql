-- Tops up a holder's slices, in one short transaction (lock order: buyer, then offer):
-- * the buyer part (p_account not null): the API key must be active and the account's; the
--   planned ceiling must be the account's; at least p_usdc_min of the available balance
--   (confirmed − reserved) must be free. Grants min(max(want, min), available).
-- * the offer part (p_offer not null): the offer must be eligible (svc_eligible) with its effective
--   price at p_now (svc_effective_price) at or below p_ceiling and at least p_diem_min routable
--   (svc_routable). Grants min(max(want, min), routable).
-- The buyer part commits even when the offer part is refused ('offer_short'): the grant is the
-- holder's either way. Commits asynchronously: a slice only protects funds until the settlement,
-- which commits synchronously (and flushes it); a slice lost in a crash makes the settlements
-- drawing on it fail their guards (nothing charged), never a charge without a slice.
-- Caller: src/domain/inference/escrow/escrow-take.ts.
CREATE OR REPLACE FUNCTION svc_escrow_take(
  p_holder uuid, p_account uuid, p_api_key uuid, p_ceiling integer, p_usdc_min bigint, p_usdc_want bigint,
  p_offer uuid, p_diem_min bigint, p_diem_want bigint, p_now timestamptz)
RETURNS TABLE (outcome text, granted_usdc bigint, available bigint, ceiling integer, granted_diem bigint,
               routable bigint, key_balance bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_eligible boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  granted_usdc := 0;
  granted_diem := 0;
  PERFORM 1 FROM escrow_holders h WHERE h.id = p_holder AND h.expires_at > p_now FOR KEY SHARE;
  IF NOT FOUND THEN
    outcome := 'holder_lost';
    RETURN NEXT;
    RETURN;
  END IF;
  IF p_account IS NOT NULL THEN
    IF NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = p_api_key AND k.account_id = p_account AND k.status = 'active') THEN
      outcome := 'key_inactive';
      RETURN NEXT;
      RETURN;
    END IF;
    SELECT a.confirmed_micro_usdc - a.reserved_micro_usdc, a.max_price_cents_per_dollar INTO available, ceiling
      FROM accounts a WHERE a.id = p_account FOR NO KEY UPDATE;
    IF ceiling IS DISTINCT FROM p_ceiling THEN
      outcome := 'stale_ceiling';
      RETURN NEXT;
      RETURN;
    END IF;
    IF available < p_usdc_min THEN
      outcome := 'insufficient_balance';
      RETURN NEXT;
      RETURN;
    END IF;
    granted_usdc := LEAST(GREATEST(p_usdc_want, p_usdc_min), available);
    UPDATE accounts a SET reserved_micro_usdc = a.reserved_micro_usdc + granted_usdc WHERE a.id = p_account;
    INSERT INTO buyer_escrows (account_id, holder, amount_micro_usdc) VALUES (p_account, p_holder, granted_usdc)
    ON CONFLICT (account_id, holder)
    DO UPDATE SET amount_micro_usdc = buyer_escrows.amount_micro_usdc + EXCLUDED.amount_micro_usdc;
    available := available - granted_usdc;
  END IF;
  IF p_offer IS NOT NULL THEN
    SELECT svc_eligible(o, k, p_now) AND svc_effective_price(o, p_now) <= p_ceiling, svc_routable(o, k), k.last_balance_micro_diem
      INTO v_eligible, routable, key_balance
      FROM offers o JOIN upstream_keys k ON k.id = o.upstream_key_id
     WHERE o.id = p_offer
       FOR NO KEY UPDATE OF o;
    IF NOT FOUND OR NOT v_eligible OR routable < p_diem_min THEN
      outcome := 'offer_short';
      IF NOT FOUND OR NOT v_eligible THEN routable := 0; END IF;
      RETURN NEXT;
      RETURN;
    END IF;
    granted_diem := LEAST(GREATEST(p_diem_want, p_diem_min), routable);
    UPDATE offers o SET reserved_micro_diem = o.reserved_micro_diem + granted_diem WHERE o.id = p_offer;
    INSERT INTO offer_escrows (offer_id, holder, amount_micro_diem) VALUES (p_offer, p_holder, granted_diem)
    ON CONFLICT (offer_id, holder)
    DO UPDATE SET amount_micro_diem = offer_escrows.amount_micro_diem + EXCLUDED.amount_micro_diem;
    routable := routable - granted_diem;
  END IF;
  outcome := 'ok';
  RETURN NEXT;
END $$;
