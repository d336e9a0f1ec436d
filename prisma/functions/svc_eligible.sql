-- Eligibility is defined once, here, and inlined by the planner into every query that selects
-- offers: the offer book and eligibleOffers (capacity, the pool summary, market stats) through
-- src/domain/inference/routing/clearing.ts, and the top-up (svc_escrow_take).
-- An offer can be routed now: it is active and unexpired, and its key is active and not cooling down.
CREATE OR REPLACE FUNCTION svc_eligible(o offers, k upstream_keys, p_now timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT o.status = 'active' AND k.status = 'active' AND o.expires_at > p_now
     AND (k.cooldown_until IS NULL OR k.cooldown_until <= p_now)
$$;
