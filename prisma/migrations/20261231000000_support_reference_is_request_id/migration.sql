-- A request's support reference is its request id (docs/decisions.md "The support reference is the
-- request id"). Both were v7 uuids made at the request's start and told to the same buyer
-- (`X-Svc-Request-Id`, `X-Svc-Support-Reference`), so every append stored a second uuid and a second
-- unique index entry for it: about 100 of a clear's 1,610 WAL bytes (docs/performance.md "The support
-- reference is the request id"). From now on the ending stores no reference for a request whose
-- reference is its id (`svc_end_items`: NULLIF), and a lookup finds a record by its id on the primary
-- key. Records written before keep theirs, found as before; the unique index keeps only them
-- (partial, WHERE support_reference IS NOT NULL), so a new record writes no entry there. On the
-- partitioned table an index made on the parent is made on each partition, and on every partition made
-- later (svc_partitions_ensure), named `<partition>_support_reference_started_at_idx` as Postgres names
-- them (the constraint's were `..._key`).
ALTER TABLE "inference_requests" ALTER COLUMN "support_reference" DROP NOT NULL;
ALTER TABLE "inference_requests" DROP CONSTRAINT "inference_requests_support_reference_started_at_key";
CREATE UNIQUE INDEX "inference_requests_support_reference_started_at_idx"
  ON "inference_requests" ("support_reference", "started_at") WHERE "support_reference" IS NOT NULL;
