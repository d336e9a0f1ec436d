/**
 * What a fold adds to the market's totals (prisma/functions/svc_fold_holder.sql, market_days), for
 * fixtures that write clears as already folded (no holder): without it, GET /v1/market/stats would
 * not count them and the books check (svc_books_check, rule market_days) would fail. `source` is a
 * table, a partition or a subquery of clears' rows; a refunded clear adds nothing (docs/decisions.md
 * "Market totals at the fold").
 */
export function marketDaysAddSql(source: string): string {
  return `INSERT INTO market_days (day, modality, source, clears, burn_micro_diem, gross_micro_usdc, weighted)
    SELECT (c.created_at AT TIME ZONE 'UTC')::date, c.modality, '00000000-0000-0000-0000-000000000000'::uuid,
           count(*), sum(c.burn_micro_diem)::bigint, sum(c.gross_micro_usdc)::bigint,
           sum(c.burn_micro_diem * c.price_cents_per_dollar)::bigint
      FROM ${source} c WHERE c.refunded_at IS NULL GROUP BY 1, 2
    ON CONFLICT ON CONSTRAINT market_days_key
    DO UPDATE SET clears = market_days.clears + EXCLUDED.clears,
                  burn_micro_diem = market_days.burn_micro_diem + EXCLUDED.burn_micro_diem,
                  gross_micro_usdc = market_days.gross_micro_usdc + EXCLUDED.gross_micro_usdc,
                  weighted = market_days.weighted + EXCLUDED.weighted`;
}

/** `marketDaysAddSql` for the clears whose ids are $1 (uuid[]). */
export const MARKET_DAYS_ADD_IDS = marketDaysAddSql("(SELECT * FROM clears WHERE id = ANY($1::uuid[]))");
