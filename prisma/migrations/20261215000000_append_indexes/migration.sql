-- Every ending appends a request row, and every index on `inference_requests` gains an entry for it
-- (docs/performance.md "One append per clear"). Two of them are read only for the rows whose column is
-- set, always as `column = value`, which a partial index `WHERE column IS NOT NULL` answers:
--   payment_id: the request's pay-per-request payment; NULL for a request paid from the balance (most
--     of them). Read only by the foreign key to request_payments.
--   api_key_id: NULL for a request made without an API key (a browser session, a request paid per
--     request). Read by the history filtered to one key and the foreign key to api_keys (ON DELETE SET
--     NULL).
-- So a request without them writes no entry there. On the partitioned table an index made on the parent
-- is made on each partition, and on every partition made later (svc_partitions_ensure), as the
-- indexes of migration monthly_partitions were; each keeps its name.
DROP INDEX "inference_requests_payment_id_idx";
CREATE INDEX "inference_requests_payment_id_idx" ON "inference_requests" ("payment_id")
  WHERE "payment_id" IS NOT NULL;

DROP INDEX "inference_requests_api_key_id_started_at_idx";
CREATE INDEX "inference_requests_api_key_id_started_at_idx" ON "inference_requests" ("api_key_id", "started_at")
  WHERE "api_key_id" IS NOT NULL;
