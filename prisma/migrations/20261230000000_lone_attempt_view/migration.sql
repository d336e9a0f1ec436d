-- A request's attempts (`inference_requests.attempts`, JSONB) were about 280 of the append's bytes
-- for the commonest request: one attempt that succeeded and was charged. That attempt is its clear:
-- the clear names its key, offer and price, and the request's record its end. So the ending stores
-- none for it (`recordedAttempts` in src/domain/inference/settlement/end-item-row.ts: a charged
-- request whose one attempt succeeded at its clear's key, offer and price; docs/decisions.md "A lone
-- successful attempt is its clear"), and every other request keeps each of its attempts as before.
-- This view reads every request's attempts, whichever way they are stored: the one successful
-- attempt of a record with attempt_count 1 and no attempts stored is built from its clear (found by
-- the buyer's history index: the clear's time is the request's end), its start read as the request's
-- start. Records written before this migration all store their attempts; none is changed.
CREATE VIEW "inference_request_attempts" AS
SELECT r.id AS request_id,
       r.started_at,
       r.account_id,
       CASE
         WHEN r.attempt_count = 1 AND r.attempts = '[]'::jsonb THEN
           COALESCE((SELECT jsonb_build_array(jsonb_build_object(
                              'ordinal', 1, 'upstreamKeyId', c.upstream_key_id, 'offerId', c.offer_id,
                              'priceCents', c.price_cents_per_dollar, 'outcome', 'succeeded'::attempt_outcome,
                              'upstreamStatus', NULL::integer, 'errorKind', NULL::text,
                              'startedAt', r.started_at, 'endedAt', r.completed_at))
                       FROM clears c
                      WHERE c.buyer_account_id = r.account_id AND c.created_at = r.completed_at
                        AND c.request_id = r.id),
                    '[]'::jsonb)
         ELSE r.attempts
       END AS attempts
  FROM inference_requests r;
