-- Issue 32, a cheaper ending: a request's attempts are a column of its record, written by the same
-- INSERT, instead of a row each in inference_attempts (one insert, an index and three foreign-key
-- checks per attempt). Existing attempts are carried over in order; the outcome keeps its type's
-- values (attempt_outcome, which the settlement still casts each attempt's outcome to).
ALTER TABLE "inference_requests" ADD COLUMN "attempts" JSONB NOT NULL DEFAULT '[]';

UPDATE "inference_requests" r
   SET "attempts" = a.attempts
  FROM (SELECT "request_id",
               jsonb_agg(jsonb_build_object('ordinal', "ordinal", 'upstreamKeyId', "upstream_key_id",
                                            'offerId', "offer_id", 'priceCents', "price_cents",
                                            'outcome', "outcome", 'upstreamStatus', "upstream_status",
                                            'errorKind', "error_kind", 'startedAt', "started_at",
                                            'endedAt', "ended_at") ORDER BY "ordinal") AS attempts
          FROM "inference_attempts" GROUP BY "request_id") a
 WHERE r."id" = a."request_id";

ALTER TABLE "inference_requests" ADD CONSTRAINT "inference_requests_attempts_array"
  CHECK (jsonb_typeof("attempts") = 'array');

DROP TABLE "inference_attempts";
