-- THE effective price of an offer at p_now (issue 30, docs/decisions.md "Standing offers and price
-- schedules"): the price of the schedule step whose `fromUtc` (HH:MM, UTC) most recently passed
-- today, else the offer's own price. Mirrored by `effectivePrice` in
-- src/domain/supply/price-schedule.ts; test/integration/db/effective-price.test.ts checks that the
-- two agree on random schedules and instants. Every reader that orders, filters or prices offers
-- (the offer book, eligibleOffers: capacity, the ladder, the pool summary, market stats; and
-- svc_escrow_take's ceiling check) goes through this function.
CREATE OR REPLACE FUNCTION svc_effective_price(o offers, p_now timestamptz) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN o.schedule IS NULL THEN o.price_cents_per_dollar
    ELSE COALESCE(
      (SELECT (s.step->>'priceCentsPerDollar')::integer
         FROM jsonb_array_elements(o.schedule) AS s(step)
        WHERE split_part(s.step->>'fromUtc', ':', 1)::integer * 60 + split_part(s.step->>'fromUtc', ':', 2)::integer
              <= extract(hour FROM p_now AT TIME ZONE 'UTC')::integer * 60
                 + extract(minute FROM p_now AT TIME ZONE 'UTC')::integer
        ORDER BY split_part(s.step->>'fromUtc', ':', 1)::integer * 60 + split_part(s.step->>'fromUtc', ':', 2)::integer DESC
        LIMIT 1),
      o.price_cents_per_dollar)
  END
$$;
