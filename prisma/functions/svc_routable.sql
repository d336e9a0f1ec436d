-- What could be cleared on an offer right now: min(remaining, the key's last known balance) minus
-- what is reserved, never below zero. A key whose balance is unknown (NULL: the upstream did not
-- report one) routes nothing until a balance sync reads one (issue 18 finding 8).
-- Every reader (the offer book, capacity, the ladder, svc_escrow_take) goes through this function.
CREATE OR REPLACE FUNCTION svc_routable(o offers, k upstream_keys) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT GREATEST(LEAST(o.remaining_micro_diem, COALESCE(k.last_balance_micro_diem, 0)) - o.reserved_micro_diem, 0)
$$;
