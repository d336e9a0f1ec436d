-- Group commit for the router's hot path (docs/decisions.md "Router hot path: batches").
-- A process sends the holds (and, separately, the settlements) of every request that is waiting
-- in one call and one transaction: each request still gets exactly the same stored function and
-- guards as alone, but the hot rows (the buyer's account, the cheapest offer) are locked and
-- committed once per batch instead of once per request. A batch that raises rolls back whole, and
-- the caller then runs its requests one by one, so one bad request never fails the others.

-- svc_clear, revised: it also verifies (so callers may cache) that the Bearer key is still active
-- and that the caller planned with the account's current ceiling; on a refusal it returns the
-- account's available balance and ceiling, so the caller can plan again without another read.
-- The first attempt inserts the hold with its offer (one write fewer than insert-then-update).
-- Outcomes: ok | insufficient_balance | stale_ceiling | key_inactive | no_offer.
DROP FUNCTION svc_clear(boolean, uuid, uuid, uuid, uuid, inference_route, text, boolean, integer, integer, bigint,
                        timestamptz, timestamptz, bigint, uuid[], integer, timestamptz);

CREATE FUNCTION svc_clear(
  p_first boolean, p_request uuid, p_support uuid, p_account uuid, p_api_key uuid, p_route inference_route,
  p_model text, p_stream boolean, p_ceiling integer, p_admitted integer, p_max_charge bigint,
  p_started timestamptz, p_expires timestamptz, p_max_burn bigint, p_exclude uuid[], p_ordinal integer,
  p_now timestamptz)
RETURNS TABLE (outcome text, offer_id uuid, upstream_key_id uuid, supplier_id uuid, price integer, key_balance bigint,
               ciphertext bytea, iv bytea, tag bytea, enc_key_id text, available bigint, ceiling integer)
LANGUAGE plpgsql AS $$
DECLARE
  v_offer uuid;
  v_key uuid;
  v_supplier uuid;
  v_price integer;
  v_balance bigint;
  v_try integer := 0;
BEGIN
  IF p_first THEN
    IF NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = p_api_key AND k.account_id = p_account AND k.status = 'active') THEN
      outcome := 'key_inactive';
      RETURN NEXT;
      RETURN;
    END IF;
    UPDATE accounts a SET reserved_micro_usdc = a.reserved_micro_usdc + p_max_charge
     WHERE a.id = p_account AND a.max_price_cents_per_dollar = p_ceiling
       AND a.confirmed_micro_usdc - a.reserved_micro_usdc >= p_max_charge;
    IF NOT FOUND THEN
      SELECT a.confirmed_micro_usdc - a.reserved_micro_usdc, a.max_price_cents_per_dollar INTO available, ceiling
        FROM accounts a WHERE a.id = p_account;
      outcome := CASE WHEN ceiling IS DISTINCT FROM p_ceiling THEN 'stale_ceiling' ELSE 'insufficient_balance' END;
      RETURN NEXT;
      RETURN;
    END IF;
    INSERT INTO inference_requests (id, support_reference, account_id, api_key_id, route, modality, model, stream, status,
                                    max_price_cents, admitted_max_tokens, started_at)
    VALUES (p_request, p_support, p_account, p_api_key, p_route, 'text', p_model, p_stream, 'in_progress',
            p_ceiling, p_admitted, p_started);
  END IF;
  LOOP
    v_try := v_try + 1;
    SELECT o.id, o.upstream_key_id, o.account_id, o.price_cents_per_dollar, k.last_balance_micro_diem
      INTO v_offer, v_key, v_supplier, v_price, v_balance
      FROM offers o JOIN upstream_keys k ON k.id = o.upstream_key_id
     WHERE o.status = 'active' AND k.status = 'active' AND o.expires_at > p_now
       AND (k.cooldown_until IS NULL OR k.cooldown_until <= p_now)
       AND o.price_cents_per_dollar <= p_ceiling
       AND LEAST(o.remaining_micro_diem, COALESCE(k.last_balance_micro_diem, o.remaining_micro_diem)) - o.reserved_micro_diem >= p_max_burn
       AND (p_exclude IS NULL OR o.upstream_key_id <> ALL(p_exclude))
     ORDER BY o.price_cents_per_dollar ASC, o.created_at ASC, o.id ASC
     LIMIT 1
     FOR NO KEY UPDATE OF o;
    IF FOUND THEN EXIT; END IF;
    -- the row we waited for may have stopped qualifying: look again a few times
    IF v_try >= 4 THEN
      IF p_first THEN
        -- the buyer's hold exists from the first decision on: the caller's abort releases it
        INSERT INTO reservations (id, account_id, max_charge_micro_usdc, offer_id, max_burn_micro_diem, expires_at)
        VALUES (p_request, p_account, p_max_charge, NULL, 0, p_expires);
      END IF;
      outcome := 'no_offer';
      RETURN NEXT;
      RETURN;
    END IF;
  END LOOP;
  UPDATE offers SET reserved_micro_diem = reserved_micro_diem + p_max_burn WHERE id = v_offer;
  IF p_first THEN
    INSERT INTO reservations (id, account_id, max_charge_micro_usdc, offer_id, max_burn_micro_diem, expires_at)
    VALUES (p_request, p_account, p_max_charge, v_offer, p_max_burn, p_expires);
  ELSE
    UPDATE reservations r SET offer_id = v_offer, max_burn_micro_diem = p_max_burn WHERE r.id = p_request;
  END IF;
  INSERT INTO inference_attempts (request_id, ordinal, upstream_key_id, offer_id, price_cents, started_at)
  VALUES (p_request, p_ordinal, v_key, v_offer, v_price, p_now);
  RETURN QUERY
    SELECT 'ok'::text, v_offer, v_key, v_supplier, v_price, v_balance, k.secret_ciphertext, k.secret_iv, k.secret_tag,
           k.encryption_key_id, NULL::bigint, NULL::integer
      FROM upstream_keys k WHERE k.id = v_key;
END $$;

-- Many holds in one transaction. Items are JSON objects with the arguments of svc_clear; rows
-- come back tagged with the item's index. The buyers' rows are locked first, in id order, so two
-- batches never wait on each other's buyers in opposite orders.
CREATE FUNCTION svc_clear_batch(p_items jsonb)
RETURNS TABLE (idx integer, outcome text, offer_id uuid, upstream_key_id uuid, supplier_id uuid, price integer,
               key_balance bigint, ciphertext bytea, iv bytea, tag bytea, enc_key_id text, available bigint,
               ceiling integer)
LANGUAGE plpgsql AS $$
DECLARE
  it jsonb;
  i integer;
BEGIN
  PERFORM 1 FROM accounts a
   WHERE a.id IN (SELECT DISTINCT (e->>'account')::uuid FROM jsonb_array_elements(p_items) e)
   ORDER BY a.id FOR NO KEY UPDATE;
  FOR it, i IN SELECT e.value, (e.ordinality - 1)::integer FROM jsonb_array_elements(p_items) WITH ORDINALITY e LOOP
    RETURN QUERY SELECT i, c.*
      FROM svc_clear((it->>'first')::boolean, (it->>'request')::uuid, (it->>'support')::uuid, (it->>'account')::uuid,
                     (it->>'apiKey')::uuid, (it->>'route')::inference_route, it->>'model', (it->>'stream')::boolean,
                     (it->>'ceiling')::integer, (it->>'admitted')::integer, (it->>'maxCharge')::bigint,
                     (it->>'started')::timestamptz, (it->>'expires')::timestamptz, (it->>'maxBurn')::bigint,
                     CASE WHEN jsonb_typeof(it->'exclude') = 'array' AND jsonb_array_length(it->'exclude') > 0
                          THEN ARRAY(SELECT jsonb_array_elements_text(it->'exclude'))::uuid[] END,
                     (it->>'ordinal')::integer, (it->>'now')::timestamptz) c;
  END LOOP;
END $$;

-- Many settlements in one transaction (each exactly svc_settle: its own balanced journal, guards
-- and records). Any guard that raises rolls the whole batch back; the caller then settles the
-- batch's completions one by one. Buyers, then offers, are locked first, each in id order.
CREATE FUNCTION svc_settle_batch(p_items jsonb)
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql AS $$
DECLARE
  it jsonb;
  i integer;
BEGIN
  PERFORM 1 FROM accounts a
   WHERE a.id IN (SELECT DISTINCT (e->>'account')::uuid FROM jsonb_array_elements(p_items) e)
   ORDER BY a.id FOR NO KEY UPDATE;
  PERFORM 1 FROM offers o
   WHERE o.id IN (SELECT DISTINCT (e->>'offer')::uuid FROM jsonb_array_elements(p_items) e)
   ORDER BY o.id FOR NO KEY UPDATE;
  FOR it, i IN SELECT e.value, (e.ordinality - 1)::integer FROM jsonb_array_elements(p_items) WITH ORDINALITY e LOOP
    idx := i;
    confirmed := svc_settle((it->>'request')::uuid, (it->>'account')::uuid, (it->>'maxCharge')::bigint,
                            (it->>'gross')::bigint, (it->>'fee')::bigint, (it->>'share')::bigint, (it->>'offer')::uuid,
                            (it->>'key')::uuid, (it->>'supplier')::uuid, (it->>'maxBurn')::bigint,
                            (it->>'burn')::bigint, (it->>'clear')::uuid, it->>'model', (it->>'price')::integer,
                            (it->>'ceiling')::integer, (it->>'prompt')::integer, (it->>'completion')::integer,
                            (it->>'cached')::integer, (it->>'incomplete')::boolean, (it->>'ordinal')::integer,
                            (it->>'firstByte')::timestamptz, (it->>'now')::timestamptz);
    RETURN NEXT;
  END LOOP;
END $$;
