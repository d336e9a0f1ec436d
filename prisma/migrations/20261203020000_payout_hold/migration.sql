-- Issue 38, a refund never pays twice: a video clear's supplier share is HELD until its job is
-- final (delivered or expired: then released to payable; refunded: the hold reversed), so no payout
-- pays a share its job may still refund. A refund of a share already paid out is recovered from the
-- supplier's later earnings: the payable balance may go negative and carries forward (the payout run
-- pays only a balance at or above the minimum), never borne by the platform.
--
-- New enum values are not used in this migration (a value added in a transaction cannot be used
-- before it commits): the CHECK and the view compare and cast text.
ALTER TYPE "ledger_book" ADD VALUE IF NOT EXISTS 'supplier_held';
ALTER TYPE "ledger_transaction_kind" ADD VALUE IF NOT EXISTS 'release';
ALTER TYPE "ledger_transaction_kind" ADD VALUE IF NOT EXISTS 'rehold';
ALTER TYPE "ledger_entry_kind" ADD VALUE IF NOT EXISTS 'release';
ALTER TYPE "ledger_entry_kind" ADD VALUE IF NOT EXISTS 'rehold';

-- the held balance mirrors book supplier_held; the payable balance may be negative (carried forward)
ALTER TABLE "accounts"
  ADD COLUMN "supplier_held_micro_usdc" BIGINT NOT NULL DEFAULT 0,
  ADD CONSTRAINT "accounts_held_nonneg" CHECK ("supplier_held_micro_usdc" >= 0),
  DROP CONSTRAINT "accounts_payable_nonneg";

ALTER TABLE "ledger_entries"
  DROP CONSTRAINT "ledger_entries_account_book",
  ADD CONSTRAINT "ledger_entries_account_book" CHECK (
    ("book"::text IN ('buyer_confirmed', 'buyer_pending', 'supplier_payable', 'supplier_held') AND "account_id" IS NOT NULL)
    OR ("book"::text IN ('platform_fee', 'external') AND "account_id" IS NULL));

-- whether the clear's share was credited on hold (a video job's, from now on); clears written
-- before credited their share to payable, and keep saying so
ALTER TABLE "clears" ADD COLUMN "supplier_held" BOOLEAN NOT NULL DEFAULT false;

-- the supplier's line of a clear is on the book its share was credited to
CREATE OR REPLACE VIEW "ledger_lines" AS
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
       (CASE WHEN c."supplier_held" THEN 'supplier_held'::text ELSE 'supplier_payable'::text END)::"ledger_book",
       'supplier_credit'::"ledger_entry_kind", c."supplier_micro_usdc", c."created_at"
  FROM "clears" c WHERE c."supplier_micro_usdc" > 0
UNION ALL
SELECT md5(c."id"::text || ':fee')::uuid, c."id", 'clear'::"ledger_transaction_kind", NULL::uuid,
       'platform_fee'::"ledger_book", 'platform_fee'::"ledger_entry_kind", c."fee_micro_usdc", c."created_at"
  FROM "clears" c WHERE c."fee_micro_usdc" > 0;

-- where the share was credited is part of what a clear says about money: append-only too
DROP TRIGGER "clears_append_only" ON "clears";
CREATE TRIGGER "clears_append_only" BEFORE UPDATE ON "clears" FOR EACH ROW
  WHEN (OLD."id" IS DISTINCT FROM NEW."id"
        OR OLD."buyer_account_id" IS DISTINCT FROM NEW."buyer_account_id"
        OR OLD."supplier_account_id" IS DISTINCT FROM NEW."supplier_account_id"
        OR OLD."gross_micro_usdc" IS DISTINCT FROM NEW."gross_micro_usdc"
        OR OLD."fee_micro_usdc" IS DISTINCT FROM NEW."fee_micro_usdc"
        OR OLD."supplier_micro_usdc" IS DISTINCT FROM NEW."supplier_micro_usdc"
        OR OLD."supplier_held" IS DISTINCT FROM NEW."supplier_held"
        OR OLD."created_at" IS DISTINCT FROM NEW."created_at")
  EXECUTE FUNCTION "ledger_forbid_mutation"();
