import { NIL_SOURCE } from "../src/domain/ledger/market-totals.js";

/**
 * What a fold adds to the market's totals (`svc_market_add`: market_days and model_hours), for
 * fixtures that write clears as already folded (no holder): without it, GET /v1/market/stats and
 * GET /v1/models/stats would not count them and the books check (svc_books_check, rules market_days
 * and model_hours) would fail. `where` selects rows of `clears`; a refunded clear adds nothing
 * (docs/decisions.md "Market totals at the fold", "Model statistics at the fold").
 */
export function marketAddSql(where: string): string {
  return `SELECT svc_market_add('${NIL_SOURCE}'::uuid, 1,
                                ARRAY(SELECT c FROM clears c WHERE (${where}) AND c.refunded_at IS NULL))`;
}

/** `marketAddSql` for the clears whose ids are $1 (uuid[]). */
export const MARKET_ADD_IDS = marketAddSql("c.id = ANY($1::uuid[])");
