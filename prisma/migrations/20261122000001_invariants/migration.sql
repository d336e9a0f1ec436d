-- Invariants Prisma's schema language cannot express (hand-written, see docs/decisions.md "Database invariants").

-- accounts
ALTER TABLE "accounts"
  ADD CONSTRAINT "accounts_wallet_format" CHECK ("wallet_address" ~ '^0x[0-9a-f]{40}$'),
  ADD CONSTRAINT "accounts_ceiling_range" CHECK ("max_price_cents_per_dollar" BETWEEN 30 AND 80),
  ADD CONSTRAINT "accounts_confirmed_nonneg" CHECK ("confirmed_micro_usdc" >= 0),
  ADD CONSTRAINT "accounts_pending_nonneg" CHECK ("pending_micro_usdc" >= 0),
  ADD CONSTRAINT "accounts_reserved_within_confirmed" CHECK ("reserved_micro_usdc" >= 0 AND "reserved_micro_usdc" <= "confirmed_micro_usdc"),
  ADD CONSTRAINT "accounts_payable_nonneg" CHECK ("supplier_payable_micro_usdc" >= 0),
  ADD CONSTRAINT "accounts_first_funded" CHECK (("has_ever_funded" AND "first_funded_at" IS NOT NULL) OR (NOT "has_ever_funded" AND "first_funded_at" IS NULL));

-- api keys
ALTER TABLE "api_keys"
  ADD CONSTRAINT "api_keys_name_length" CHECK (char_length("name") BETWEEN 1 AND 64),
  ADD CONSTRAINT "api_keys_revoked_at" CHECK (("status" = 'revoked') = ("revoked_at" IS NOT NULL));

-- upstream keys
ALTER TABLE "upstream_keys"
  ADD CONSTRAINT "upstream_keys_balance_nonneg" CHECK ("last_balance_micro_diem" IS NULL OR "last_balance_micro_diem" >= 0),
  ADD CONSTRAINT "upstream_keys_revoked_at" CHECK (("status" = 'revoked') = ("revoked_at" IS NOT NULL));
-- the same upstream secret cannot be registered twice while not revoked
CREATE UNIQUE INDEX "upstream_keys_one_live_secret" ON "upstream_keys" ("secret_fingerprint") WHERE "status" <> 'revoked';

-- offers
ALTER TABLE "offers"
  ADD CONSTRAINT "offers_price_range" CHECK ("price_cents_per_dollar" BETWEEN 1 AND 80),
  ADD CONSTRAINT "offers_quantity_pos" CHECK ("quantity_micro_diem" > 0),
  ADD CONSTRAINT "offers_remaining_range" CHECK ("remaining_micro_diem" >= 0 AND "remaining_micro_diem" <= "quantity_micro_diem"),
  ADD CONSTRAINT "offers_reserved_range" CHECK ("reserved_micro_diem" >= 0 AND "reserved_micro_diem" <= "remaining_micro_diem");
-- SPEC "Supplier offer": at most one live (active or paused) offer per registered upstream key
CREATE UNIQUE INDEX "offers_one_live_per_key" ON "offers" ("upstream_key_id") WHERE "status" IN ('active', 'paused');
-- the router's scan: active offers cheapest first
CREATE INDEX "offers_routable" ON "offers" ("price_cents_per_dollar", "created_at", "id") WHERE "status" = 'active';

-- payments
ALTER TABLE "payments"
  ADD CONSTRAINT "payments_amount_pos" CHECK ("amount_micro_usdc" > 0),
  ADD CONSTRAINT "payments_payer_format" CHECK ("payer_address" ~ '^0x[0-9a-f]{40}$'),
  ADD CONSTRAINT "payments_nonce_format" CHECK ("authorization_nonce" ~ '^0x[0-9a-f]{64}$'),
  ADD CONSTRAINT "payments_tx_format" CHECK ("settlement_tx_hash" IS NULL OR "settlement_tx_hash" ~ '^0x[0-9a-f]{64}$'),
  ADD CONSTRAINT "payments_confirmations_nonneg" CHECK ("confirmations" >= 0),
  ADD CONSTRAINT "payments_credited_has_account" CHECK ("status" NOT IN ('pending', 'confirmed') OR ("account_id" IS NOT NULL AND "settlement_tx_hash" IS NOT NULL));

-- books
ALTER TABLE "ledger_entries"
  ADD CONSTRAINT "ledger_entries_nonzero" CHECK ("amount_micro_usdc" <> 0),
  ADD CONSTRAINT "ledger_entries_account_book" CHECK (
    ("book" IN ('buyer_confirmed', 'buyer_pending', 'supplier_payable') AND "account_id" IS NOT NULL)
    OR ("book" IN ('platform_fee', 'external') AND "account_id" IS NULL));

-- Double entry: the entries of one journal sum to zero, checked at commit (deferred), so a
-- transaction that writes an unbalanced journal cannot commit.
CREATE FUNCTION "ledger_assert_balanced"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE total numeric;
BEGIN
  SELECT COALESCE(SUM("amount_micro_usdc"), 0) INTO total FROM "ledger_entries" WHERE "transaction_id" = NEW."transaction_id";
  IF total <> 0 THEN
    RAISE EXCEPTION 'unbalanced ledger transaction % (sum %)', NEW."transaction_id", total USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER "ledger_entries_balanced" AFTER INSERT OR UPDATE ON "ledger_entries"
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "ledger_assert_balanced"();
-- the ledger is append-only
CREATE FUNCTION "ledger_forbid_mutation"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger entries are append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER "ledger_entries_append_only" BEFORE UPDATE OR DELETE ON "ledger_entries"
  FOR EACH ROW EXECUTE FUNCTION "ledger_forbid_mutation"();

-- clears
ALTER TABLE "clears"
  ADD CONSTRAINT "clears_split" CHECK ("gross_micro_usdc" = "fee_micro_usdc" + "supplier_micro_usdc"),
  ADD CONSTRAINT "clears_nonneg" CHECK ("gross_micro_usdc" >= 0 AND "fee_micro_usdc" >= 0 AND "supplier_micro_usdc" >= 0 AND "burn_micro_diem" >= 0),
  ADD CONSTRAINT "clears_price_range" CHECK ("price_cents_per_dollar" BETWEEN 1 AND 80),
  ADD CONSTRAINT "clears_within_ceiling" CHECK ("price_cents_per_dollar" <= "ceiling_cents");

-- reservations
ALTER TABLE "reservations"
  ADD CONSTRAINT "reservations_nonneg" CHECK ("max_charge_micro_usdc" >= 0 AND "max_burn_micro_diem" >= 0);

-- video jobs
ALTER TABLE "video_jobs"
  ADD CONSTRAINT "video_jobs_amounts_nonneg" CHECK ("quote_micro_diem" >= 0 AND "charge_micro_usdc" >= 0);

-- payouts
ALTER TABLE "payouts"
  ADD CONSTRAINT "payouts_amount_pos" CHECK ("amount_micro_usdc" > 0),
  ADD CONSTRAINT "payouts_to_format" CHECK ("to_address" ~ '^0x[0-9a-f]{40}$');

-- inference
ALTER TABLE "inference_requests"
  ADD CONSTRAINT "inference_requests_amounts_nonneg" CHECK (("cost_micro_usdc" IS NULL OR "cost_micro_usdc" >= 0) AND ("burn_micro_diem" IS NULL OR "burn_micro_diem" >= 0));
