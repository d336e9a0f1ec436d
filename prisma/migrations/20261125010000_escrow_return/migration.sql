-- Escrow pressure (issue 18 finding 5 across processes): a router process gives back, at once, the
-- idle part of its slice of one buyer's balance when another process was refused for want of
-- balance this one holds. Lock order as everywhere: the account first. Returns false (nothing
-- moved) when the slice does not hold that much (the sweeper already released it).
CREATE FUNCTION svc_escrow_return(p_holder uuid, p_account uuid, p_amount bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  c integer;
BEGIN
  IF p_amount <= 0 THEN
    RETURN false;
  END IF;
  PERFORM 1 FROM accounts WHERE id = p_account FOR NO KEY UPDATE;
  UPDATE buyer_escrows SET amount_micro_usdc = amount_micro_usdc - p_amount
   WHERE account_id = p_account AND holder = p_holder AND amount_micro_usdc >= p_amount;
  GET DIAGNOSTICS c = ROW_COUNT;
  IF c = 0 THEN
    RETURN false;
  END IF;
  DELETE FROM buyer_escrows WHERE account_id = p_account AND holder = p_holder AND amount_micro_usdc = 0;
  UPDATE accounts SET reserved_micro_usdc = reserved_micro_usdc - p_amount
   WHERE id = p_account AND reserved_micro_usdc >= p_amount;
  GET DIAGNOSTICS c = ROW_COUNT;
  IF c = 0 THEN
    RAISE EXCEPTION 'escrow return: reserved is short' USING ERRCODE = 'P0001';
  END IF;
  RETURN true;
END $$;
