-- A live figure's part (see svc_unfolded.sql).
-- Offers' unfolded burns (remaining and reserved are each this much lower, live): what the offers'
-- slices count as burned by their holders' unfolded clears (offer_escrows.charged_micro_diem; the
-- append adds each burn, the fold takes it out; svc_books_check holds it to the clears). p_offers
-- NULL: every offer with one. Reads the slices only, no clear.
CREATE OR REPLACE FUNCTION svc_offers_unfolded(p_offers uuid[])
RETURNS TABLE (offer uuid, burn bigint) LANGUAGE sql STABLE AS $$
  SELECT e.offer_id, sum(e.charged_micro_diem)::bigint FROM offer_escrows e
   WHERE (p_offers IS NULL OR e.offer_id = ANY(p_offers)) AND e.charged_micro_diem > 0
   GROUP BY e.offer_id
$$;
