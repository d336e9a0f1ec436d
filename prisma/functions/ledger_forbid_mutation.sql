-- The ledger is append-only: refuses UPDATE and DELETE of ledger entries, and of what a clear says
-- about money (a clear is the transfer its ledger lines derive from). The triggers that call it are
-- schema: ledger_entries_append_only (BEFORE UPDATE OR DELETE ON ledger_entries, the initial
-- migration), clears_append_only and clears_no_delete (migration clear_transfers), those of the
-- closings that stand for retained months (migration monthly_partitions), and the DELETE triggers of
-- the parties the books name without a foreign key: accounts, api_keys, offers and upstream_keys
-- (migration append_names_without_locks; an account is closed, a key revoked, an offer cancelled).
-- A partitioned table's trigger fires on the partition: the message names the table it belongs to.
CREATE OR REPLACE FUNCTION "ledger_forbid_mutation"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME IN ('accounts', 'api_keys', 'offers', 'upstream_keys') THEN
    RAISE EXCEPTION 'the ledger names its % rows: they are closed, revoked or cancelled, never deleted', TG_TABLE_NAME
      USING ERRCODE = 'restrict_violation';
  END IF;
  RAISE EXCEPTION 'the ledger is append-only (%)',
    COALESCE((SELECT c.relname FROM pg_class c WHERE c.oid = pg_partition_root(TG_RELID)), TG_TABLE_NAME)
    USING ERRCODE = 'insufficient_privilege';
END $$;
