-- A live figure's part (see svc_unfolded.sql).
-- Offers' unfolded burns (remaining and reserved are each this much lower, live).
CREATE OR REPLACE FUNCTION svc_offers_unfolded(p_offers uuid[])
RETURNS TABLE (offer uuid, burn bigint) LANGUAGE sql STABLE AS $$
  SELECT u.offer_id, sum(u.burn_micro_diem)::bigint FROM svc_unfolded() u
   WHERE u.offer_id = ANY(p_offers) GROUP BY u.offer_id
$$;
