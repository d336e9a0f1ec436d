-- A live figure (see svc_unfolded.sql, docs/decisions.md "One append per clear").
-- API keys' spend per UTC day: what the folds added (api_key_spend) and what is unfolded, one row per
-- source. THE figure budgets hold against (svc_key_reserve) and listings show.
CREATE OR REPLACE FUNCTION svc_key_spend()
RETURNS TABLE (api_key_id uuid, day date, spent_micro_usdc bigint) LANGUAGE sql STABLE AS $$
  SELECT s.api_key_id, s.day, s.spent_micro_usdc FROM api_key_spend s
  UNION ALL
  SELECT u.api_key_id, u.spend_day, u.gross_micro_usdc FROM svc_unfolded() u
   WHERE u.api_key_id IS NOT NULL AND u.gross_micro_usdc > 0
$$;
