-- A live figure's part (see svc_unfolded.sql).
-- A buyer's unfolded charges, per holder: what each holder's slice of the balance counts as charged
-- by its unfolded clears (buyer_escrows.charged_micro_usdc: the append adds each charge, the fold
-- takes it out; svc_books_check holds it to the clears). Pay-per-request charges take nothing from a
-- balance. A primary-key range: no clear is read.
CREATE OR REPLACE FUNCTION svc_buyer_unfolded(p_account uuid)
RETURNS TABLE (holder uuid, gross bigint) LANGUAGE sql STABLE AS $$
  SELECT e.holder, e.charged_micro_usdc FROM buyer_escrows e
   WHERE e.account_id = p_account AND e.charged_micro_usdc > 0
$$;
