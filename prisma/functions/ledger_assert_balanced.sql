-- Double entry: the entries of one journal sum to zero, checked at commit (deferred), so a
-- transaction that writes an unbalanced journal cannot commit. The trigger that calls it,
-- ledger_entries_balanced (DEFERRABLE INITIALLY DEFERRED, AFTER INSERT OR UPDATE ON ledger_entries),
-- is schema: the initial migration creates it.
CREATE OR REPLACE FUNCTION "ledger_assert_balanced"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE total numeric;
BEGIN
  SELECT COALESCE(SUM("amount_micro_usdc"), 0) INTO total FROM "ledger_entries" WHERE "transaction_id" = NEW."transaction_id";
  IF total <> 0 THEN
    RAISE EXCEPTION 'unbalanced ledger transaction % (sum %)', NEW."transaction_id", total USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $$;
