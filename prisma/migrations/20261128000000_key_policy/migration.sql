-- Per-key policy (issue 28; docs/decisions.md "Per-key policy"): a spending limit per period, the
-- period (UTC day, ISO week from Monday, calendar month, or never), the key's own price ceiling,
-- the models it may call and an expiry. NULL means "no such limit"; the signup key has none.
-- `models` empty means every model (not NULL: Prisma reads a NULL list as [] and cannot write NULL).
CREATE TYPE "api_key_limit_reset" AS ENUM ('daily', 'weekly', 'monthly', 'never');

ALTER TABLE "api_keys"
  ADD COLUMN "limit_micro_usdc" BIGINT,
  ADD COLUMN "limit_reset" "api_key_limit_reset" NOT NULL DEFAULT 'never',
  ADD COLUMN "max_price_cents_per_dollar" INTEGER,
  ADD COLUMN "models" TEXT[] NOT NULL DEFAULT '{}',
  ADD COLUMN "expires_at" TIMESTAMPTZ(3),
  ADD CONSTRAINT "api_keys_limit_positive" CHECK ("limit_micro_usdc" IS NULL OR "limit_micro_usdc" > 0),
  ADD CONSTRAINT "api_keys_ceiling_range" CHECK ("max_price_cents_per_dollar" IS NULL OR "max_price_cents_per_dollar" BETWEEN 30 AND 80),
  ADD CONSTRAINT "api_keys_models_listed" CHECK (cardinality("models") <= 100 AND array_position("models", NULL) IS NULL);

-- What a key spent in a period is summed from its requests by start time (key listings, and the
-- per-key budgets built on them); the buyer history filters by key too.
CREATE INDEX "inference_requests_api_key_id_started_at_idx" ON "inference_requests"("api_key_id", "started_at");
