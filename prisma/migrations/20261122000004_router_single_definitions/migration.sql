-- One definition each for the router's rules (docs/decisions.md "Router hot path"):
-- * eligibility: svc_eligible and svc_routable, inlined by the planner into every query that
--   selects offers (the hold in svc_clear, its keys_busy check, and eligibleOffers for capacity,
--   the pool summary and market stats);
-- * settlement: svc_settle_items, the set-based settlement; svc_settle (one completion) and
--   svc_settle_batch (a group commit) are thin wrappers around it;
-- * the sweeper's release of dead requests' holds: svc_release_expired, set-based, with the
--   expiry re-checked under the row lock so a hold renewed meanwhile is never taken.
-- Holds commit asynchronously (synchronous_commit off in svc_clear): a hold only protects the
-- balance and the offer until settlement, and settlement commits synchronously, which flushes
-- every earlier hold with it. A hold lost in a Postgres crash makes its request's settlement fail
-- (500 settle_failed, nothing charged), never a charge without a record.

-- An offer can be routed now: it is active and unexpired, and its key is active and not cooling down.
CREATE FUNCTION svc_eligible(o offers, k upstream_keys, p_now timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT o.status = 'active' AND k.status = 'active' AND o.expires_at > p_now
     AND (k.cooldown_until IS NULL OR k.cooldown_until <= p_now)
$$;

-- What could be cleared on the offer right now: min(remaining, key's last known balance) − reserved.
CREATE FUNCTION svc_routable(o offers, k upstream_keys) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT LEAST(o.remaining_micro_diem, COALESCE(k.last_balance_micro_diem, o.remaining_micro_diem)) - o.reserved_micro_diem
$$;

CREATE OR REPLACE FUNCTION svc_clear(
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
  PERFORM set_config('synchronous_commit', 'off', true);
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
     WHERE svc_eligible(o, k, p_now) AND o.price_cents_per_dollar <= p_ceiling
       AND svc_routable(o, k) >= p_max_burn
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
         WHERE svc_eligible(o, k, p_now) AND o.price_cents_per_dollar <= p_ceiling
           AND svc_routable(o, k) >= p_max_burn
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

-- THE settlement, for one completion or many in one transaction: every completion gets its hold
-- released, its clear, its own balanced journal and its records; each statement handles the whole
-- set, and the hot rows (buyers, offers, upstream keys, suppliers) are updated once with the sums,
-- last, in lock order (each set in id order), so they stay locked only until the commit. Any guard
-- that fails raises and the whole set rolls back. Returns each item's index (0-based) and its
-- buyer's confirmed balance after the debit. (A single item skips the set-only steps: the
-- duplicate check and the explicit lock-order pass, since one row per table needs no order.)
CREATE FUNCTION svc_settle_items(v svc_settle_item[])
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql AS $$
DECLARE
  n integer := cardinality(v);
  c integer;
BEGIN
  IF n > 1 AND (SELECT count(DISTINCT i.request) FROM unnest(v) i) <> n THEN
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
  IF n > 1 THEN
    PERFORM 1 FROM accounts a WHERE a.id IN (SELECT i.account FROM unnest(v) i) ORDER BY a.id FOR NO KEY UPDATE;
  END IF;
  UPDATE accounts a
     SET reserved_micro_usdc = a.reserved_micro_usdc - s.m, confirmed_micro_usdc = a.confirmed_micro_usdc - s.g
    FROM (SELECT i.account, sum(i.max_charge)::bigint AS m, sum(i.gross)::bigint AS g FROM unnest(v) i GROUP BY i.account) s
   WHERE a.id = s.account AND a.reserved_micro_usdc >= s.m AND a.confirmed_micro_usdc - s.g >= a.reserved_micro_usdc - s.m;
  GET DIAGNOSTICS c = ROW_COUNT;
  IF c <> (CASE WHEN n = 1 THEN 1 ELSE (SELECT count(DISTINCT i.account) FROM unnest(v) i) END) THEN
    RAISE EXCEPTION 'settle: a buyer hold is missing or a balance is short' USING ERRCODE = 'P0001';
  END IF;
  IF n > 1 THEN
    PERFORM 1 FROM offers o WHERE o.id IN (SELECT i.offer FROM unnest(v) i) ORDER BY o.id FOR NO KEY UPDATE;
  END IF;
  UPDATE offers o
     SET reserved_micro_diem = o.reserved_micro_diem - s.mb,
         remaining_micro_diem = o.remaining_micro_diem - s.b,
         status = CASE WHEN o.remaining_micro_diem - s.b = 0 AND o.status IN ('active', 'paused') THEN 'depleted'::offer_status ELSE o.status END,
         ended_at = CASE WHEN o.remaining_micro_diem - s.b = 0 AND o.status IN ('active', 'paused') THEN s.t ELSE o.ended_at END,
         updated_at = s.t
    FROM (SELECT i.offer, sum(i.max_burn)::bigint AS mb, sum(i.burn)::bigint AS b, max(i.now) AS t FROM unnest(v) i GROUP BY i.offer) s
   WHERE o.id = s.offer AND o.reserved_micro_diem >= s.mb AND o.remaining_micro_diem >= s.b;
  GET DIAGNOSTICS c = ROW_COUNT;
  IF c <> (CASE WHEN n = 1 THEN 1 ELSE (SELECT count(DISTINCT i.offer) FROM unnest(v) i) END) THEN
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

-- A group commit: items are JSON objects with svc_settle_item's fields.
CREATE OR REPLACE FUNCTION svc_settle_batch(p_items jsonb)
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY
    SELECT * FROM svc_settle_items(ARRAY(SELECT x FROM jsonb_populate_recordset(NULL::svc_settle_item, p_items) x));
END $$;

-- One completion alone (no JSON to build or parse).
CREATE OR REPLACE FUNCTION svc_settle(
  p_request uuid, p_account uuid, p_max_charge bigint, p_gross bigint, p_fee bigint, p_share bigint,
  p_offer uuid, p_key uuid, p_supplier uuid, p_max_burn bigint, p_burn bigint, p_clear uuid, p_model text,
  p_price integer, p_ceiling integer, p_prompt integer, p_completion integer, p_cached integer,
  p_incomplete boolean, p_ordinal integer, p_first_byte timestamptz, p_now timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT s.confirmed
            FROM svc_settle_items(ARRAY[ROW(p_request, p_account, p_max_charge, p_gross, p_fee, p_share, p_offer, p_key,
                                            p_supplier, p_max_burn, p_burn, p_clear, gen_random_uuid(), p_model,
                                            p_price, p_ceiling, p_prompt, p_completion, p_cached, p_incomplete,
                                            p_ordinal, p_first_byte, p_now)::svc_settle_item]) s);
END $$;

-- The sweeper: releases the holds of requests whose lease expired (their process died), up to
-- p_limit at a time, and records those requests as aborted. A hold renewed after it was read is
-- left alone (the DELETE re-checks the expiry under the row lock); holds another sweeper is
-- releasing are skipped. Lock order as everywhere: reservations, buyers, offers, each in id order.
CREATE FUNCTION svc_release_expired(p_now timestamptz, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  g reservations[];
BEGIN
  WITH d AS (
    DELETE FROM reservations r
     WHERE r.id IN (SELECT x.id FROM reservations x WHERE x.expires_at < p_now
                     ORDER BY x.id LIMIT p_limit FOR UPDATE SKIP LOCKED)
       AND r.expires_at < p_now
    RETURNING r)
  SELECT COALESCE(array_agg(d.r), '{}') INTO g FROM d;
  IF cardinality(g) = 0 THEN
    RETURN 0;
  END IF;
  PERFORM 1 FROM accounts a WHERE a.id IN (SELECT x.account_id FROM unnest(g) x) ORDER BY a.id FOR NO KEY UPDATE;
  UPDATE accounts a SET reserved_micro_usdc = a.reserved_micro_usdc - s.m
    FROM (SELECT x.account_id, sum(x.max_charge_micro_usdc)::bigint AS m FROM unnest(g) x GROUP BY x.account_id) s
   WHERE a.id = s.account_id;
  PERFORM 1 FROM offers o WHERE o.id IN (SELECT x.offer_id FROM unnest(g) x) ORDER BY o.id FOR NO KEY UPDATE;
  UPDATE offers o SET reserved_micro_diem = o.reserved_micro_diem - s.mb
    FROM (SELECT x.offer_id, sum(x.max_burn_micro_diem)::bigint AS mb FROM unnest(g) x
           WHERE x.offer_id IS NOT NULL GROUP BY x.offer_id) s
   WHERE o.id = s.offer_id;
  UPDATE inference_requests q SET status = 'failed', error_code = 'aborted', completed_at = p_now
    FROM unnest(g) x WHERE q.id = x.id AND q.status = 'in_progress';
  -- their attempts no longer count against their keys' in-flight limits
  UPDATE inference_attempts a SET outcome = 'aborted', ended_at = p_now
    FROM unnest(g) x WHERE a.request_id = x.id AND a.outcome = 'in_progress';
  RETURN cardinality(g);
END $$;
