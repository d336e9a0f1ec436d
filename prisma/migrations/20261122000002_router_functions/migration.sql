-- The router's hot path as stored functions (see docs/decisions.md "Router hot path"): each hold,
-- release and settlement is one round trip and one short transaction, so hot rows (the buyer's
-- account, the offer) are locked for microseconds, not for a client-side transaction.

-- End one attempt without a charge: release the offer hold, record the outcome, act on the key.
CREATE FUNCTION svc_end_attempt(
  p_request uuid, p_offer uuid, p_max_burn bigint, p_ordinal integer, p_outcome attempt_outcome,
  p_status integer, p_error text, p_key uuid, p_cooldown_until timestamptz, p_auth_failed boolean, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE reservations SET offer_id = NULL, max_burn_micro_diem = 0 WHERE id = p_request AND offer_id = p_offer;
  IF FOUND THEN
    UPDATE offers SET reserved_micro_diem = reserved_micro_diem - p_max_burn
     WHERE id = p_offer AND reserved_micro_diem >= p_max_burn;
  END IF;
  UPDATE inference_attempts SET outcome = p_outcome, upstream_status = p_status, error_kind = p_error, ended_at = p_now
   WHERE request_id = p_request AND ordinal = p_ordinal;
  IF p_cooldown_until IS NOT NULL THEN
    UPDATE upstream_keys SET cooldown_until = GREATEST(COALESCE(cooldown_until, p_cooldown_until), p_cooldown_until) WHERE id = p_key;
  END IF;
  IF p_auth_failed THEN
    UPDATE upstream_keys SET status = 'auth_failed', auth_failed_at = p_now WHERE id = p_key AND status = 'active';
  END IF;
END $$;

-- End a request without a charge: release every hold it still has (idempotent) and record why.
CREATE FUNCTION svc_abort(
  p_request uuid, p_account uuid, p_ordinal integer, p_outcome attempt_outcome, p_error text, p_attempts integer, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  r reservations%ROWTYPE;
BEGIN
  DELETE FROM reservations WHERE id = p_request RETURNING * INTO r;
  IF FOUND THEN
    UPDATE accounts SET reserved_micro_usdc = reserved_micro_usdc - r.max_charge_micro_usdc WHERE id = r.account_id;
    IF r.offer_id IS NOT NULL AND r.max_burn_micro_diem > 0 THEN
      UPDATE offers SET reserved_micro_diem = reserved_micro_diem - r.max_burn_micro_diem WHERE id = r.offer_id;
    END IF;
  END IF;
  IF p_ordinal IS NOT NULL THEN
    UPDATE inference_attempts SET outcome = p_outcome, ended_at = p_now
     WHERE request_id = p_request AND ordinal = p_ordinal AND outcome = 'in_progress';
  END IF;
  UPDATE inference_requests SET status = 'failed', error_code = p_error, completed_at = p_now, attempt_count = p_attempts
   WHERE id = p_request AND status = 'in_progress';
END $$;

-- Lock order, everywhere: buyer account, then offer, then upstream key, then supplier account
-- (holds, settlements and releases never wait on each other in opposite orders). Rows are locked
-- FOR NO KEY UPDATE, never FOR UPDATE: foreign-key checks of concurrent inserts (clears, attempts)
-- take KEY SHARE locks that FOR UPDATE would conflict with (a deadlock under load).

-- Settle one completion: the clear, its balanced journal, the records, then the hot rows last. Any guard that fails raises, and the whole settlement rolls back.
-- Returns the buyer's confirmed balance after the debit.
CREATE FUNCTION svc_settle(
  p_request uuid, p_account uuid, p_max_charge bigint, p_gross bigint, p_fee bigint, p_share bigint,
  p_offer uuid, p_key uuid, p_supplier uuid, p_max_burn bigint, p_burn bigint, p_clear uuid, p_model text,
  p_price integer, p_ceiling integer, p_prompt integer, p_completion integer, p_cached integer,
  p_incomplete boolean, p_ordinal integer, p_first_byte timestamptz, p_now timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_journal uuid := gen_random_uuid();
  v_confirmed bigint;
BEGIN
  DELETE FROM reservations WHERE id = p_request AND offer_id = p_offer;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'settle: no hold for request %', p_request USING ERRCODE = 'P0001';
  END IF;
  INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model, modality,
                      price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc, fee_micro_usdc,
                      supplier_micro_usdc, created_at)
  VALUES (p_clear, p_request, p_account, p_supplier, p_offer, p_key, p_model, 'text', p_price, p_ceiling, p_burn,
          p_gross, p_fee, p_share, p_now);
  IF p_gross > 0 THEN
    INSERT INTO ledger_transactions (id, kind, clear_id, idempotency_key, created_at)
    VALUES (v_journal, 'clear', p_clear, 'clear:' || p_request::text, p_now);
    INSERT INTO ledger_entries (id, transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
    SELECT gen_random_uuid(), v_journal, e.account_id, e.book::ledger_book, e.kind::ledger_entry_kind, e.amount, p_now
      FROM (VALUES (p_account, 'buyer_confirmed', 'buyer_debit', -p_gross),
                   (p_supplier, 'supplier_payable', 'supplier_credit', p_share),
                   (NULL::uuid, 'platform_fee', 'platform_fee', p_fee)) AS e(account_id, book, kind, amount)
     WHERE e.amount <> 0;
  END IF;
  UPDATE inference_requests
     SET status = CASE WHEN p_incomplete THEN 'incomplete'::inference_status ELSE 'succeeded'::inference_status END,
         clearing_price_cents = p_price, prompt_tokens = p_prompt, completion_tokens = p_completion,
         cached_tokens = p_cached, burn_micro_diem = p_burn, cost_micro_usdc = p_gross, attempt_count = p_ordinal,
         first_byte_at = p_first_byte, completed_at = p_now,
         error_code = CASE WHEN p_incomplete THEN 'stream_incomplete' ELSE NULL END
   WHERE id = p_request;
  UPDATE inference_attempts
     SET outcome = CASE WHEN p_incomplete THEN 'incomplete'::attempt_outcome ELSE 'succeeded'::attempt_outcome END, ended_at = p_now
   WHERE request_id = p_request AND ordinal = p_ordinal;
  UPDATE accounts
     SET reserved_micro_usdc = reserved_micro_usdc - p_max_charge,
         confirmed_micro_usdc = confirmed_micro_usdc - p_gross
   WHERE id = p_account AND reserved_micro_usdc >= p_max_charge
     AND confirmed_micro_usdc - p_gross >= reserved_micro_usdc - p_max_charge
  RETURNING confirmed_micro_usdc INTO v_confirmed;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'settle: buyer hold missing or balance short for %', p_account USING ERRCODE = 'P0001';
  END IF;
  UPDATE offers
     SET reserved_micro_diem = reserved_micro_diem - p_max_burn,
         remaining_micro_diem = remaining_micro_diem - p_burn,
         status = CASE WHEN remaining_micro_diem - p_burn = 0 AND status IN ('active', 'paused') THEN 'depleted'::offer_status ELSE status END,
         ended_at = CASE WHEN remaining_micro_diem - p_burn = 0 AND status IN ('active', 'paused') THEN p_now ELSE ended_at END,
         updated_at = p_now
   WHERE id = p_offer AND reserved_micro_diem >= p_max_burn AND remaining_micro_diem >= p_burn;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'settle: offer hold missing for %', p_offer USING ERRCODE = 'P0001';
  END IF;
  UPDATE upstream_keys SET last_balance_micro_diem = GREATEST(last_balance_micro_diem - p_burn, 0)
   WHERE id = p_key AND last_balance_micro_diem IS NOT NULL;
  IF p_share > 0 THEN
    UPDATE accounts SET supplier_payable_micro_usdc = supplier_payable_micro_usdc + p_share WHERE id = p_supplier;
  END IF;
  RETURN v_confirmed;
END $$;

-- Select and hold in one call: the cheapest eligible offer at or below the ceiling with at least
-- p_max_burn routable, on a key not in p_exclude (same order and rule as eligibleOffers), locked
-- and held. On the first attempt it also records the request and holds the buyer's maximum
-- charge. Outcomes: ok | insufficient_balance | no_offer.
CREATE FUNCTION svc_clear(
  p_first boolean, p_request uuid, p_support uuid, p_account uuid, p_api_key uuid, p_route inference_route,
  p_model text, p_stream boolean, p_ceiling integer, p_admitted integer, p_max_charge bigint,
  p_started timestamptz, p_expires timestamptz, p_max_burn bigint, p_exclude uuid[], p_ordinal integer,
  p_now timestamptz)
RETURNS TABLE (outcome text, offer_id uuid, upstream_key_id uuid, supplier_id uuid, price integer, key_balance bigint,
               ciphertext bytea, iv bytea, tag bytea, enc_key_id text)
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
    UPDATE accounts SET reserved_micro_usdc = reserved_micro_usdc + p_max_charge
     WHERE id = p_account AND confirmed_micro_usdc - reserved_micro_usdc >= p_max_charge;
    IF NOT FOUND THEN
      outcome := 'insufficient_balance';
      RETURN NEXT;
      RETURN;
    END IF;
    INSERT INTO inference_requests (id, support_reference, account_id, api_key_id, route, modality, model, stream, status,
                                    max_price_cents, admitted_max_tokens, started_at)
    VALUES (p_request, p_support, p_account, p_api_key, p_route, 'text', p_model, p_stream, 'in_progress',
            p_ceiling, p_admitted, p_started);
    INSERT INTO reservations (id, account_id, max_charge_micro_usdc, offer_id, max_burn_micro_diem, expires_at)
    VALUES (p_request, p_account, p_max_charge, NULL, 0, p_expires);
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
    IF NOT FOUND THEN
      -- the row we waited for may have stopped qualifying: look again a few times
      IF v_try < 4 THEN CONTINUE; END IF;
      outcome := 'no_offer';
      RETURN NEXT;
      RETURN;
    END IF;
    UPDATE offers SET reserved_micro_diem = reserved_micro_diem + p_max_burn WHERE id = v_offer;
    EXIT;
  END LOOP;
  UPDATE reservations SET offer_id = v_offer, max_burn_micro_diem = p_max_burn WHERE id = p_request;
  INSERT INTO inference_attempts (request_id, ordinal, upstream_key_id, offer_id, price_cents, started_at)
  VALUES (p_request, p_ordinal, v_key, v_offer, v_price, p_now);
  RETURN QUERY
    SELECT 'ok'::text, v_offer, v_key, v_supplier, v_price, v_balance, k.secret_ciphertext, k.secret_iv, k.secret_tag,
           k.encryption_key_id
      FROM upstream_keys k WHERE k.id = v_key;
END $$;
