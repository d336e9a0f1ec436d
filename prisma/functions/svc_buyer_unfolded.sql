-- A live figure's part (see svc_unfolded.sql).
-- A buyer's unfolded charges, per holder (what each holder's slice of the balance has spent and not
-- yet given up: the slice in buyer_escrows still counts them). Pay-per-request charges take nothing
-- from a balance.
CREATE OR REPLACE FUNCTION svc_buyer_unfolded(p_account uuid)
RETURNS TABLE (holder uuid, gross bigint) LANGUAGE sql STABLE AS $$
  SELECT u.holder, sum(u.gross_micro_usdc)::bigint
    FROM svc_unfolded() u
   WHERE u.buyer_account_id = p_account AND u.payment_id IS NULL
   GROUP BY u.holder
$$;
