-- Per-process escrow (docs/decisions.md "Router and inference", "Escrow"): admission without a
-- database round trip before the upstream call.
--
-- A process (an escrow holder, leased and renewed by a heartbeat) takes slices of buyers' confirmed
-- balances (buyer_escrows) and of offers' routable DIEM (offer_escrows), counted in the same
-- reserved_* columns the per-request holds used, with the same guards. It admits requests against
-- its slices in memory and tops a slice up (svc_escrow_take, one round trip) only when it is too
-- small. A request's records (request, attempts, clear, journal) are written once, when it ends
-- (svc_end_batch): its charge comes out of the slices, and a slice nothing else in flight needs
-- goes back in the same transaction, so an idle buyer or offer has nothing escrowed. The slices of
-- a holder whose lease expired (its process died) go back through the sweeper
-- (svc_release_expired).

-- The per-request holds are gone: give back any still outstanding and close their requests.
UPDATE accounts a SET reserved_micro_usdc = a.reserved_micro_usdc - s.m
  FROM (SELECT r.account_id, sum(r.max_charge_micro_usdc)::bigint AS m FROM reservations r GROUP BY r.account_id) s
 WHERE a.id = s.account_id;
UPDATE offers o SET reserved_micro_diem = o.reserved_micro_diem - s.mb
  FROM (SELECT r.offer_id, sum(r.max_burn_micro_diem)::bigint AS mb FROM reservations r
         WHERE r.offer_id IS NOT NULL GROUP BY r.offer_id) s
 WHERE o.id = s.offer_id;
UPDATE inference_requests q SET status = 'failed', error_code = 'aborted', completed_at = now()
  FROM reservations r WHERE q.id = r.id AND q.status = 'in_progress';
UPDATE inference_attempts a SET outcome = 'aborted', ended_at = now()
  FROM reservations r WHERE a.request_id = r.id AND a.outcome = 'in_progress';
DROP TABLE reservations;
DROP INDEX IF EXISTS inference_attempts_in_flight;

DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
            WHERE p.proname IN ('svc_clear', 'svc_clear_batch', 'svc_end_attempt', 'svc_abort', 'svc_settle',
                                'svc_settle_batch', 'svc_settle_items', 'svc_release_expired')
  LOOP
    EXECUTE 'DROP FUNCTION ' || f;
  END LOOP;
END $$;
DROP TYPE IF EXISTS svc_settle_item;

-- One row per live router process. Its slices live as long as its lease.
CREATE TABLE escrow_holders (
  id uuid PRIMARY KEY,
  started_at timestamptz(3) NOT NULL DEFAULT now(),
  expires_at timestamptz(3) NOT NULL
);
CREATE INDEX escrow_holders_expires_at_idx ON escrow_holders (expires_at);

CREATE TABLE buyer_escrows (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  holder uuid NOT NULL REFERENCES escrow_holders(id),
  amount_micro_usdc bigint NOT NULL CONSTRAINT buyer_escrows_nonneg CHECK (amount_micro_usdc >= 0),
  PRIMARY KEY (account_id, holder)
);
CREATE INDEX buyer_escrows_holder_idx ON buyer_escrows (holder);

CREATE TABLE offer_escrows (
  offer_id uuid NOT NULL REFERENCES offers(id) ON DELETE CASCADE,
  holder uuid NOT NULL REFERENCES escrow_holders(id),
  amount_micro_diem bigint NOT NULL CONSTRAINT offer_escrows_nonneg CHECK (amount_micro_diem >= 0),
  PRIMARY KEY (offer_id, holder)
);
CREATE INDEX offer_escrows_holder_idx ON offer_escrows (holder);

-- Tops up a holder's slices, in one short transaction (lock order: buyer, then offer):
-- * the buyer part (p_account not null): the API key must be active and the account's; the
--   planned ceiling must be the account's; at least p_usdc_min of the available balance
--   (confirmed − reserved) must be free. Grants min(max(want, min), available).
-- * the offer part (p_offer not null): the offer must be eligible (svc_eligible) at or below
--   p_ceiling with at least p_diem_min routable (svc_routable). Grants min(max(want, min), routable).
-- The buyer part commits even when the offer part is refused ('offer_short'): the grant is the
-- holder's either way. Commits asynchronously: a slice only protects funds until the settlement,
-- which commits synchronously (and flushes it); a slice lost in a crash makes the settlements
-- drawing on it fail their guards (nothing charged), never a charge without a slice.
CREATE FUNCTION svc_escrow_take(
  p_holder uuid, p_account uuid, p_api_key uuid, p_ceiling integer, p_usdc_min bigint, p_usdc_want bigint,
  p_offer uuid, p_diem_min bigint, p_diem_want bigint, p_now timestamptz)
RETURNS TABLE (outcome text, granted_usdc bigint, available bigint, ceiling integer, granted_diem bigint,
               routable bigint, key_balance bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_eligible boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  granted_usdc := 0;
  granted_diem := 0;
  PERFORM 1 FROM escrow_holders h WHERE h.id = p_holder AND h.expires_at > p_now FOR KEY SHARE;
  IF NOT FOUND THEN
    outcome := 'holder_lost';
    RETURN NEXT;
    RETURN;
  END IF;
  IF p_account IS NOT NULL THEN
    IF NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = p_api_key AND k.account_id = p_account AND k.status = 'active') THEN
      outcome := 'key_inactive';
      RETURN NEXT;
      RETURN;
    END IF;
    SELECT a.confirmed_micro_usdc - a.reserved_micro_usdc, a.max_price_cents_per_dollar INTO available, ceiling
      FROM accounts a WHERE a.id = p_account FOR NO KEY UPDATE;
    IF ceiling IS DISTINCT FROM p_ceiling THEN
      outcome := 'stale_ceiling';
      RETURN NEXT;
      RETURN;
    END IF;
    IF available < p_usdc_min THEN
      outcome := 'insufficient_balance';
      RETURN NEXT;
      RETURN;
    END IF;
    granted_usdc := LEAST(GREATEST(p_usdc_want, p_usdc_min), available);
    UPDATE accounts a SET reserved_micro_usdc = a.reserved_micro_usdc + granted_usdc WHERE a.id = p_account;
    INSERT INTO buyer_escrows (account_id, holder, amount_micro_usdc) VALUES (p_account, p_holder, granted_usdc)
    ON CONFLICT (account_id, holder)
    DO UPDATE SET amount_micro_usdc = buyer_escrows.amount_micro_usdc + EXCLUDED.amount_micro_usdc;
    available := available - granted_usdc;
  END IF;
  IF p_offer IS NOT NULL THEN
    SELECT svc_eligible(o, k, p_now) AND o.price_cents_per_dollar <= p_ceiling, svc_routable(o, k), k.last_balance_micro_diem
      INTO v_eligible, routable, key_balance
      FROM offers o JOIN upstream_keys k ON k.id = o.upstream_key_id
     WHERE o.id = p_offer
       FOR NO KEY UPDATE OF o;
    IF NOT FOUND OR NOT v_eligible OR routable < p_diem_min THEN
      outcome := 'offer_short';
      IF NOT FOUND OR NOT v_eligible THEN routable := 0; END IF;
      RETURN NEXT;
      RETURN;
    END IF;
    granted_diem := LEAST(GREATEST(p_diem_want, p_diem_min), routable);
    UPDATE offers o SET reserved_micro_diem = o.reserved_micro_diem + granted_diem WHERE o.id = p_offer;
    INSERT INTO offer_escrows (offer_id, holder, amount_micro_diem) VALUES (p_offer, p_holder, granted_diem)
    ON CONFLICT (offer_id, holder)
    DO UPDATE SET amount_micro_diem = offer_escrows.amount_micro_diem + EXCLUDED.amount_micro_diem;
    routable := routable - granted_diem;
  END IF;
  outcome := 'ok';
  RETURN NEXT;
END $$;

-- One ended request: its records, and (when it is charged) its settlement. `returns` lists slice
-- parts given back: [{"holder", "account" | "offer", "amount"}] (amounts as strings).
-- `attempts`: [{"ordinal", "key", "offer", "price", "outcome", "status", "detail", "started", "ended"}].
CREATE TYPE svc_end_item AS (
  request uuid, support uuid, account uuid, api_key uuid, route inference_route, model text, stream boolean,
  status inference_status, error_code text, ceiling integer, admitted integer, attempt_count integer,
  started timestamptz, first_byte timestamptz, now timestamptz,
  -- the charge (succeeded or incomplete); null otherwise
  offer uuid, key uuid, supplier uuid, price integer, burn bigint, gross bigint, fee bigint, share bigint,
  clear uuid, journal uuid, prompt integer, completion integer, cached integer,
  buyer_holder uuid, offer_holder uuid,
  returns jsonb, attempts jsonb);

-- THE settlement and request record, for one ended request or many in one transaction. Each item
-- gets its request record and attempts; a charged item its clear and its own balanced journal
-- (buyer debit = supplier credit + platform fee), its charge taken out of the holder's buyer slice
-- and its burn out of the holder's offer slice. Hot rows (buyers, offers, upstream keys,
-- suppliers: the lock order used everywhere) are updated once with the sums, last, each set in
-- id order. Any guard that fails raises and the whole set rolls back (the caller then retries
-- item by item, so one bad item fails alone). Returns each item's index (0-based) and its buyer's
-- confirmed balance afterwards. Generic plans from the first call: custom planning of these
-- statements cost more than running them (each pooled connection planned them anew).
CREATE FUNCTION svc_end_items(v svc_end_item[])
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  n integer := cardinality(v);
  c integer;
  d_account uuid[];
  d_holder uuid[];
  d_amount bigint[];
  e_offer uuid[];
  e_holder uuid[];
  e_amount bigint[];
BEGIN
  IF n > 1 AND (SELECT count(DISTINCT i.request) FROM unnest(v) i) <> n THEN
    RAISE EXCEPTION 'end: a request appears twice in one batch' USING ERRCODE = 'P0001';
  END IF;
  IF EXISTS (SELECT 1 FROM unnest(v) i WHERE i.clear IS NOT NULL
               AND (i.buyer_holder IS NULL OR i.offer_holder IS NULL OR i.gross < 0 OR i.burn < 0
                    OR i.fee + i.share <> i.gross)) THEN
    RAISE EXCEPTION 'end: a charge without its slices or not balanced' USING ERRCODE = 'P0001';
  END IF;
  INSERT INTO inference_requests (id, support_reference, account_id, api_key_id, route, modality, model, stream, status,
                                  error_code, max_price_cents, clearing_price_cents, admitted_max_tokens, prompt_tokens,
                                  completion_tokens, cached_tokens, burn_micro_diem, cost_micro_usdc, attempt_count,
                                  started_at, first_byte_at, completed_at)
  SELECT i.request, i.support, i.account, i.api_key, i.route, 'text', i.model, i.stream, i.status, i.error_code,
         i.ceiling, i.price, i.admitted, i.prompt, i.completion, i.cached, i.burn, i.gross, i.attempt_count,
         i.started, i.first_byte, i.now
    FROM unnest(v) i;
  INSERT INTO inference_attempts (request_id, ordinal, upstream_key_id, offer_id, price_cents, outcome, upstream_status,
                                  error_kind, started_at, ended_at)
  SELECT i.request, a.ordinal, a.key, a.offer, a.price, a.outcome, a.status, a.detail, a.started, a.ended
    FROM unnest(v) i
   CROSS JOIN LATERAL jsonb_to_recordset(COALESCE(i.attempts, '[]')) AS a(ordinal integer, key uuid, offer uuid,
              price integer, outcome attempt_outcome, status integer, detail text, started timestamptz, ended timestamptz);
  INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model, modality,
                      price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc, fee_micro_usdc,
                      supplier_micro_usdc, created_at)
  SELECT i.clear, i.request, i.account, i.supplier, i.offer, i.key, i.model, 'text', i.price, i.ceiling, i.burn,
         i.gross, i.fee, i.share, i.now
    FROM unnest(v) i WHERE i.clear IS NOT NULL;
  INSERT INTO ledger_transactions (id, kind, clear_id, idempotency_key, created_at)
  SELECT i.journal, 'clear', i.clear, 'clear:' || i.request::text, i.now FROM unnest(v) i
   WHERE i.clear IS NOT NULL AND i.gross > 0;
  INSERT INTO ledger_entries (id, transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
  SELECT gen_random_uuid(), i.journal, e.account_id, e.book::ledger_book, e.kind::ledger_entry_kind, e.amount, i.now
    FROM unnest(v) i
   CROSS JOIN LATERAL (VALUES (i.account, 'buyer_confirmed', 'buyer_debit', -i.gross),
                              (i.supplier, 'supplier_payable', 'supplier_credit', i.share),
                              (NULL::uuid, 'platform_fee', 'platform_fee', i.fee)) AS e(account_id, book, kind, amount)
   WHERE i.clear IS NOT NULL AND i.gross > 0 AND e.amount <> 0;

  -- what leaves each buyer slice (charges and returns) and each offer slice (burns and returns)
  SELECT array_agg(s.account ORDER BY s.account, s.holder), array_agg(s.holder ORDER BY s.account, s.holder),
         array_agg(s.amount ORDER BY s.account, s.holder)
    INTO d_account, d_holder, d_amount
    FROM (SELECT x.account, x.holder, sum(x.amount)::bigint AS amount
            FROM (SELECT i.account, i.buyer_holder AS holder, i.gross AS amount FROM unnest(v) i WHERE i.clear IS NOT NULL
                  UNION ALL
                  SELECT (r->>'account')::uuid, (r->>'holder')::uuid, (r->>'amount')::bigint
                    FROM unnest(v) i CROSS JOIN LATERAL jsonb_array_elements(COALESCE(i.returns, '[]')) r
                   WHERE r ? 'account') x
           GROUP BY x.account, x.holder HAVING sum(x.amount) > 0) s;
  SELECT array_agg(s.offer ORDER BY s.offer, s.holder), array_agg(s.holder ORDER BY s.offer, s.holder),
         array_agg(s.amount ORDER BY s.offer, s.holder)
    INTO e_offer, e_holder, e_amount
    FROM (SELECT x.offer, x.holder, sum(x.amount)::bigint AS amount
            FROM (SELECT i.offer, i.offer_holder AS holder, i.burn AS amount FROM unnest(v) i WHERE i.clear IS NOT NULL
                  UNION ALL
                  SELECT (r->>'offer')::uuid, (r->>'holder')::uuid, (r->>'amount')::bigint
                    FROM unnest(v) i CROSS JOIN LATERAL jsonb_array_elements(COALESCE(i.returns, '[]')) r
                   WHERE r ? 'offer') x
           GROUP BY x.offer, x.holder HAVING sum(x.amount) > 0) s;

  -- buyers (in id order), then their slices, then the balances
  IF d_account IS NOT NULL THEN
    PERFORM 1 FROM accounts a WHERE a.id = ANY(d_account) ORDER BY a.id FOR NO KEY UPDATE;
    UPDATE buyer_escrows e SET amount_micro_usdc = e.amount_micro_usdc - d.amount
      FROM unnest(d_account, d_holder, d_amount) AS d(account, holder, amount)
     WHERE e.account_id = d.account AND e.holder = d.holder AND e.amount_micro_usdc >= d.amount;
    GET DIAGNOSTICS c = ROW_COUNT;
    IF c <> cardinality(d_account) THEN
      RAISE EXCEPTION 'end: a buyer slice is missing or short' USING ERRCODE = 'P0001';
    END IF;
    DELETE FROM buyer_escrows e USING unnest(d_account, d_holder) AS d(account, holder)
     WHERE e.account_id = d.account AND e.holder = d.holder AND e.amount_micro_usdc = 0;
    UPDATE accounts a
       SET reserved_micro_usdc = a.reserved_micro_usdc - s.m, confirmed_micro_usdc = a.confirmed_micro_usdc - s.g
      FROM (SELECT d.account, sum(d.amount)::bigint AS m,
                   COALESCE((SELECT sum(i.gross) FROM unnest(v) i WHERE i.clear IS NOT NULL AND i.account = d.account), 0)::bigint AS g
              FROM unnest(d_account, d_amount) AS d(account, amount) GROUP BY d.account) s
     WHERE a.id = s.account AND a.reserved_micro_usdc >= s.m AND a.confirmed_micro_usdc - s.g >= a.reserved_micro_usdc - s.m;
    GET DIAGNOSTICS c = ROW_COUNT;
    IF c <> (SELECT count(DISTINCT x) FROM unnest(d_account) x) THEN
      RAISE EXCEPTION 'end: a buyer balance is short' USING ERRCODE = 'P0001';
    END IF;
  END IF;
  -- offers (in id order), then their slices, then remaining and reserved
  IF e_offer IS NOT NULL THEN
    PERFORM 1 FROM offers o WHERE o.id = ANY(e_offer) ORDER BY o.id FOR NO KEY UPDATE;
    UPDATE offer_escrows e SET amount_micro_diem = e.amount_micro_diem - d.amount
      FROM unnest(e_offer, e_holder, e_amount) AS d(offer, holder, amount)
     WHERE e.offer_id = d.offer AND e.holder = d.holder AND e.amount_micro_diem >= d.amount;
    GET DIAGNOSTICS c = ROW_COUNT;
    IF c <> cardinality(e_offer) THEN
      RAISE EXCEPTION 'end: an offer slice is missing or short' USING ERRCODE = 'P0001';
    END IF;
    DELETE FROM offer_escrows e USING unnest(e_offer, e_holder) AS d(offer, holder)
     WHERE e.offer_id = d.offer AND e.holder = d.holder AND e.amount_micro_diem = 0;
    UPDATE offers o
       SET reserved_micro_diem = o.reserved_micro_diem - s.m,
           remaining_micro_diem = o.remaining_micro_diem - s.b,
           status = CASE WHEN o.remaining_micro_diem - s.b = 0 AND o.status IN ('active', 'paused') AND s.b > 0
                         THEN 'depleted'::offer_status ELSE o.status END,
           ended_at = CASE WHEN o.remaining_micro_diem - s.b = 0 AND o.status IN ('active', 'paused') AND s.b > 0
                           THEN s.t ELSE o.ended_at END,
           updated_at = CASE WHEN s.b > 0 THEN s.t ELSE o.updated_at END
      FROM (SELECT d.offer, sum(d.amount)::bigint AS m,
                   COALESCE((SELECT sum(i.burn) FROM unnest(v) i WHERE i.clear IS NOT NULL AND i.offer = d.offer), 0)::bigint AS b,
                   (SELECT max(i.now) FROM unnest(v) i) AS t
              FROM unnest(e_offer, e_amount) AS d(offer, amount) GROUP BY d.offer) s
     WHERE o.id = s.offer AND o.reserved_micro_diem >= s.m AND o.remaining_micro_diem >= s.b;
    GET DIAGNOSTICS c = ROW_COUNT;
    IF c <> (SELECT count(DISTINCT x) FROM unnest(e_offer) x) THEN
      RAISE EXCEPTION 'end: an offer is short' USING ERRCODE = 'P0001';
    END IF;
  END IF;
  UPDATE upstream_keys k SET last_balance_micro_diem = GREATEST(k.last_balance_micro_diem - s.b, 0)
    FROM (SELECT i.key, sum(i.burn)::bigint AS b FROM unnest(v) i WHERE i.clear IS NOT NULL AND i.burn > 0
           GROUP BY i.key ORDER BY i.key) s
   WHERE k.id = s.key AND k.last_balance_micro_diem IS NOT NULL;
  UPDATE accounts a SET supplier_payable_micro_usdc = a.supplier_payable_micro_usdc + s.p
    FROM (SELECT i.supplier, sum(i.share)::bigint AS p FROM unnest(v) i WHERE i.clear IS NOT NULL
           GROUP BY i.supplier HAVING sum(i.share) > 0) s
   WHERE a.id = s.supplier;
  RETURN QUERY
    SELECT (x.o - 1)::integer, a.confirmed_micro_usdc
      FROM unnest(v) WITH ORDINALITY AS x(request, support, account, api_key, route, model, stream, status, error_code,
                                         ceiling, admitted, attempt_count, started, first_byte, now, offer, key, supplier,
                                         price, burn, gross, fee, share, clear, journal, prompt, completion, cached,
                                         buyer_holder, offer_holder, returns, attempts, o)
      JOIN accounts a ON a.id = x.account;
END $$;

-- A group commit: items are JSON objects with svc_end_item's fields.
CREATE FUNCTION svc_end_batch(p_items jsonb)
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY
    SELECT * FROM svc_end_items(ARRAY(SELECT x FROM jsonb_populate_recordset(NULL::svc_end_item, p_items) x));
END $$;

-- The sweeper: gives back every slice of holders whose lease expired (their process died), up to
-- p_limit holders at a time, or of the one holder p_holder (a process closing cleanly). Holders
-- another sweeper is releasing are skipped; a lease renewed before the lock is taken is kept.
-- Lock order as everywhere: buyers, offers, each in id order.
CREATE FUNCTION svc_release_expired(p_now timestamptz, p_limit integer, p_holder uuid DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  h uuid[];
BEGIN
  SELECT array_agg(x.id) INTO h FROM (
    SELECT e.id FROM escrow_holders e
     WHERE (p_holder IS NULL AND e.expires_at < p_now) OR e.id = p_holder
     ORDER BY e.id LIMIT p_limit FOR UPDATE SKIP LOCKED) x;
  IF h IS NULL THEN
    RETURN 0;
  END IF;
  PERFORM 1 FROM accounts a WHERE a.id IN (SELECT b.account_id FROM buyer_escrows b WHERE b.holder = ANY(h))
   ORDER BY a.id FOR NO KEY UPDATE;
  WITH d AS (DELETE FROM buyer_escrows b WHERE b.holder = ANY(h) RETURNING b.account_id, b.amount_micro_usdc)
  UPDATE accounts a SET reserved_micro_usdc = a.reserved_micro_usdc - s.m
    FROM (SELECT d.account_id, sum(d.amount_micro_usdc)::bigint AS m FROM d GROUP BY d.account_id) s
   WHERE a.id = s.account_id;
  PERFORM 1 FROM offers o WHERE o.id IN (SELECT b.offer_id FROM offer_escrows b WHERE b.holder = ANY(h))
   ORDER BY o.id FOR NO KEY UPDATE;
  WITH d AS (DELETE FROM offer_escrows b WHERE b.holder = ANY(h) RETURNING b.offer_id, b.amount_micro_diem)
  UPDATE offers o SET reserved_micro_diem = o.reserved_micro_diem - s.m
    FROM (SELECT d.offer_id, sum(d.amount_micro_diem)::bigint AS m FROM d GROUP BY d.offer_id) s
   WHERE o.id = s.offer_id;
  DELETE FROM escrow_holders e WHERE e.id = ANY(h);
  RETURN cardinality(h);
END $$;
