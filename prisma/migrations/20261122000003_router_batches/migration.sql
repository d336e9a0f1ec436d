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
-- Keys already running p_key_limit attempts are passed over (the Redis gate stays the authority
-- across processes; this keeps a batch from piling every request onto the cheapest key only to
-- give most holds back).
-- Outcomes: ok | insufficient_balance | stale_ceiling | key_inactive | keys_busy | no_offer.
CREATE INDEX inference_attempts_in_flight ON inference_attempts (upstream_key_id) WHERE outcome = 'in_progress';

DROP FUNCTION svc_clear(boolean, uuid, uuid, uuid, uuid, inference_route, text, boolean, integer, integer, bigint,
                        timestamptz, timestamptz, bigint, uuid[], integer, timestamptz);

CREATE FUNCTION svc_clear(
  p_first boolean, p_request uuid, p_support uuid, p_account uuid, p_api_key uuid, p_route inference_route,
  p_model text, p_stream boolean, p_ceiling integer, p_admitted integer, p_max_charge bigint,
  p_started timestamptz, p_expires timestamptz, p_max_burn bigint, p_exclude uuid[], p_ordinal integer,
  p_now timestamptz, p_key_limit integer)
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
       AND (SELECT count(*) FROM inference_attempts a
             WHERE a.upstream_key_id = o.upstream_key_id AND a.outcome = 'in_progress') < p_key_limit
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
      -- busy keys only (an offer qualifies but its key is at its limit): the caller waits for one
      outcome := CASE WHEN EXISTS (
        SELECT 1 FROM offers o JOIN upstream_keys k ON k.id = o.upstream_key_id
         WHERE o.status = 'active' AND k.status = 'active' AND o.expires_at > p_now
           AND (k.cooldown_until IS NULL OR k.cooldown_until <= p_now)
           AND o.price_cents_per_dollar <= p_ceiling
           AND LEAST(o.remaining_micro_diem, COALESCE(k.last_balance_micro_diem, o.remaining_micro_diem)) - o.reserved_micro_diem >= p_max_burn
           AND (p_exclude IS NULL OR o.upstream_key_id <> ALL(p_exclude))) THEN 'keys_busy' ELSE 'no_offer' END;
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
                     (it->>'ordinal')::integer, (it->>'now')::timestamptz, (it->>'keyLimit')::integer) c;
  END LOOP;
END $$;

-- Many settlements in one transaction, set-based: every completion gets exactly what svc_settle
-- gives it (its clear, its own balanced journal, its records, the same guards), but each statement
-- handles the whole batch, and the hot rows (buyers, offers, upstream keys, suppliers) are updated
-- once per batch with the sums, last, in lock order, so they stay locked only until the commit.
-- Any guard that fails raises and the whole batch rolls back (the caller settles one by one).
CREATE TYPE svc_settle_item AS (
  request uuid, account uuid, max_charge bigint, gross bigint, fee bigint, share bigint, offer uuid, key uuid,
  supplier uuid, max_burn bigint, burn bigint, clear uuid, journal uuid, model text, price integer, ceiling integer,
  prompt integer, completion integer, cached integer, incomplete boolean, ordinal integer, first_byte timestamptz,
  now timestamptz);

CREATE FUNCTION svc_settle_batch(p_items jsonb)
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v svc_settle_item[];
  n integer;
  c integer;
BEGIN
  v := ARRAY(SELECT x FROM jsonb_populate_recordset(NULL::svc_settle_item, p_items) x);
  n := cardinality(v);
  IF (SELECT count(DISTINCT i.request) FROM unnest(v) i) <> n THEN
    RAISE EXCEPTION 'settle: a request appears twice in one batch' USING ERRCODE = 'P0001';
  END IF;
  DELETE FROM reservations r USING unnest(v) i WHERE r.id = i.request AND r.offer_id = i.offer;
  GET DIAGNOSTICS c = ROW_COUNT;
  IF c <> n THEN
    RAISE EXCEPTION 'settle: % of % holds missing', n - c, n USING ERRCODE = 'P0001';
  END IF;
  INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model, modality,
                      price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc, fee_micro_usdc,
                      supplier_micro_usdc, created_at)
  SELECT i.clear, i.request, i.account, i.supplier, i.offer, i.key, i.model, 'text', i.price, i.ceiling, i.burn,
         i.gross, i.fee, i.share, i.now
    FROM unnest(v) i;
  INSERT INTO ledger_transactions (id, kind, clear_id, idempotency_key, created_at)
  SELECT i.journal, 'clear', i.clear, 'clear:' || i.request::text, i.now FROM unnest(v) i WHERE i.gross > 0;
  INSERT INTO ledger_entries (id, transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
  SELECT gen_random_uuid(), i.journal, e.account_id, e.book::ledger_book, e.kind::ledger_entry_kind, e.amount, i.now
    FROM unnest(v) i
   CROSS JOIN LATERAL (VALUES (i.account, 'buyer_confirmed', 'buyer_debit', -i.gross),
                              (i.supplier, 'supplier_payable', 'supplier_credit', i.share),
                              (NULL::uuid, 'platform_fee', 'platform_fee', i.fee)) AS e(account_id, book, kind, amount)
   WHERE i.gross > 0 AND e.amount <> 0;
  UPDATE inference_requests r
     SET status = CASE WHEN i.incomplete THEN 'incomplete'::inference_status ELSE 'succeeded'::inference_status END,
         clearing_price_cents = i.price, prompt_tokens = i.prompt, completion_tokens = i.completion,
         cached_tokens = i.cached, burn_micro_diem = i.burn, cost_micro_usdc = i.gross, attempt_count = i.ordinal,
         first_byte_at = i.first_byte, completed_at = i.now,
         error_code = CASE WHEN i.incomplete THEN 'stream_incomplete' ELSE NULL END
    FROM unnest(v) i WHERE r.id = i.request;
  UPDATE inference_attempts a
     SET outcome = CASE WHEN i.incomplete THEN 'incomplete'::attempt_outcome ELSE 'succeeded'::attempt_outcome END,
         ended_at = i.now
    FROM unnest(v) i WHERE a.request_id = i.request AND a.ordinal = i.ordinal;
  -- hot rows: buyers, offers, keys, suppliers (the lock order used everywhere), each set in id order
  PERFORM 1 FROM accounts a WHERE a.id IN (SELECT i.account FROM unnest(v) i) ORDER BY a.id FOR NO KEY UPDATE;
  UPDATE accounts a
     SET reserved_micro_usdc = a.reserved_micro_usdc - s.m, confirmed_micro_usdc = a.confirmed_micro_usdc - s.g
    FROM (SELECT i.account, sum(i.max_charge)::bigint AS m, sum(i.gross)::bigint AS g FROM unnest(v) i GROUP BY i.account) s
   WHERE a.id = s.account AND a.reserved_micro_usdc >= s.m AND a.confirmed_micro_usdc - s.g >= a.reserved_micro_usdc - s.m;
  GET DIAGNOSTICS c = ROW_COUNT;
  IF c <> (SELECT count(DISTINCT i.account) FROM unnest(v) i) THEN
    RAISE EXCEPTION 'settle: a buyer hold is missing or a balance is short' USING ERRCODE = 'P0001';
  END IF;
  PERFORM 1 FROM offers o WHERE o.id IN (SELECT i.offer FROM unnest(v) i) ORDER BY o.id FOR NO KEY UPDATE;
  UPDATE offers o
     SET reserved_micro_diem = o.reserved_micro_diem - s.mb,
         remaining_micro_diem = o.remaining_micro_diem - s.b,
         status = CASE WHEN o.remaining_micro_diem - s.b = 0 AND o.status IN ('active', 'paused') THEN 'depleted'::offer_status ELSE o.status END,
         ended_at = CASE WHEN o.remaining_micro_diem - s.b = 0 AND o.status IN ('active', 'paused') THEN s.t ELSE o.ended_at END,
         updated_at = s.t
    FROM (SELECT i.offer, sum(i.max_burn)::bigint AS mb, sum(i.burn)::bigint AS b, max(i.now) AS t FROM unnest(v) i GROUP BY i.offer) s
   WHERE o.id = s.offer AND o.reserved_micro_diem >= s.mb AND o.remaining_micro_diem >= s.b;
  GET DIAGNOSTICS c = ROW_COUNT;
  IF c <> (SELECT count(DISTINCT i.offer) FROM unnest(v) i) THEN
    RAISE EXCEPTION 'settle: an offer hold is missing' USING ERRCODE = 'P0001';
  END IF;
  UPDATE upstream_keys k SET last_balance_micro_diem = GREATEST(k.last_balance_micro_diem - s.b, 0)
    FROM (SELECT i.key, sum(i.burn)::bigint AS b FROM unnest(v) i GROUP BY i.key ORDER BY i.key) s
   WHERE k.id = s.key AND k.last_balance_micro_diem IS NOT NULL;
  UPDATE accounts a SET supplier_payable_micro_usdc = a.supplier_payable_micro_usdc + s.p
    FROM (SELECT i.supplier, sum(i.share)::bigint AS p FROM unnest(v) i GROUP BY i.supplier HAVING sum(i.share) > 0) s
   WHERE a.id = s.supplier;
  RETURN QUERY
    SELECT (x.o - 1)::integer, a.confirmed_micro_usdc
      FROM unnest(v) WITH ORDINALITY AS x(request, account, max_charge, gross, fee, share, offer, key, supplier, max_burn,
                                         burn, clear, journal, model, price, ceiling, prompt, completion, cached,
                                         incomplete, ordinal, first_byte, now, o)
      JOIN accounts a ON a.id = x.account;
END $$;
