-- The append locks no row (docs/decisions.md "The append names its parties without locking them").
-- A request's record and its clear named the buyer's account, the API key, the offer, the supplier's
-- account and the supplier key by foreign key, and each foreign-key check takes FOR KEY SHARE on the
-- row it names: a row lock per party and transaction, written to the WAL (about 80 of a clear's
-- 1,430 bytes, docs/performance.md "The append names its parties without locking them"), and a
-- wait behind any FOR UPDATE of those rows (docs/decisions.md "Account locks do not hold up
-- endings"). What the constraints guaranteed now holds without a lock:
--   - existence at the append: svc_end_items reads the parties, unlocked, and refuses an item whose
--     account is not on record, whose key is not its account's, or whose offer is not on record with
--     the clear's supplier and supplier key (stricter than the foreign keys, which checked each id
--     alone);
--   - existence afterwards: these rows are never deleted (an account is closed, a key revoked, an
--     offer cancelled); the trigger below refuses a DELETE as the foreign keys' RESTRICT did;
--   - the books check (svc_books_check, rule clear_parties) holds every clear to its parties.
-- The payment's foreign keys stay: the append updates that row anyway (open → charged).
ALTER TABLE "clears" DROP CONSTRAINT "clears_buyer_account_id_fkey";
ALTER TABLE "clears" DROP CONSTRAINT "clears_supplier_account_id_fkey";
ALTER TABLE "clears" DROP CONSTRAINT "clears_offer_id_fkey";
ALTER TABLE "clears" DROP CONSTRAINT "clears_upstream_key_id_fkey";
ALTER TABLE "inference_requests" DROP CONSTRAINT "inference_requests_account_id_fkey";
ALTER TABLE "inference_requests" DROP CONSTRAINT "inference_requests_api_key_id_fkey";

CREATE TRIGGER "accounts_no_delete" BEFORE DELETE ON "accounts" FOR EACH ROW EXECUTE FUNCTION "ledger_forbid_mutation"();
CREATE TRIGGER "api_keys_no_delete" BEFORE DELETE ON "api_keys" FOR EACH ROW EXECUTE FUNCTION "ledger_forbid_mutation"();
CREATE TRIGGER "offers_no_delete" BEFORE DELETE ON "offers" FOR EACH ROW EXECUTE FUNCTION "ledger_forbid_mutation"();
CREATE TRIGGER "upstream_keys_no_delete" BEFORE DELETE ON "upstream_keys" FOR EACH ROW EXECUTE FUNCTION "ledger_forbid_mutation"();
