-- THE effective price of an offer at p_now (issue 30, docs/decisions.md "Price schedules"): the
-- price of the schedule step whose `fromUtc` (HH:MM, UTC) most recently passed today, else the
-- offer's own price. Mirrored by `effectivePrice` in src/domain/supply/price-schedule.ts;
-- test/integration/db/effective-price.test.ts checks that the two agree on random schedules and
-- instants. Every reader that orders, filters or prices offers (the offer book, eligibleOffers:
-- capacity, the ladder, the pool summary, market stats; and svc_escrow_take's ceiling check) goes
-- through this function. A plain CASE, so the planner inlines it: an offer without a schedule costs
-- nothing; one with a schedule walks its steps (svc_day_step_price).
CREATE OR REPLACE FUNCTION svc_effective_price(o offers, p_now timestamptz) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN o.schedule IS NULL THEN o.price_cents_per_dollar
              ELSE svc_day_step_price(o.schedule, o.price_cents_per_dollar, p_now) END
$$;
