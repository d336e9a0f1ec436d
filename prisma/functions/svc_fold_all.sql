-- Folds every holder's unfolded clears (svc_fold_holder), holders in id order, each in this one
-- transaction: what a payout (or a refund) runs first, so the rows it reads and moves hold every
-- clear. Every holder's fold lock is taken first, in id order, before any balance: a fold of one
-- holder running meanwhile takes its lock and then balances, so taking the holders one by one between balances
-- could wait on it in a cycle. Returns the live offers it sold out.
CREATE OR REPLACE FUNCTION svc_fold_all()
RETURNS TABLE (offer_id uuid, account_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
  h uuid;
BEGIN
  PERFORM pg_advisory_xact_lock(svc_fold_key(e.id)) FROM escrow_holders e ORDER BY e.id;
  FOR h IN SELECT e.id FROM escrow_holders e ORDER BY e.id LOOP
    RETURN QUERY SELECT * FROM svc_fold_holder(h);
  END LOOP;
END $$;
