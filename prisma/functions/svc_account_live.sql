-- A live figure (see svc_unfolded.sql, docs/decisions.md "One append per clear").
-- An account's live balances: confirmed and reserved (buyer), payable and held (supplier).
CREATE OR REPLACE FUNCTION svc_account_live(p_account uuid)
RETURNS TABLE (confirmed bigint, pending bigint, reserved bigint, payable bigint, held bigint)
LANGUAGE sql STABLE AS $$
  WITH u AS (
    SELECT COALESCE(sum(x.gross_micro_usdc) FILTER (WHERE x.buyer_account_id = p_account AND x.payment_id IS NULL), 0)::bigint AS gross,
           COALESCE(sum(x.supplier_micro_usdc) FILTER (WHERE x.supplier_account_id = p_account AND NOT x.supplier_held), 0)::bigint AS payable,
           COALESCE(sum(x.supplier_micro_usdc) FILTER (WHERE x.supplier_account_id = p_account AND x.supplier_held), 0)::bigint AS held
      FROM svc_unfolded() x
     WHERE x.buyer_account_id = p_account OR x.supplier_account_id = p_account)
  SELECT a.confirmed_micro_usdc - u.gross, a.pending_micro_usdc, a.reserved_micro_usdc - u.gross,
         a.supplier_payable_micro_usdc + u.payable, a.supplier_held_micro_usdc + u.held
    FROM accounts a CROSS JOIN u WHERE a.id = p_account
$$;
