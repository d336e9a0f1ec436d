-- `usage_rollups` (daily usage per model, made by the first migration for the public statistics) was
-- never written or read: the statistics read the clears (docs/decisions.md "Public aggregates run one
-- at a time"). It goes, so the schema shows only what the service keeps. Nothing writes it, so it is
-- empty; were it not, the migration stops rather than drop rows someone put there.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM "usage_rollups") THEN
    RAISE EXCEPTION 'drop_usage_rollups: usage_rollups has rows; nothing in the service writes it, so they are not ours to drop';
  END IF;
END $$;
DROP TABLE "usage_rollups";
