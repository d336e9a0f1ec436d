-- The ledger is append-only: refuses UPDATE and DELETE of ledger entries, and of what a clear says
-- about money (a clear is the transfer its ledger lines derive from). The triggers that call it are
-- schema: ledger_entries_append_only (BEFORE UPDATE OR DELETE ON ledger_entries, the initial
-- migration), clears_append_only and clears_no_delete (migration clear_transfers).
CREATE OR REPLACE FUNCTION "ledger_forbid_mutation"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the ledger is append-only (%)', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;
