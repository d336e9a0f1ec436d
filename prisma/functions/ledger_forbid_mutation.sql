-- The ledger is append-only: refuses UPDATE and DELETE of ledger entries. The trigger that calls
-- it, ledger_entries_append_only (BEFORE UPDATE OR DELETE ON ledger_entries), is schema: the initial
-- migration creates it.
CREATE OR REPLACE FUNCTION "ledger_forbid_mutation"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger entries are append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
