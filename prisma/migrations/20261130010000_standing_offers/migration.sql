-- Standing offers and price schedules (issue 30; docs/decisions.md "Standing offers and price
-- schedules").
-- * repost_daily: at each UTC midnight the expired offer is posted again on the same key, with the
--   same price, schedule, repost_daily and daily_quantity_micro_diem (the standing-offer job).
-- * daily_quantity_micro_diem: caps a repost's quantity (the key's fresh balance otherwise).
-- * schedule: the price steps `[{"fromUtc": "HH:MM", "priceCentsPerDollar": n}, ...]` (1-24 steps,
--   strictly increasing times, prices 1-80; the domain checks the steps before they are stored).
--   The effective price is svc_effective_price (prisma/functions), mirrored by effectivePrice in
--   src/domain/supply/price-schedule.ts.
-- * reposted_from_id: the offer this one re-posts. UNIQUE: an offer is re-posted at most once, so a
--   second worker's repost of the same offer is a unique violation (offers_one_live_per_key keeps
--   one live offer per key against a supplier's own post).
-- * announced_price_cents: the effective price the price-step job last announced (ladder, capacity,
--   offerUpdated). Never read for pricing: only so that each step is announced once.
ALTER TABLE "offers"
  ADD COLUMN "repost_daily" BOOLEAN NOT NULL DEFAULT false,
  ADD COLUMN "daily_quantity_micro_diem" BIGINT,
  ADD COLUMN "schedule" JSONB,
  ADD COLUMN "reposted_from_id" UUID,
  ADD COLUMN "announced_price_cents" INTEGER,
  ADD CONSTRAINT "offers_daily_quantity_pos" CHECK ("daily_quantity_micro_diem" IS NULL OR "daily_quantity_micro_diem" > 0),
  ADD CONSTRAINT "offers_schedule_steps" CHECK (
    "schedule" IS NULL OR (jsonb_typeof("schedule") = 'array' AND jsonb_array_length("schedule") BETWEEN 1 AND 24));

CREATE UNIQUE INDEX "offers_reposted_from_id_key" ON "offers"("reposted_from_id");

ALTER TABLE "offers" ADD CONSTRAINT "offers_reposted_from_id_fkey" FOREIGN KEY ("reposted_from_id") REFERENCES "offers"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- the standing-offer job's candidates: standing offers that expired lately
CREATE INDEX "offers_standing_idx" ON "offers"("expires_at") WHERE "repost_daily";
