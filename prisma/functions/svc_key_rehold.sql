-- A request's key budget hold follows it to the holder it now runs under (docs/decisions.md "Key
-- budgets"): its process lost the holder the hold was taken under (the lease expired; a top-up
-- registered a new one) and the request carries on under the new one. The sweeper deletes a dead
-- holder's holds with it, so a hold left there would go while its request may still charge,
-- letting other requests spend what it holds. The hold still there: moved (its row lock orders this
-- against the sweeper's cascade). Gone already: held again through svc_key_reserve, with the
-- budgets' checks (exceeded: the request is refused before its next attempt). A new holder whose
-- lease is gone moves nothing, and svc_key_reserve answers holder_lost. (The move's foreign key
-- locks the new holder's row, as svc_key_reserve's FOR KEY SHARE does.)
-- Caller: src/domain/inference/escrow/key-budget.ts.
CREATE OR REPLACE FUNCTION svc_key_rehold(
  p_holder uuid, p_request uuid, p_api_key uuid, p_periods jsonb, p_amount bigint, p_now timestamptz)
RETURNS TABLE (outcome text, remaining bigint, lim bigint, reset text)
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE key_budget_holds h SET holder = p_holder
   WHERE h.request_id = p_request
     AND EXISTS (SELECT 1 FROM escrow_holders e WHERE e.id = p_holder AND e.expires_at > p_now);
  IF FOUND THEN
    outcome := 'ok';
    RETURN NEXT;
    RETURN;
  END IF;
  RETURN QUERY SELECT * FROM svc_key_reserve(p_holder, p_request, p_api_key, p_periods, p_amount, p_now);
END $$;
