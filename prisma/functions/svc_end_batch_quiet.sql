-- The group commit in one statement, for a batch nobody listens to (issue 32): when no active
-- webhook endpoint of the batch's buyers and suppliers (`p_accounts`) takes one of the events a
-- settlement may cause (`p_types`), the batch has no outbox rows to write and runs as one
-- autocommitted statement (one round trip instead of BEGIN, the batch, COMMIT). When one does, it
-- raises SQLSTATE SV001 before touching anything, and the caller runs the batch in a transaction
-- that writes the events with it (src/domain/inference/settlement/sql-stores.ts). Endpoints are read once, at
-- the start, as the transactional path reads them in its first statement.
CREATE OR REPLACE FUNCTION svc_end_batch_quiet(p_items jsonb, p_accounts uuid[], p_types text[])
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM webhook_endpoints e
              WHERE e.account_id = ANY(p_accounts) AND e.status = 'active' AND e.events && p_types) THEN
    RAISE EXCEPTION 'end: the batch has webhook subscribers' USING ERRCODE = 'SV001';
  END IF;
  RETURN QUERY
    SELECT * FROM svc_end_items(ARRAY(SELECT x FROM jsonb_populate_recordset(NULL::svc_end_item, p_items) x));
END $$;
