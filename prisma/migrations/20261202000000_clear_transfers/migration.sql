-- Issue 32, a cheaper ending: a clear is a transfer record (TigerBeetle's transfer, Stripe's
-- ledger transaction), and its three double-entry lines derive from it instead of being written
-- as a journal and three entries each (four inserts, two indexes each, a foreign-key check per row
-- and a deferred balance trigger per entry). The clear carries everything a line says: the buyer's
-- debit (gross), the supplier's credit (supplier share) and the platform's fee, with
-- `clears_split` (gross = fee + share) and `clears_nonneg` making every clear a balanced journal
-- by construction. `ledger_lines` is the one ledger readers read: the written entries (funding,
-- refunds, payouts and their reversals) and the lines each clear implies.
--
-- A derived line's id is fixed by its clear and leg (md5 of "<clear id>:<leg>" as a uuid), its
-- transaction id is the clear's id, its transaction kind 'clear' and its time the clear's.

CREATE VIEW "ledger_lines" AS
SELECT e."id", e."transaction_id", t."kind" AS "transaction_kind", e."account_id", e."book", e."kind",
       e."amount_micro_usdc", e."created_at"
  FROM "ledger_entries" e
  JOIN "ledger_transactions" t ON t."id" = e."transaction_id"
UNION ALL
SELECT md5(c."id"::text || ':buyer')::uuid, c."id", 'clear'::"ledger_transaction_kind", c."buyer_account_id",
       'buyer_confirmed'::"ledger_book", 'buyer_debit'::"ledger_entry_kind", -c."gross_micro_usdc", c."created_at"
  FROM "clears" c WHERE c."gross_micro_usdc" > 0
UNION ALL
SELECT md5(c."id"::text || ':supplier')::uuid, c."id", 'clear'::"ledger_transaction_kind", c."supplier_account_id",
       'supplier_payable'::"ledger_book", 'supplier_credit'::"ledger_entry_kind", c."supplier_micro_usdc", c."created_at"
  FROM "clears" c WHERE c."supplier_micro_usdc" > 0
UNION ALL
SELECT md5(c."id"::text || ':fee')::uuid, c."id", 'clear'::"ledger_transaction_kind", NULL::uuid,
       'platform_fee'::"ledger_book", 'platform_fee'::"ledger_entry_kind", c."fee_micro_usdc", c."created_at"
  FROM "clears" c WHERE c."fee_micro_usdc" > 0;

-- Existing clears' journals are carried over: each must say exactly what its clear implies (same
-- lines, amounts, accounts and books), else the migration stops; then they go, and the clear's
-- derived lines take their place. A clear with a charge and no journal, or a journal with no
-- clear, stops it too.
DO $$
DECLARE bad integer;
BEGIN
  SELECT count(*) INTO bad FROM (
    (SELECT t."clear_id", e."account_id", e."book", e."kind", e."amount_micro_usdc", e."created_at"
       FROM "ledger_transactions" t JOIN "ledger_entries" e ON e."transaction_id" = t."id"
      WHERE t."kind" = 'clear'
     EXCEPT ALL
     SELECT l."transaction_id", l."account_id", l."book", l."kind", l."amount_micro_usdc", l."created_at"
       FROM "ledger_lines" l WHERE l."transaction_kind" = 'clear' AND l."id" NOT IN (SELECT "id" FROM "ledger_entries"))
    UNION ALL
    (SELECT l."transaction_id", l."account_id", l."book", l."kind", l."amount_micro_usdc", l."created_at"
       FROM "ledger_lines" l WHERE l."transaction_kind" = 'clear' AND l."id" NOT IN (SELECT "id" FROM "ledger_entries")
     EXCEPT ALL
     SELECT t."clear_id", e."account_id", e."book", e."kind", e."amount_micro_usdc", e."created_at"
       FROM "ledger_transactions" t JOIN "ledger_entries" e ON e."transaction_id" = t."id"
      WHERE t."kind" = 'clear')
  ) d;
  IF bad <> 0 THEN
    RAISE EXCEPTION 'clear_transfers: % ledger lines of clears differ from what their clears imply', bad;
  END IF;
END $$;

ALTER TABLE "ledger_entries" DISABLE TRIGGER "ledger_entries_append_only";
DELETE FROM "ledger_entries" e USING "ledger_transactions" t WHERE t."id" = e."transaction_id" AND t."kind" = 'clear';
ALTER TABLE "ledger_entries" ENABLE TRIGGER "ledger_entries_append_only";
DELETE FROM "ledger_transactions" WHERE "kind" = 'clear';

-- A clear is now a ledger record: append-only in what it says about money. Only `refunded_at` may
-- change (a refund is its own journal, written beside it); a clear is never deleted.
CREATE TRIGGER "clears_append_only" BEFORE UPDATE ON "clears" FOR EACH ROW
  WHEN (OLD."id" IS DISTINCT FROM NEW."id"
        OR OLD."buyer_account_id" IS DISTINCT FROM NEW."buyer_account_id"
        OR OLD."supplier_account_id" IS DISTINCT FROM NEW."supplier_account_id"
        OR OLD."gross_micro_usdc" IS DISTINCT FROM NEW."gross_micro_usdc"
        OR OLD."fee_micro_usdc" IS DISTINCT FROM NEW."fee_micro_usdc"
        OR OLD."supplier_micro_usdc" IS DISTINCT FROM NEW."supplier_micro_usdc"
        OR OLD."created_at" IS DISTINCT FROM NEW."created_at")
  EXECUTE FUNCTION "ledger_forbid_mutation"();
CREATE TRIGGER "clears_no_delete" BEFORE DELETE ON "clears" FOR EACH ROW EXECUTE FUNCTION "ledger_forbid_mutation"();

-- No more clear journals: a journal of kind 'clear' can no longer be written.
ALTER TABLE "ledger_transactions" ADD CONSTRAINT "ledger_transactions_no_clear_journal" CHECK ("kind" <> 'clear');

-- The ending's item loses its journal id (svc_end_items, prisma/functions, writes no journal).
ALTER TYPE "svc_end_item" DROP ATTRIBUTE "journal";
