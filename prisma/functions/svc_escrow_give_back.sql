-- Idle escrow slices linger (issue 19, docs/decisions.md "Escrow"): a router process keeps a slice
-- nothing uses for ESCROW_LINGER_MS, so a buyer's next request (and the offer it clears on) needs no
-- top-up, then gives it back with this function; it also returns a buyer's idle part under escrow
-- pressure. One call returns any number of slices of one holder, buyers and offers, each by at most
-- what the slice holds live (less what it counts as charged by the holder's unfolded clears, which
-- the fold takes): a slice the sweeper already released (a lease that expired) or holding less is left
-- alone, so a late give-back moves nothing twice and a slice always covers its unfolded clears. Lock order as on every money path:
-- accounts in id order, then offers in id order.
-- p_returns: [{"account": uuid, "amount": "n"} | {"offer": uuid, "amount": "n"}, ...]
-- Returns the number of slices it moved. Caller: src/domain/inference/escrow/escrow-give-back.ts.
CREATE OR REPLACE FUNCTION svc_escrow_give_back(p_holder uuid, p_returns jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  moved integer := 0;
  c integer;
BEGIN
  PERFORM 1 FROM accounts a
   WHERE a.id IN (SELECT (r->>'account')::uuid FROM jsonb_array_elements(p_returns) r WHERE r ? 'account')
   ORDER BY a.id FOR NO KEY UPDATE;
  WITH r AS (SELECT (x->>'account')::uuid AS account, sum((x->>'amount')::bigint)::bigint AS amount
               FROM jsonb_array_elements(p_returns) x WHERE x ? 'account' GROUP BY 1),
       e AS (UPDATE buyer_escrows e SET amount_micro_usdc = e.amount_micro_usdc - r.amount
               FROM r
              WHERE e.account_id = r.account AND e.holder = p_holder AND r.amount > 0
                AND e.amount_micro_usdc - e.charged_micro_usdc >= r.amount
             RETURNING e.account_id, r.amount)
  UPDATE accounts a SET reserved_micro_usdc = a.reserved_micro_usdc - e.amount
    FROM e WHERE a.id = e.account_id;
  GET DIAGNOSTICS c = ROW_COUNT;
  moved := moved + c;
  DELETE FROM buyer_escrows e
   WHERE e.holder = p_holder AND e.amount_micro_usdc = 0
     AND e.account_id IN (SELECT (r->>'account')::uuid FROM jsonb_array_elements(p_returns) r WHERE r ? 'account');

  PERFORM 1 FROM offers o
   WHERE o.id IN (SELECT (r->>'offer')::uuid FROM jsonb_array_elements(p_returns) r WHERE r ? 'offer')
   ORDER BY o.id FOR NO KEY UPDATE;
  WITH r AS (SELECT (x->>'offer')::uuid AS offer, sum((x->>'amount')::bigint)::bigint AS amount
               FROM jsonb_array_elements(p_returns) x WHERE x ? 'offer' GROUP BY 1),
       e AS (UPDATE offer_escrows e SET amount_micro_diem = e.amount_micro_diem - r.amount
               FROM r
              WHERE e.offer_id = r.offer AND e.holder = p_holder AND r.amount > 0
                AND e.amount_micro_diem - e.charged_micro_diem >= r.amount
             RETURNING e.offer_id, r.amount)
  UPDATE offers o SET reserved_micro_diem = o.reserved_micro_diem - e.amount
    FROM e WHERE o.id = e.offer_id;
  GET DIAGNOSTICS c = ROW_COUNT;
  moved := moved + c;
  DELETE FROM offer_escrows e
   WHERE e.holder = p_holder AND e.amount_micro_diem = 0
     AND e.offer_id IN (SELECT (r->>'offer')::uuid FROM jsonb_array_elements(p_returns) r WHERE r ? 'offer');
  RETURN moved;
END $$;
