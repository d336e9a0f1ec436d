-- The live figures (docs/decisions.md "One append per clear"). A request's ending appends its clear
-- (svc_end_items) and moves no hot row; the escrow holder's fold (svc_fold_holder) moves them later.
-- A clear between the two is unfolded: in the books already (ledger_lines derives from the clears),
-- not yet in the hot rows. Every reader of a hot-row figure reads it through these functions, the one
-- place the rule lives:
--   a buyer's confirmed and reserved balance    the row's, less its unfolded gross (per holder too):
--                                                its slices count it (svc_buyer_unfolded)
--   a supplier's payable and held               the row's, plus its unfolded shares
--   an offer's remaining and reserved           the row's, less its unfolded burn: its slices count it
--                                                (svc_offers_unfolded)
--   a supplier key's last known balance          the row's, less its unfolded burn (not below 0)
--   an API key's spend of a day                  api_key_spend, plus its unfolded gross of that day
-- What is routable or available (remaining − reserved, confirmed − reserved) is the same either way:
-- the fold lowers both sides by the same amount.
--
-- Every unfolded clear: a holder's clears above its folded_seq. A holder's unfolded clear is never a
-- day older than its folded_through (svc_end_items refuses one that would be), so each holder's
-- lookup reads the newest months' partitions only.
CREATE OR REPLACE FUNCTION svc_unfolded()
RETURNS SETOF clears LANGUAGE sql STABLE AS $$
  SELECT c.*
    FROM escrow_holders h
   CROSS JOIN LATERAL svc_holder_clears(h.id, h.folded_seq, 9223372036854775807,
                                        h.folded_through - interval '1 day') c
$$;
