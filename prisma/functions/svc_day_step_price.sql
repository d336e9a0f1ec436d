-- The scheduled half of svc_effective_price (which see; it calls this only for an offer with a
-- schedule): the price of the last step of p_schedule whose `fromUtc` (HH:MM, UTC) is at or before
-- p_now's minute of its UTC day, else p_price. Steps are stored in strictly increasing time (the
-- domain's parseSchedule checks them before they are written), so the walk stops at the first
-- step still to come. PL/pgSQL: a loop over a few steps costs less per row than a sub-select.
CREATE OR REPLACE FUNCTION svc_day_step_price(p_schedule jsonb, p_price integer, p_now timestamptz)
RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_minute integer := extract(hour FROM p_now AT TIME ZONE 'UTC')::integer * 60
                      + extract(minute FROM p_now AT TIME ZONE 'UTC')::integer;
  v_price integer := p_price;
  v_step jsonb;
BEGIN
  FOR v_step IN SELECT jsonb_array_elements(p_schedule) LOOP
    EXIT WHEN split_part(v_step->>'fromUtc', ':', 1)::integer * 60
              + split_part(v_step->>'fromUtc', ':', 2)::integer > v_minute;
    v_price := (v_step->>'priceCentsPerDollar')::integer;
  END LOOP;
  RETURN v_price;
END $$;
