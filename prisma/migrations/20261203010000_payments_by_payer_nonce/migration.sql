-- Issue 38 item 5: EIP-3009 nonces are per authorizer (the token keys its authorization state by
-- (authorizer, nonce)), so two wallets may sign the same nonce and both settle. A payment is one
-- authorization: unique by (payer, nonce), no longer by the nonce alone.
DROP INDEX "payments_authorization_nonce_key";
CREATE UNIQUE INDEX "payments_payer_address_authorization_nonce_key"
  ON "payments"("payer_address", "authorization_nonce");

-- The authorization's validAfter, recorded beside validBefore: a replayed payment header is answered
-- from its record only when its signature verifies against the recorded authorization (payer, payTo,
-- value, validAfter, validBefore, nonce). Null on rows written before this migration.
ALTER TABLE "payments" ADD COLUMN "valid_after" TIMESTAMPTZ(3);
