-- A live figure (see svc_unfolded.sql, docs/decisions.md "One append per clear").
-- An account's live balances: confirmed and reserved (buyer: less what its slices count as charged,
-- svc_buyer_unfolded), payable and held (supplier: plus its unfolded shares).
CREATE OR REPLACE FUNCTION svc_account_live(p_account uuid)
RETURNS TABLE (confirmed bigint, pending bigint, reserved bigint, payable bigint, held bigint)
LANGUAGE sql STABLE AS $$
  WITH b AS (SELECT COALESCE(sum(u.gross), 0)::bigint AS gross FROM svc_buyer_unfolded(p_account) u),
       s AS (
    SELECT COALESCE(sum(x.supplier_micro_usdc) FILTER (WHERE NOT x.supplier_held), 0)::bigint AS payable,
           COALESCE(sum(x.supplier_micro_usdc) FILTER (WHERE x.supplier_held), 0)::bigint AS held
      FROM svc_unfolded() x
     WHERE x.supplier_account_id = p_account)
  SELECT a.confirmed_micro_usdc - b.gross, a.pending_micro_usdc, a.reserved_micro_usdc - b.gross,
         a.supplier_payable_micro_usdc + s.payable, a.supplier_held_micro_usdc + s.held
    FROM accounts a CROSS JOIN b CROSS JOIN s WHERE a.id = p_account
$$;
