-- A live figure's part (see svc_unfolded.sql).
-- Supplier keys' unfolded burns (the last known balance is this much lower, live, not below 0).
-- p_keys NULL: every key with one.
CREATE OR REPLACE FUNCTION svc_upstream_keys_unfolded(p_keys uuid[])
RETURNS TABLE (upstream_key uuid, burn bigint) LANGUAGE sql STABLE AS $$
  SELECT u.upstream_key_id, sum(u.burn_micro_diem)::bigint FROM svc_unfolded() u
   WHERE p_keys IS NULL OR u.upstream_key_id = ANY(p_keys) GROUP BY u.upstream_key_id
$$;
