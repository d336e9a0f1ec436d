-- Every charged ending appends a clear, and every index on `clears` gains an entry for it
-- (docs/performance.md "One append per clear"). The index on `request_id` is read only to find a video
-- job's clear (its held share released or held again, its refund, the fold of its holder before
-- either), and those reads say `modality = 'video'`; no foreign key looks clears up through it. So it
-- is partial on the video modality: a text or image clear writes no entry there. On the partitioned
-- table an index made on the parent is made on each partition, and on every partition made later
-- (svc_partitions_ensure); each keeps its name.
DROP INDEX "clears_request_id_idx";
CREATE INDEX "clears_request_id_idx" ON "clears" ("request_id") WHERE "modality" = 'video';
