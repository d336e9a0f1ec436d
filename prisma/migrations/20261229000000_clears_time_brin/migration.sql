-- Every charged ending appends a clear, and every btree on `clears` gains an entry for it (about 64
-- bytes of WAL for this one; docs/performance.md "One append per clear"). The index on `created_at`
-- alone is read only by time ranges: the statistics' windows (catalog and market), the month's
-- closing, the day's figures; never for an order or one row. Clears are appended in time order, so a
-- block-range index answers those ranges and writes nothing for a row appended to a range not yet
-- summarised (the table's newest pages). A range not summarised is read whole by every range read,
-- so each range is summarised as soon as the appends move past it (`autosummarize`: autovacuum's work
-- item), not at the partition's next vacuum, which on an append-only table of millions of rows may be
-- millions of rows away. On the partitioned table an index made on the parent is made on each
-- partition, and on every partition made later (svc_partitions_ensure); each keeps its name.
DROP INDEX "clears_created_at_idx";
CREATE INDEX "clears_created_at_idx" ON "clears" USING brin ("created_at") WITH (autosummarize = on);
