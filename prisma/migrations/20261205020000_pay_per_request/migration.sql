-- Issue 41 item 1: pay-per-request inference under /x402/v1, paid with x402 v2 `upto` (a Permit2
-- authorization of at most M; the service settles the request's exact charge C <= M). The request
-- is funded by its authorization, never by the account's prepaid balance (docs/decisions.md "Pay
-- per request (issue 41)"):
--
-- * `request_payments`: one row per authorization (unique by payer and Permit2 nonce: used once),
--   written after the facilitator verified it, before the request runs; the ending books the
--   charge against it (svc_end_items: status charged, C), the settle records what moved.
-- * the clear of a payment-funded request names its payment (`clears.payment_id`); its buyer line
--   is on book `payment_receivable` (what the authorization owes), not `buyer_confirmed`;
-- * the cash side is a journal of its own: `request_payment:<id>` (external -C, receivable +C)
--   when the settle moved C, or `payment_loss:<id>` (platform_loss -C, receivable +C) when it
--   cannot (refused after the content was delivered, or the authorization expired unused).
--
-- New enum values are not used in this migration (a value added in a transaction cannot be used
-- before it commits): the CHECK and the view compare and cast text.
ALTER TYPE "ledger_book" ADD VALUE IF NOT EXISTS 'payment_receivable';
ALTER TYPE "ledger_book" ADD VALUE IF NOT EXISTS 'platform_loss';
ALTER TYPE "ledger_transaction_kind" ADD VALUE IF NOT EXISTS 'request_payment';
ALTER TYPE "ledger_transaction_kind" ADD VALUE IF NOT EXISTS 'payment_loss';
ALTER TYPE "ledger_entry_kind" ADD VALUE IF NOT EXISTS 'request_payment';
ALTER TYPE "ledger_entry_kind" ADD VALUE IF NOT EXISTS 'payment_loss';

-- open: verified, the request runs; charged: its ending booked C; settling: the settle of C was
-- sent; settled: C moved (or C = 0: nothing to move); reconciling: the settle's outcome is unknown
-- (the chain decides); lost: C can never move (booked as a loss); void: the request ended without
-- a charge before anything was settled (nothing owed)
CREATE TYPE "request_payment_status" AS ENUM ('open', 'charged', 'settling', 'settled', 'reconciling', 'lost', 'void');

CREATE TABLE "request_payments" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "route" "inference_route" NOT NULL,
    "status" "request_payment_status" NOT NULL DEFAULT 'open',
    "payer_address" TEXT NOT NULL,
    "pay_to_address" TEXT NOT NULL,
    "asset_address" TEXT NOT NULL,
    "facilitator_address" TEXT NOT NULL,
    "permit2_nonce" TEXT NOT NULL,
    "max_micro_usdc" BIGINT NOT NULL,
    "deadline" TIMESTAMPTZ(3) NOT NULL,
    "charge_micro_usdc" BIGINT,
    "settled_micro_usdc" BIGINT,
    "lost_micro_usdc" BIGINT,
    "settlement_tx_hash" TEXT,
    "fingerprint" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "requirements" JSONB NOT NULL,
    "response" JSONB,
    "failure_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "charged_at" TIMESTAMPTZ(3),
    "settled_at" TIMESTAMPTZ(3),
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "request_payments_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "request_payments_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE,
    CONSTRAINT "request_payments_payer_format" CHECK ("payer_address" ~ '^0x[0-9a-f]{40}$'),
    CONSTRAINT "request_payments_nonce_format" CHECK ("permit2_nonce" ~ '^(0|[1-9][0-9]{0,77})$'),
    CONSTRAINT "request_payments_tx_format" CHECK ("settlement_tx_hash" IS NULL OR "settlement_tx_hash" ~ '^0x[0-9a-f]{64}$'),
    CONSTRAINT "request_payments_max_positive" CHECK ("max_micro_usdc" > 0),
    CONSTRAINT "request_payments_charge_range" CHECK ("charge_micro_usdc" IS NULL OR "charge_micro_usdc" BETWEEN 0 AND "max_micro_usdc"),
    CONSTRAINT "request_payments_settled_range" CHECK ("settled_micro_usdc" IS NULL OR "settled_micro_usdc" BETWEEN 0 AND "charge_micro_usdc"),
    CONSTRAINT "request_payments_lost_range" CHECK ("lost_micro_usdc" IS NULL OR "lost_micro_usdc" BETWEEN 0 AND "charge_micro_usdc"),
    CONSTRAINT "request_payments_charged_has_charge" CHECK ("status" IN ('open', 'void') OR "charge_micro_usdc" IS NOT NULL),
    CONSTRAINT "request_payments_settled_has_amount" CHECK ("status" <> 'settled' OR "settled_micro_usdc" IS NOT NULL),
    CONSTRAINT "request_payments_lost_has_amount" CHECK ("status" <> 'lost' OR "lost_micro_usdc" IS NOT NULL)
);
-- an authorization is used once: Permit2 nonces are the owner's
CREATE UNIQUE INDEX "request_payments_payer_nonce_key" ON "request_payments"("payer_address", "permit2_nonce");
CREATE UNIQUE INDEX "request_payments_settlement_tx_hash_key" ON "request_payments"("settlement_tx_hash");
CREATE INDEX "request_payments_account_created_idx" ON "request_payments"("account_id", "created_at");
-- what the reconciler reads: payments whose cash side is not booked yet
CREATE INDEX "request_payments_unfinished_idx" ON "request_payments"("created_at")
  WHERE "status" IN ('open', 'charged', 'settling', 'reconciling');

-- a journal of a payment's cash side names it
ALTER TABLE "ledger_transactions" ADD COLUMN "request_payment_id" UUID;
ALTER TABLE "ledger_transactions" ADD CONSTRAINT "ledger_transactions_request_payment_id_fkey"
  FOREIGN KEY ("request_payment_id") REFERENCES "request_payments"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
CREATE INDEX "ledger_transactions_request_payment_id_idx" ON "ledger_transactions"("request_payment_id");

-- the receivable is the payer's (account-bound); a loss is the platform's (no account)
ALTER TABLE "ledger_entries"
  DROP CONSTRAINT "ledger_entries_account_book",
  ADD CONSTRAINT "ledger_entries_account_book" CHECK (
    ("book"::text IN ('buyer_confirmed', 'buyer_pending', 'supplier_payable', 'supplier_held', 'payment_receivable') AND "account_id" IS NOT NULL)
    OR ("book"::text IN ('platform_fee', 'external', 'platform_loss') AND "account_id" IS NULL));

-- the clear of a payment-funded request: one per payment
ALTER TABLE "clears" ADD COLUMN "payment_id" UUID;
ALTER TABLE "clears" ADD CONSTRAINT "clears_payment_id_fkey"
  FOREIGN KEY ("payment_id") REFERENCES "request_payments"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
CREATE UNIQUE INDEX "clears_payment_id_key" ON "clears"("payment_id");

-- every request a payment paid for (fallback models: one charged at most), for history and support
ALTER TABLE "inference_requests" ADD COLUMN "payment_id" UUID;
ALTER TABLE "inference_requests" ADD CONSTRAINT "inference_requests_payment_id_fkey"
  FOREIGN KEY ("payment_id") REFERENCES "request_payments"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
CREATE INDEX "inference_requests_payment_id_idx" ON "inference_requests"("payment_id");

-- the ending's item names the payment that funds it (svc_end_items, prisma/functions)
ALTER TYPE "svc_end_item" ADD ATTRIBUTE "payment" UUID;

-- a payment-funded clear's buyer line is on the receivable its payment settles
CREATE OR REPLACE VIEW "ledger_lines" AS
SELECT e."id", e."transaction_id", t."kind" AS "transaction_kind", e."account_id", e."book", e."kind",
       e."amount_micro_usdc", e."created_at"
  FROM "ledger_entries" e
  JOIN "ledger_transactions" t ON t."id" = e."transaction_id"
UNION ALL
SELECT md5(c."id"::text || ':buyer')::uuid, c."id", 'clear'::"ledger_transaction_kind", c."buyer_account_id",
       (CASE WHEN c."payment_id" IS NULL THEN 'buyer_confirmed'::text ELSE 'payment_receivable'::text END)::"ledger_book",
       'buyer_debit'::"ledger_entry_kind", -c."gross_micro_usdc", c."created_at"
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

-- which payment funded a clear is part of what it says about money: append-only too
DROP TRIGGER "clears_append_only" ON "clears";
CREATE TRIGGER "clears_append_only" BEFORE UPDATE ON "clears" FOR EACH ROW
  WHEN (OLD."id" IS DISTINCT FROM NEW."id"
        OR OLD."buyer_account_id" IS DISTINCT FROM NEW."buyer_account_id"
        OR OLD."supplier_account_id" IS DISTINCT FROM NEW."supplier_account_id"
        OR OLD."gross_micro_usdc" IS DISTINCT FROM NEW."gross_micro_usdc"
        OR OLD."fee_micro_usdc" IS DISTINCT FROM NEW."fee_micro_usdc"
        OR OLD."supplier_micro_usdc" IS DISTINCT FROM NEW."supplier_micro_usdc"
        OR OLD."supplier_held" IS DISTINCT FROM NEW."supplier_held"
        OR OLD."payment_id" IS DISTINCT FROM NEW."payment_id"
        OR OLD."created_at" IS DISTINCT FROM NEW."created_at")
  EXECUTE FUNCTION "ledger_forbid_mutation"();
