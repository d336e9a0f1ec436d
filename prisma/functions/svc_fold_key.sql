-- The advisory lock key of an escrow holder's fold (docs/decisions.md "One append per clear"): an
-- append holds it shared for each holder it charges against (svc_end_items), a fold alone
-- (svc_fold_holder), so no fold of a holder runs while an append of it is in flight, and an append
-- after a fold sees what it folded. An advisory lock writes no row and no WAL, where a row lock on
-- the holder would write its tuple on every append. Two holders sharing a key only wait for each
-- other.
CREATE OR REPLACE FUNCTION svc_fold_key(p_holder uuid) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT hashtextextended(p_holder::text, 43)
$$;
