-- Model statistics at the fold (docs/decisions.md "Model statistics at the fold"). GET /v1/models/stats
-- scanned every clear of its window (up to 30 days) on each call, public and unauthenticated. Now the
-- holder's fold adds the clears it applies to their UTC hour's row per model, keyed by the holder (no
-- two folds wait on one row), and a refund takes its clear back out under the nil source, counting
-- itself in `refunds`. The statistics read the window's whole hours from these rows plus the unfolded
-- clears (svc_model_hours), and only the two partial hours at its ends from the clears themselves;
-- the books check compares the rows with the clears (svc_books_check, model_hours).
--
-- `buyer_low` and `buyer_high` are the lowest and highest buyer among the clears a source added to the
-- hour: two buyers who certainly cleared there (unrefunded), so the privacy threshold's count of
-- distinct buyers is read from the rows in most markets. An hour and model with a refund taken out of
-- it (`refunds` above 0 in any of its rows) says nothing about its buyers: its pair may be the refunded
-- clear's buyer.
CREATE TABLE "model_hours" (
  "hour"            timestamptz NOT NULL,
  "model"           text        NOT NULL,
  "modality"        modality    NOT NULL,
  "source"          uuid        NOT NULL,
  "clears"          bigint      NOT NULL,
  "burn_micro_diem" bigint      NOT NULL,
  "refunds"         bigint      NOT NULL DEFAULT 0,
  "buyer_low"       uuid,
  "buyer_high"      uuid,
  CONSTRAINT "model_hours_key" PRIMARY KEY ("hour", "model", "modality", "source"),
  CONSTRAINT "model_hours_hour_whole" CHECK ("hour" = date_trunc('hour', "hour", 'UTC'))
);

-- What exists now, carried over while no fold and no refund can run (as the market_days migration
-- did): a clear the fold has applied counts once; one it has not counts at its fold; a refunded one is
-- taken out once, whichever it is, and counts as a refund of its hour. Retired months are not carried:
-- no window reaches them.
LOCK TABLE "escrow_holders" IN SHARE MODE;
LOCK TABLE "clears" IN SHARE MODE;
INSERT INTO "model_hours" ("hour", "model", "modality", "source", "clears", "burn_micro_diem", "refunds",
                           "buyer_low", "buyer_high")
SELECT date_trunc('hour', c.created_at, 'UTC'), c.model, c.modality, '00000000-0000-0000-0000-000000000000'::uuid,
       sum(z.folded - z.refunded)::bigint, sum((z.folded - z.refunded) * c.burn_micro_diem)::bigint, sum(z.refunded)::bigint,
       min(c.buyer_account_id::text COLLATE "C") FILTER (WHERE z.folded = 1 AND z.refunded = 0)::uuid,
       max(c.buyer_account_id::text COLLATE "C") FILTER (WHERE z.folded = 1 AND z.refunded = 0)::uuid
  FROM "clears" c LEFT JOIN "escrow_holders" h ON h.id = c.holder
 CROSS JOIN LATERAL (SELECT CASE WHEN h.id IS NOT NULL AND c.seq > h.folded_seq
                                      AND c.created_at >= h.folded_through - interval '1 day' THEN 0 ELSE 1 END AS folded,
                            CASE WHEN c.refunded_at IS NOT NULL THEN 1 ELSE 0 END AS refunded) z
 GROUP BY 1, 2, 3
HAVING sum(z.folded - z.refunded) <> 0 OR sum(z.refunded) <> 0;
