-- A holder's clears appended in a range of its seq (above p_from, up to p_to) and created at or
-- after p_after: the one statement of "which clears a fold applies" (svc_fold_holder) and "which
-- clears are unfolded" (svc_unfolded). The index clears_holder_seq_idx answers it; the time bound
-- lets each monthly partition outside it be skipped. Inlined into its callers (one SQL statement).
CREATE OR REPLACE FUNCTION svc_holder_clears(p_holder uuid, p_from bigint, p_to bigint, p_after timestamptz)
RETURNS SETOF clears LANGUAGE sql STABLE AS $$
  SELECT * FROM clears x
   WHERE x.holder = p_holder AND x.seq > p_from AND x.seq <= p_to AND x.created_at >= p_after
$$;
