-- The ledger is append-only: refuses UPDATE and DELETE of ledger entries, and of what a clear says
-- about money (a clear is the transfer its ledger lines derive from). The triggers that call it are
-- schema: ledger_entries_append_only (BEFORE UPDATE OR DELETE ON ledger_entries, the initial
-- migration), clears_append_only and clears_no_delete (migration clear_transfers), and those of the
-- closings that stand for retained months (migration monthly_partitions).
-- A partitioned table's trigger fires on the partition: the message names the table it belongs to.
CREATE OR REPLACE FUNCTION "ledger_forbid_mutation"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the ledger is append-only (%)',
    COALESCE((SELECT c.relname FROM pg_class c WHERE c.oid = pg_partition_root(TG_RELID)), TG_TABLE_NAME)
    USING ERRCODE = 'insufficient_privilege';
END $$;
