-- Key scopes and the key tree (issue 38; docs/decisions.md "Key scopes and the key tree").
-- `scopes`: what a key may do — `inference` (model routes, its own key and history), `keys` (mint,
-- list, change, revoke keys), `account` (ceiling, webhooks, refill, account-wide reads).
-- `parent_id`: the key that minted it when it is bounded by its minter (a key minted by a key with
-- a policy, or narrower than its minter); NULL for account-level keys (signup, session-minted, and
-- unrestricted keys minted by an account-level key: the spec's rotation).
-- `ancestor_ids`: parent first's root … parent (root first), so a key's subtree is one GIN lookup and
-- its ancestors' budgets are read without recursion.
ALTER TABLE "api_keys"
  ADD COLUMN "scopes" TEXT[] NOT NULL DEFAULT ARRAY['inference', 'keys', 'account']::TEXT[],
  ADD COLUMN "parent_id" UUID REFERENCES "api_keys"("id") ON DELETE CASCADE,
  ADD COLUMN "ancestor_ids" UUID[] NOT NULL DEFAULT '{}',
  ADD CONSTRAINT "api_keys_scopes_known" CHECK (
    cardinality("scopes") BETWEEN 1 AND 3
    AND "scopes" <@ ARRAY['inference', 'keys', 'account']::TEXT[]),
  ADD CONSTRAINT "api_keys_tree" CHECK (
    ("parent_id" IS NULL AND cardinality("ancestor_ids") = 0)
    OR ("parent_id" IS NOT NULL AND "ancestor_ids"[cardinality("ancestor_ids")] = "parent_id"));

CREATE INDEX "api_keys_ancestor_ids_idx" ON "api_keys" USING GIN ("ancestor_ids");

-- Keys minted with a policy before scopes existed could lift their own budget: they keep inference
-- only (their owner can mint a wider key from a session). Keys without a policy keep every scope.
UPDATE "api_keys" SET "scopes" = ARRAY['inference']::TEXT[]
 WHERE "limit_micro_usdc" IS NOT NULL OR "max_price_cents_per_dollar" IS NOT NULL
    OR cardinality("models") > 0 OR "expires_at" IS NOT NULL;
