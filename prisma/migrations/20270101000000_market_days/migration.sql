-- Market totals at the fold (docs/decisions.md "Market totals at the fold"). GET /v1/market/stats
-- summed every kept clear on each call (a scan of the whole table, public and unauthenticated).
-- Now the holder's fold (svc_fold_holder) adds the clears it applies to their day's row, keyed by
-- the holder (no two folds wait on one row); a refund (refundClear) takes its clear back out of its
-- day's row under the nil source; the statistics read these rows plus the unfolded clears
-- (svc_market_days), and the books check compares them with the clears (svc_books_check,
-- market_days). A row's modality is NULL only for a month retired before this table: its closing
-- (clear_closings) kept no modality.
CREATE TABLE "market_days" (
  "day"              date   NOT NULL,
  "modality"         modality,
  "source"           uuid   NOT NULL,
  "clears"           bigint NOT NULL,
  "burn_micro_diem"  bigint NOT NULL,
  "gross_micro_usdc" bigint NOT NULL,
  -- the sum of burn × clearing price (cents per dollar): the day's average price is weighted / burn
  "weighted"         bigint NOT NULL,
  CONSTRAINT "market_days_key" UNIQUE NULLS NOT DISTINCT ("day", "modality", "source")
);

-- What exists now, carried over while no fold and no refund can run: a fold updates escrow_holders
-- and a refund updates clears, and both wait for these locks (an append, which inserts, waits too,
-- for as long as the sums take). A clear the fold has applied counts once; one it has not counts
-- when it is folded (or, until then, as unfolded); a refunded one is taken out once, whichever it is
-- (so a refunded, unfolded clear carries -1 here and +1 at its fold). A retired month's closing is
-- already net of its refunds.
LOCK TABLE "escrow_holders" IN SHARE MODE;
LOCK TABLE "clears" IN SHARE MODE;
INSERT INTO "market_days" ("day", "modality", "source", "clears", "burn_micro_diem", "gross_micro_usdc", "weighted")
SELECT x.day, x.modality, '00000000-0000-0000-0000-000000000000'::uuid,
       sum(x.clears)::bigint, sum(x.burn)::bigint, sum(x.gross)::bigint, sum(x.weighted)::bigint
  FROM (SELECT (c.created_at AT TIME ZONE 'UTC')::date AS day, c.modality, z.n AS clears,
               z.n * c.burn_micro_diem AS burn, z.n * c.gross_micro_usdc AS gross,
               z.n * c.burn_micro_diem * c.price_cents_per_dollar AS weighted
          FROM "clears" c LEFT JOIN "escrow_holders" h ON h.id = c.holder
         CROSS JOIN LATERAL (SELECT (CASE WHEN h.id IS NOT NULL AND c.seq > h.folded_seq
                                                 AND c.created_at >= h.folded_through - interval '1 day' THEN 0 ELSE 1 END)
                                      - (CASE WHEN c.refunded_at IS NOT NULL THEN 1 ELSE 0 END) AS n) z
         WHERE z.n <> 0
        UNION ALL
        SELECT k.month, NULL, sum(k.clears), sum(k.burn_micro_diem), sum(k.gross_micro_usdc), 0
          FROM "clear_closings" k GROUP BY k.month) x
 GROUP BY x.day, x.modality;
