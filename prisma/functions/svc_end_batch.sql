-- A group commit: items are JSON objects with svc_end_item's fields (`EndItemRow`, src/domain/inference/settlement/end-item-row.ts).
CREATE OR REPLACE FUNCTION svc_end_batch(p_items jsonb)
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY
    SELECT * FROM svc_end_items(ARRAY(SELECT x FROM jsonb_populate_recordset(NULL::svc_end_item, p_items) x));
END $$;
