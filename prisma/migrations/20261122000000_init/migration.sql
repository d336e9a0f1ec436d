-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateEnum
CREATE TYPE "auth_provider" AS ENUM ('idp', 'siwe', 'x402');

-- CreateEnum
CREATE TYPE "api_key_status" AS ENUM ('active', 'revoked');

-- CreateEnum
CREATE TYPE "api_key_source" AS ENUM ('session', 'agent', 'signup');

-- CreateEnum
CREATE TYPE "upstream_key_status" AS ENUM ('active', 'auth_failed', 'revoked');

-- CreateEnum
CREATE TYPE "offer_status" AS ENUM ('active', 'paused', 'depleted', 'expired', 'cancelled');

-- CreateEnum
CREATE TYPE "payment_kind" AS ENUM ('signup', 'top_up', 'refill', 'reconciled');

-- CreateEnum
CREATE TYPE "payment_status" AS ENUM ('settling', 'pending', 'confirmed', 'reconciling', 'failed');

-- CreateEnum
CREATE TYPE "ledger_transaction_kind" AS ENUM ('top_up', 'confirmation', 'reversal', 'clear', 'refund', 'payout', 'payout_reversal');

-- CreateEnum
CREATE TYPE "ledger_book" AS ENUM ('buyer_confirmed', 'buyer_pending', 'supplier_payable', 'platform_fee', 'external');

-- CreateEnum
CREATE TYPE "ledger_entry_kind" AS ENUM ('top_up', 'confirmation', 'reversal', 'buyer_debit', 'supplier_credit', 'platform_fee', 'refund', 'payout');

-- CreateEnum
CREATE TYPE "modality" AS ENUM ('text', 'image', 'video');

-- CreateEnum
CREATE TYPE "inference_route" AS ENUM ('chat', 'responses', 'image', 'images_openai', 'video_queue');

-- CreateEnum
CREATE TYPE "inference_status" AS ENUM ('in_progress', 'succeeded', 'incomplete', 'failed', 'settle_failed');

-- CreateEnum
CREATE TYPE "attempt_outcome" AS ENUM ('in_progress', 'succeeded', 'retryable_failure', 'supplier_exhausted', 'supplier_auth_failed', 'request_rejected', 'incomplete', 'aborted');

-- CreateEnum
CREATE TYPE "video_job_status" AS ENUM ('rendering', 'delivered', 'completed_no_media', 'failed', 'refunded', 'expired');

-- CreateEnum
CREATE TYPE "payout_status" AS ENUM ('pending', 'submitted', 'confirmed', 'failed');

-- CreateEnum
CREATE TYPE "catalog_status" AS ENUM ('live', 'coming_soon');

-- CreateEnum
CREATE TYPE "model_tier" AS ENUM ('frontier', 'small');

-- CreateTable
CREATE TABLE "accounts" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "wallet_address" TEXT NOT NULL,
    "auth_provider" "auth_provider" NOT NULL,
    "idp_subject" TEXT,
    "max_price_cents_per_dollar" INTEGER NOT NULL DEFAULT 80,
    "confirmed_micro_usdc" BIGINT NOT NULL DEFAULT 0,
    "pending_micro_usdc" BIGINT NOT NULL DEFAULT 0,
    "reserved_micro_usdc" BIGINT NOT NULL DEFAULT 0,
    "supplier_payable_micro_usdc" BIGINT NOT NULL DEFAULT 0,
    "has_ever_funded" BOOLEAN NOT NULL DEFAULT false,
    "first_funded_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "sessions" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "token_hash" TEXT NOT NULL,
    "auth_provider" "auth_provider" NOT NULL,
    "idp_login_surface" TEXT,
    "user_agent" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_seen_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "absolute_expires_at" TIMESTAMPTZ(3) NOT NULL,
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "sessions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "siwe_nonces" (
    "nonce" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "used_at" TIMESTAMPTZ(3),

    CONSTRAINT "siwe_nonces_pkey" PRIMARY KEY ("nonce")
);

-- CreateTable
CREATE TABLE "api_keys" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "key_prefix" TEXT NOT NULL,
    "key_hash" TEXT NOT NULL,
    "status" "api_key_status" NOT NULL DEFAULT 'active',
    "source" "api_key_source" NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_used_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "upstream_keys" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "label" TEXT NOT NULL,
    "secret_ciphertext" BYTEA NOT NULL,
    "secret_iv" BYTEA NOT NULL,
    "secret_tag" BYTEA NOT NULL,
    "encryption_key_id" TEXT NOT NULL,
    "secret_fingerprint" TEXT NOT NULL,
    "secret_last4" TEXT NOT NULL,
    "status" "upstream_key_status" NOT NULL DEFAULT 'active',
    "last_balance_micro_diem" BIGINT,
    "last_balance_at" TIMESTAMPTZ(3),
    "cooldown_until" TIMESTAMPTZ(3),
    "auth_failed_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "upstream_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "offers" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "upstream_key_id" UUID NOT NULL,
    "price_cents_per_dollar" INTEGER NOT NULL,
    "quantity_micro_diem" BIGINT NOT NULL,
    "remaining_micro_diem" BIGINT NOT NULL,
    "reserved_micro_diem" BIGINT NOT NULL DEFAULT 0,
    "status" "offer_status" NOT NULL DEFAULT 'active',
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "ended_at" TIMESTAMPTZ(3),

    CONSTRAINT "offers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "payments" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID,
    "kind" "payment_kind" NOT NULL,
    "status" "payment_status" NOT NULL,
    "payer_address" TEXT NOT NULL,
    "pay_to_address" TEXT NOT NULL,
    "asset_address" TEXT NOT NULL,
    "network" TEXT NOT NULL DEFAULT 'base',
    "amount_micro_usdc" BIGINT NOT NULL,
    "authorization_nonce" TEXT NOT NULL,
    "settlement_tx_hash" TEXT,
    "block_number" BIGINT,
    "log_index" INTEGER,
    "confirmations" INTEGER NOT NULL DEFAULT 0,
    "valid_before" TIMESTAMPTZ(3),
    "request_meta" JSONB,
    "api_key_id" UUID,
    "failure_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "settled_at" TIMESTAMPTZ(3),
    "confirmed_at" TIMESTAMPTZ(3),
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "payments_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "chain_cursors" (
    "name" TEXT NOT NULL,
    "last_block" BIGINT NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "chain_cursors_pkey" PRIMARY KEY ("name")
);

-- CreateTable
CREATE TABLE "ledger_transactions" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "kind" "ledger_transaction_kind" NOT NULL,
    "payment_id" UUID,
    "clear_id" UUID,
    "payout_id" UUID,
    "video_job_id" UUID,
    "idempotency_key" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ledger_transactions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ledger_entries" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "transaction_id" UUID NOT NULL,
    "account_id" UUID,
    "book" "ledger_book" NOT NULL,
    "kind" "ledger_entry_kind" NOT NULL,
    "amount_micro_usdc" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ledger_entries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "inference_requests" (
    "id" UUID NOT NULL,
    "support_reference" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "api_key_id" UUID,
    "route" "inference_route" NOT NULL,
    "modality" "modality" NOT NULL,
    "model" TEXT NOT NULL,
    "stream" BOOLEAN NOT NULL DEFAULT false,
    "status" "inference_status" NOT NULL DEFAULT 'in_progress',
    "error_code" TEXT,
    "max_price_cents" INTEGER NOT NULL,
    "clearing_price_cents" INTEGER,
    "admitted_max_tokens" INTEGER,
    "prompt_tokens" INTEGER,
    "completion_tokens" INTEGER,
    "cached_tokens" INTEGER,
    "burn_micro_diem" BIGINT,
    "cost_micro_usdc" BIGINT,
    "attempt_count" INTEGER NOT NULL DEFAULT 0,
    "started_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "first_byte_at" TIMESTAMPTZ(3),
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "inference_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "inference_attempts" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "request_id" UUID NOT NULL,
    "ordinal" INTEGER NOT NULL,
    "upstream_key_id" UUID NOT NULL,
    "offer_id" UUID NOT NULL,
    "price_cents" INTEGER NOT NULL,
    "outcome" "attempt_outcome" NOT NULL DEFAULT 'in_progress',
    "upstream_status" INTEGER,
    "error_kind" TEXT,
    "started_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "ended_at" TIMESTAMPTZ(3),

    CONSTRAINT "inference_attempts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "clears" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "request_id" UUID NOT NULL,
    "buyer_account_id" UUID NOT NULL,
    "supplier_account_id" UUID NOT NULL,
    "offer_id" UUID NOT NULL,
    "upstream_key_id" UUID NOT NULL,
    "model" TEXT NOT NULL,
    "modality" "modality" NOT NULL,
    "price_cents_per_dollar" INTEGER NOT NULL,
    "ceiling_cents" INTEGER NOT NULL,
    "burn_micro_diem" BIGINT NOT NULL,
    "gross_micro_usdc" BIGINT NOT NULL,
    "fee_micro_usdc" BIGINT NOT NULL,
    "supplier_micro_usdc" BIGINT NOT NULL,
    "refunded_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "clears_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "reservations" (
    "id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "max_charge_micro_usdc" BIGINT NOT NULL,
    "offer_id" UUID,
    "max_burn_micro_diem" BIGINT NOT NULL DEFAULT 0,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "reservations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "video_jobs" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "request_id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "upstream_key_id" UUID NOT NULL,
    "model" TEXT NOT NULL,
    "queue_id" TEXT NOT NULL,
    "upstream_queue_id" TEXT NOT NULL,
    "status" "video_job_status" NOT NULL DEFAULT 'rendering',
    "upstream_status" TEXT,
    "quote_micro_diem" BIGINT NOT NULL,
    "charge_micro_usdc" BIGINT NOT NULL,
    "poll_count" INTEGER NOT NULL DEFAULT 0,
    "request_body" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_polled_at" TIMESTAMPTZ(3),
    "delivered_at" TIMESTAMPTZ(3),
    "refund_due_at" TIMESTAMPTZ(3),
    "refunded_at" TIMESTAMPTZ(3),
    "media_deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "video_jobs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "payouts" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "period" TEXT NOT NULL,
    "to_address" TEXT NOT NULL,
    "amount_micro_usdc" BIGINT NOT NULL,
    "status" "payout_status" NOT NULL DEFAULT 'pending',
    "tx_hash" TEXT,
    "failure_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "submitted_at" TIMESTAMPTZ(3),
    "confirmed_at" TIMESTAMPTZ(3),

    CONSTRAINT "payouts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "catalog_models" (
    "id" TEXT NOT NULL,
    "modality" "modality" NOT NULL,
    "status" "catalog_status" NOT NULL,
    "name" TEXT NOT NULL,
    "tier" "model_tier" NOT NULL DEFAULT 'frontier',
    "disabled" BOOLEAN NOT NULL DEFAULT false,
    "listed" BOOLEAN NOT NULL DEFAULT true,
    "offline" BOOLEAN NOT NULL DEFAULT false,
    "beta" BOOLEAN NOT NULL DEFAULT false,
    "capabilities" JSONB NOT NULL DEFAULT '{}',
    "pricing" JSONB,
    "constraints" JSONB,
    "input_micro_per_m" BIGINT,
    "output_micro_per_m" BIGINT,
    "cache_micro_per_m" BIGINT,
    "extended_pricing" JSONB,
    "context_tokens" INTEGER,
    "max_completion_tokens" INTEGER,
    "upstream_row" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "synced_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "catalog_models_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "usage_rollups" (
    "day" DATE NOT NULL,
    "model" TEXT NOT NULL,
    "modality" "modality" NOT NULL,
    "clears" INTEGER NOT NULL DEFAULT 0,
    "prompt_tokens" BIGINT NOT NULL DEFAULT 0,
    "completion_tokens" BIGINT NOT NULL DEFAULT 0,
    "burn_micro_diem" BIGINT NOT NULL DEFAULT 0,
    "gross_micro_usdc" BIGINT NOT NULL DEFAULT 0,
    "face_micro_usdc" BIGINT NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "usage_rollups_pkey" PRIMARY KEY ("day","model")
);

-- CreateTable
CREATE TABLE "scheduled_runs" (
    "name" TEXT NOT NULL,
    "period" TEXT NOT NULL,
    "started_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "done_at" TIMESTAMPTZ(3),
    "result" JSONB,

    CONSTRAINT "scheduled_runs_pkey" PRIMARY KEY ("name","period")
);

-- CreateIndex
CREATE UNIQUE INDEX "accounts_wallet_address_key" ON "accounts"("wallet_address");

-- CreateIndex
CREATE INDEX "accounts_idp_subject_idx" ON "accounts"("idp_subject");

-- CreateIndex
CREATE UNIQUE INDEX "sessions_token_hash_key" ON "sessions"("token_hash");

-- CreateIndex
CREATE INDEX "sessions_account_id_idx" ON "sessions"("account_id");

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_key_hash_key" ON "api_keys"("key_hash");

-- CreateIndex
CREATE INDEX "api_keys_account_id_status_idx" ON "api_keys"("account_id", "status");

-- CreateIndex
CREATE INDEX "upstream_keys_account_id_idx" ON "upstream_keys"("account_id");

-- CreateIndex
CREATE INDEX "upstream_keys_status_idx" ON "upstream_keys"("status");

-- CreateIndex
CREATE INDEX "offers_status_price_cents_per_dollar_idx" ON "offers"("status", "price_cents_per_dollar");

-- CreateIndex
CREATE INDEX "offers_account_id_idx" ON "offers"("account_id");

-- CreateIndex
CREATE INDEX "offers_upstream_key_id_idx" ON "offers"("upstream_key_id");

-- CreateIndex
CREATE UNIQUE INDEX "payments_authorization_nonce_key" ON "payments"("authorization_nonce");

-- CreateIndex
CREATE UNIQUE INDEX "payments_settlement_tx_hash_key" ON "payments"("settlement_tx_hash");

-- CreateIndex
CREATE INDEX "payments_status_idx" ON "payments"("status");

-- CreateIndex
CREATE INDEX "payments_account_id_created_at_idx" ON "payments"("account_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "ledger_transactions_idempotency_key_key" ON "ledger_transactions"("idempotency_key");

-- CreateIndex
CREATE INDEX "ledger_transactions_payment_id_idx" ON "ledger_transactions"("payment_id");

-- CreateIndex
CREATE INDEX "ledger_transactions_clear_id_idx" ON "ledger_transactions"("clear_id");

-- CreateIndex
CREATE INDEX "ledger_entries_transaction_id_idx" ON "ledger_entries"("transaction_id");

-- CreateIndex
CREATE INDEX "ledger_entries_account_id_created_at_idx" ON "ledger_entries"("account_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "inference_requests_support_reference_key" ON "inference_requests"("support_reference");

-- CreateIndex
CREATE INDEX "inference_requests_account_id_started_at_idx" ON "inference_requests"("account_id", "started_at" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "inference_attempts_request_id_ordinal_key" ON "inference_attempts"("request_id", "ordinal");

-- CreateIndex
CREATE UNIQUE INDEX "clears_request_id_key" ON "clears"("request_id");

-- CreateIndex
CREATE INDEX "clears_created_at_idx" ON "clears"("created_at");

-- CreateIndex
CREATE INDEX "clears_supplier_account_id_created_at_idx" ON "clears"("supplier_account_id", "created_at");

-- CreateIndex
CREATE INDEX "clears_buyer_account_id_created_at_idx" ON "clears"("buyer_account_id", "created_at");

-- CreateIndex
CREATE INDEX "reservations_expires_at_idx" ON "reservations"("expires_at");

-- CreateIndex
CREATE UNIQUE INDEX "video_jobs_request_id_key" ON "video_jobs"("request_id");

-- CreateIndex
CREATE UNIQUE INDEX "video_jobs_queue_id_key" ON "video_jobs"("queue_id");

-- CreateIndex
CREATE INDEX "video_jobs_status_refund_due_at_idx" ON "video_jobs"("status", "refund_due_at");

-- CreateIndex
CREATE INDEX "video_jobs_account_id_created_at_idx" ON "video_jobs"("account_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "payouts_tx_hash_key" ON "payouts"("tx_hash");

-- CreateIndex
CREATE UNIQUE INDEX "payouts_account_id_period_key" ON "payouts"("account_id", "period");

-- CreateIndex
CREATE INDEX "catalog_models_modality_status_idx" ON "catalog_models"("modality", "status");

-- AddForeignKey
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "upstream_keys" ADD CONSTRAINT "upstream_keys_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "offers" ADD CONSTRAINT "offers_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "offers" ADD CONSTRAINT "offers_upstream_key_id_fkey" FOREIGN KEY ("upstream_key_id") REFERENCES "upstream_keys"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payments" ADD CONSTRAINT "payments_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payments" ADD CONSTRAINT "payments_api_key_id_fkey" FOREIGN KEY ("api_key_id") REFERENCES "api_keys"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ledger_transactions" ADD CONSTRAINT "ledger_transactions_payment_id_fkey" FOREIGN KEY ("payment_id") REFERENCES "payments"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ledger_transactions" ADD CONSTRAINT "ledger_transactions_clear_id_fkey" FOREIGN KEY ("clear_id") REFERENCES "clears"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ledger_transactions" ADD CONSTRAINT "ledger_transactions_payout_id_fkey" FOREIGN KEY ("payout_id") REFERENCES "payouts"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_entries_transaction_id_fkey" FOREIGN KEY ("transaction_id") REFERENCES "ledger_transactions"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_entries_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "inference_requests" ADD CONSTRAINT "inference_requests_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "inference_requests" ADD CONSTRAINT "inference_requests_api_key_id_fkey" FOREIGN KEY ("api_key_id") REFERENCES "api_keys"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "inference_attempts" ADD CONSTRAINT "inference_attempts_request_id_fkey" FOREIGN KEY ("request_id") REFERENCES "inference_requests"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "inference_attempts" ADD CONSTRAINT "inference_attempts_upstream_key_id_fkey" FOREIGN KEY ("upstream_key_id") REFERENCES "upstream_keys"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "inference_attempts" ADD CONSTRAINT "inference_attempts_offer_id_fkey" FOREIGN KEY ("offer_id") REFERENCES "offers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "clears" ADD CONSTRAINT "clears_request_id_fkey" FOREIGN KEY ("request_id") REFERENCES "inference_requests"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "clears" ADD CONSTRAINT "clears_buyer_account_id_fkey" FOREIGN KEY ("buyer_account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "clears" ADD CONSTRAINT "clears_supplier_account_id_fkey" FOREIGN KEY ("supplier_account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "clears" ADD CONSTRAINT "clears_offer_id_fkey" FOREIGN KEY ("offer_id") REFERENCES "offers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "clears" ADD CONSTRAINT "clears_upstream_key_id_fkey" FOREIGN KEY ("upstream_key_id") REFERENCES "upstream_keys"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reservations" ADD CONSTRAINT "reservations_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reservations" ADD CONSTRAINT "reservations_offer_id_fkey" FOREIGN KEY ("offer_id") REFERENCES "offers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "video_jobs" ADD CONSTRAINT "video_jobs_request_id_fkey" FOREIGN KEY ("request_id") REFERENCES "inference_requests"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "video_jobs" ADD CONSTRAINT "video_jobs_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "video_jobs" ADD CONSTRAINT "video_jobs_upstream_key_id_fkey" FOREIGN KEY ("upstream_key_id") REFERENCES "upstream_keys"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payouts" ADD CONSTRAINT "payouts_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

