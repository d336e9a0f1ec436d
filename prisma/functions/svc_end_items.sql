-- THE append: the record of one ended request or many, in one statement (docs/decisions.md "One
-- append per clear"). Each item (the composite type svc_end_item, which is schema: migrations define
-- it; its fields are pinned to EndItemRow in src/domain/inference/settlement/end-item-row.ts by
-- test/integration/inference/settlement-contract.test.ts) gets its request record (with its modality
-- and its attempts, a column of it); a charged item its clear, which is its transfer record: the
-- double-entry lines (buyer debit = supplier credit + platform fee) derive from it (view
-- ledger_lines; clears_split keeps it balanced). The clear carries its escrow holder (the process
-- whose slices fund it), a seq from clear_seq, its API key and the request's start day: the holder's
-- fold (svc_fold_holder) applies it to the hot rows later (balance, offer, supplier key, payable, key
-- spend), and until then every reader adds it through the live figures (svc_unfolded). So the append
-- writes no hot row and, without give-backs, locks no row but its own (its holder's slices, the
-- request's payment and key hold): no foreign key names the accounts, keys and offers it records, so
-- no check locks them. It holds each holder's fold lock shared (svc_fold_key: an advisory lock, which
-- writes nothing), which a fold takes alone, and refuses an item whose holder is gone (its slices
-- were swept: a stalled process cannot charge against them) or whose time is a day older than the
-- holder's last fold (so lookups of unfolded clears read the newest months only).
-- A queued video job (`video`: id, queue_id, upstream_queue_id, upstream_quote, body, download_url)
-- gets its video_jobs row in the same statement as its charge, and its supplier share is held
-- (clears.supplier_held: payable only once the job is final, docs/decisions.md "Payout hold"). A
-- request paid per request (`payment`: its request_payments row) takes nothing from a buyer slice:
-- its clear names the payment (its buyer line is on the payment's receivable, view ledger_lines) and
-- the payment, still open, takes the charge (status charged, charge_micro_usdc = gross <= its
-- maximum); any other state, another account or a charge above the maximum raises. A request's key
-- budget hold ends here (deleted; a charge above it raises): its charge counts in the key's spend as
-- the unfolded clear (svc_key_spend). `returns` lists slice parts given back (a slice that does not
-- linger): [{"holder", "account" | "offer", "amount"}] (amounts as strings); those move reserved
-- balances, as svc_escrow_give_back does (at most what the slice holds live, so it always covers the
-- holder's unfolded clears, this statement's included). `attempts`: [{"ordinal", "key", "offer", "price",
-- "outcome", "status", "detail", "started", "ended"}]. Any guard that fails raises and the whole set
-- rolls back (the caller then retries item by item, so one bad item fails alone). Returns each item's
-- index (0-based) and its buyer's live confirmed balance afterwards. Generic plans from the first
-- call: custom planning of these statements cost more than running them.
CREATE OR REPLACE FUNCTION svc_end_items(v svc_end_item[])
RETURNS TABLE (idx integer, confirmed bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  n integer := cardinality(v);
  c integer;
  k integer;
  d_account uuid[];
  d_holder uuid[];
  d_amount bigint[];
  e_offer uuid[];
  e_holder uuid[];
  e_amount bigint[];
  h_ids uuid[];
  paid integer;
  twice boolean;
  unbalanced boolean;
  two_holders boolean;
  unnamed boolean;
  video_uncharged boolean;
  any_video boolean;
  any_returns boolean;
  any_charge boolean;
  stale boolean;
  over_hold boolean;
BEGIN
  -- one pass over the items: what is wrong with them (raised below, in this order) and what they
  -- hold (a statement each costs the lone ending more than its work: each one skipped when no item
  -- needs it). The parties the records name are read and not locked (docs/decisions.md "The append
  -- names its parties without locking them"): no foreign key names them, so the append takes no row
  -- lock and writes nothing for them; they are never deleted (their DELETE triggers), so what is read
  -- holds
  SELECT n > 1 AND count(DISTINCT i.request) <> n,
         COALESCE(bool_or(i.clear IS NOT NULL
                          AND ((i.buyer_holder IS NULL) = (i.payment IS NULL) OR i.offer_holder IS NULL OR i.gross < 0
                               OR i.burn < 0 OR i.fee + i.share <> i.gross)), false),
         COALESCE(bool_or(i.clear IS NOT NULL AND i.buyer_holder <> i.offer_holder), false),
         array_agg(DISTINCT i.offer_holder ORDER BY i.offer_holder) FILTER (WHERE i.clear IS NOT NULL),
         COALESCE(bool_or(NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = i.account)
                          OR (i.api_key IS NOT NULL
                              AND NOT EXISTS (SELECT 1 FROM api_keys ak WHERE ak.id = i.api_key AND ak.account_id = i.account))
                          OR (i.clear IS NOT NULL
                              AND NOT EXISTS (SELECT 1 FROM offers o
                                               WHERE o.id = i.offer AND o.account_id = i.supplier AND o.upstream_key_id = i.key))),
                  false),
         count(*) FILTER (WHERE i.clear IS NOT NULL AND i.payment IS NOT NULL),
         COALESCE(bool_or(i.video IS NOT NULL AND i.clear IS NULL), false),
         COALESCE(bool_or(i.video IS NOT NULL), false),
         COALESCE(bool_or(i.returns IS NOT NULL AND i.returns <> '[]'::jsonb), false),
         COALESCE(bool_or(i.clear IS NOT NULL), false)
    INTO twice, unbalanced, two_holders, h_ids, unnamed, paid, video_uncharged, any_video, any_returns, any_charge
    FROM unnest(v) i;
  IF twice THEN
    RAISE EXCEPTION 'end: a request appears twice in one batch' USING ERRCODE = 'P0001';
  END IF;
  IF unbalanced THEN
    RAISE EXCEPTION 'end: a charge without its slices or not balanced' USING ERRCODE = 'P0001';
  END IF;
  IF two_holders THEN
    RAISE EXCEPTION 'end: a charge funded by two holders' USING ERRCODE = 'P0001';
  END IF;
  -- the holders funding the charges: each one's fold lock, shared (svc_fold_holder takes it alone, so
  -- no fold of the holder runs during this statement and every later one sees its clears), then the
  -- holder must still exist (a sweeper that released it held the lock alone and committed first):
  -- read in a statement after the lock's, so its snapshot sees what such a sweeper committed
  IF h_ids IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock_shared(svc_fold_key(x)) FROM unnest(h_ids) AS x ORDER BY x;
    SELECT count(*), COALESCE(bool_or(EXISTS (SELECT 1 FROM unnest(v) i
                                               WHERE i.offer_holder = h.id AND i.clear IS NOT NULL
                                                 AND i.now < h.folded_through - interval '1 day')), false)
      INTO k, stale FROM escrow_holders h WHERE h.id = ANY(h_ids);
    IF k <> cardinality(h_ids) THEN
      RAISE EXCEPTION 'end: a charge whose holder is gone' USING ERRCODE = 'P0001';
    END IF;
    IF stale THEN
      RAISE EXCEPTION 'end: a charge a day older than its holder''s last fold' USING ERRCODE = 'P0001';
    END IF;
  END IF;
  IF unnamed THEN
    RAISE EXCEPTION 'end: a record names an account, key or offer not on record' USING ERRCODE = 'P0001';
  END IF;
  -- a payment-funded charge: the payment takes it (open, the same account, at most its maximum)
  IF paid > 0 THEN
    UPDATE request_payments p
       SET status = 'charged', charge_micro_usdc = i.gross, charged_at = i.now, updated_at = i.now
      FROM unnest(v) i
     WHERE i.clear IS NOT NULL AND p.id = i.payment AND p.status = 'open' AND p.account_id = i.account
       AND i.gross <= p.max_micro_usdc;
    GET DIAGNOSTICS k = ROW_COUNT;
    IF k <> paid THEN
      RAISE EXCEPTION 'end: a payment-funded charge its payment cannot take' USING ERRCODE = 'P0001';
    END IF;
  END IF;
  IF video_uncharged THEN
    RAISE EXCEPTION 'end: a video job without its charge' USING ERRCODE = 'P0001';
  END IF;
  -- the attempts are a column of the request (issue 32), each field cast to its type on the way in
  -- a reference that is the request id is not stored: the record is found by its id (decisions.md
  -- "The support reference is the request id")
  INSERT INTO inference_requests (id, support_reference, account_id, api_key_id, route, modality, model, stream, status,
                                  error_code, max_price_cents, clearing_price_cents, admitted_max_tokens, prompt_tokens,
                                  completion_tokens, cached_tokens, cache_write_tokens, burn_micro_diem, cost_micro_usdc,
                                  attempt_count, attempts, started_at, first_byte_at, completed_at, payment_id)
  SELECT i.request, NULLIF(i.support, i.request), i.account, i.api_key, i.route, i.modality, i.model, i.stream, i.status, i.error_code,
         i.ceiling, i.price, i.admitted, i.prompt, i.completion, i.cached, i.cache_write, i.burn, i.gross,
         i.attempt_count,
         (SELECT COALESCE(jsonb_agg(jsonb_build_object('ordinal', a.ordinal, 'upstreamKeyId', a.key, 'offerId', a.offer,
                                                       'priceCents', a.price, 'outcome', a.outcome,
                                                       'upstreamStatus', a.status, 'errorKind', a.detail,
                                                       'startedAt', a.started, 'endedAt', a.ended) ORDER BY a.ordinal),
                          '[]')
            FROM jsonb_to_recordset(COALESCE(i.attempts, '[]')) AS a(ordinal integer, key uuid, offer uuid,
                 price integer, outcome attempt_outcome, status integer, detail text, started timestamptz,
                 ended timestamptz)),
         i.started, i.first_byte, i.now, i.payment
    FROM unnest(v) i;
  INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model, modality,
                      price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc, fee_micro_usdc,
                      supplier_micro_usdc, supplier_held, payment_id, created_at, holder, seq, api_key_id, spend_day)
  SELECT i.clear, i.request, i.account, i.supplier, i.offer, i.key, i.model, i.modality, i.price, i.ceiling, i.burn,
         i.gross, i.fee, i.share, i.video IS NOT NULL, i.payment, i.now, i.offer_holder, nextval('clear_seq'),
         i.api_key, (i.started AT TIME ZONE 'UTC')::date
    FROM unnest(v) i WHERE i.clear IS NOT NULL;
  -- a queued video job is written with its charge, so a charge never exists without its job
  IF any_video THEN
    INSERT INTO video_jobs (id, request_id, account_id, upstream_key_id, model, queue_id, upstream_queue_id,
                            quote_micro_diem, upstream_quote_micro_diem, charge_micro_usdc, request_body, download_url,
                            created_at)
    SELECT (i.video->>'id')::uuid, i.request, i.account, i.key, i.model, i.video->>'queue_id',
           i.video->>'upstream_queue_id', i.burn, (i.video->>'upstream_quote')::bigint, i.gross, i.video->'body',
           i.video->>'download_url', i.now
      FROM unnest(v) i WHERE i.video IS NOT NULL;
  END IF;
  -- what the items give back of each buyer slice and each offer slice (a slice that does not linger)
  IF any_returns THEN
    SELECT array_agg(s.account ORDER BY s.account, s.holder), array_agg(s.holder ORDER BY s.account, s.holder),
           array_agg(s.amount ORDER BY s.account, s.holder)
      INTO d_account, d_holder, d_amount
      FROM (SELECT x.account, x.holder, sum(x.amount)::bigint AS amount
              FROM (SELECT (r->>'account')::uuid AS account, (r->>'holder')::uuid AS holder, (r->>'amount')::bigint AS amount
                      FROM unnest(v) i CROSS JOIN LATERAL jsonb_array_elements(COALESCE(i.returns, '[]')) r
                     WHERE r ? 'account') x
             GROUP BY x.account, x.holder HAVING sum(x.amount) > 0) s;
    SELECT array_agg(s.offer ORDER BY s.offer, s.holder), array_agg(s.holder ORDER BY s.offer, s.holder),
           array_agg(s.amount ORDER BY s.offer, s.holder)
      INTO e_offer, e_holder, e_amount
      FROM (SELECT x.offer, x.holder, sum(x.amount)::bigint AS amount
              FROM (SELECT (r->>'offer')::uuid AS offer, (r->>'holder')::uuid AS holder, (r->>'amount')::bigint AS amount
                      FROM unnest(v) i CROSS JOIN LATERAL jsonb_array_elements(COALESCE(i.returns, '[]')) r
                     WHERE r ? 'offer') x
             GROUP BY x.offer, x.holder HAVING sum(x.amount) > 0) s;
  END IF;

  -- Each charge adds to its slices' counts (buyer_escrows.charged_micro_usdc,
  -- offer_escrows.charged_micro_diem: what the holder's unfolded clears charged each), guarded by
  -- what the slice holds (amount - charged); the fold takes it out of both. So a slice covers its
  -- unfolded charges by its CHECK, and this statement reads no other clear: a slice the process counts
  -- but Postgres does not hold (a top-up lost with its asynchronous commit, a give-back whose answer
  -- was lost) fails here and nothing is charged, never a charge without its slice. The slices are the
  -- holder's own rows: one process, one batch at a time, so no other append waits on them.
  -- Give-backs lock in the order of a top-up (the accounts they touch and those the charges draw on,
  -- each slice, the offers, each slice; each set in id order); without them (the common case) the
  -- statement locks only its slices.
  IF d_account IS NOT NULL OR e_offer IS NOT NULL THEN
    PERFORM 1 FROM accounts a
     WHERE a.id = ANY(d_account)
        OR a.id IN (SELECT i.account FROM unnest(v) i WHERE i.clear IS NOT NULL AND i.payment IS NULL)
     ORDER BY a.id FOR NO KEY UPDATE;
  END IF;
  IF any_charge THEN
    WITH g AS (SELECT i.account, i.buyer_holder AS holder, sum(i.gross)::bigint AS gross
                 FROM unnest(v) i WHERE i.clear IS NOT NULL AND i.payment IS NULL
                GROUP BY 1, 2 HAVING sum(i.gross) > 0),
         u AS (UPDATE buyer_escrows e SET charged_micro_usdc = e.charged_micro_usdc + g.gross
                 FROM g WHERE e.account_id = g.account AND e.holder = g.holder
                   AND e.amount_micro_usdc - e.charged_micro_usdc >= g.gross
               RETURNING 1)
    SELECT (SELECT count(*) FROM g), (SELECT count(*) FROM u) INTO c, k;
    IF k <> c THEN
      RAISE EXCEPTION 'end: a buyer slice is missing or short' USING ERRCODE = 'P0001';
    END IF;
  END IF;
  IF d_account IS NOT NULL THEN
    UPDATE buyer_escrows e SET amount_micro_usdc = e.amount_micro_usdc - d.amount
      FROM unnest(d_account, d_holder, d_amount) AS d(account, holder, amount)
     WHERE e.account_id = d.account AND e.holder = d.holder
       AND e.amount_micro_usdc - e.charged_micro_usdc >= d.amount;
    GET DIAGNOSTICS c = ROW_COUNT;
    IF c <> cardinality(d_account) THEN
      RAISE EXCEPTION 'end: a buyer slice is missing or short' USING ERRCODE = 'P0001';
    END IF;
    DELETE FROM buyer_escrows e USING unnest(d_account, d_holder) AS d(account, holder)
     WHERE e.account_id = d.account AND e.holder = d.holder AND e.amount_micro_usdc = 0;
    UPDATE accounts a SET reserved_micro_usdc = a.reserved_micro_usdc - s.m
      FROM (SELECT d.account, sum(d.amount)::bigint AS m FROM unnest(d_account, d_amount) AS d(account, amount)
             GROUP BY d.account) s
     WHERE a.id = s.account AND a.reserved_micro_usdc >= s.m;
    GET DIAGNOSTICS c = ROW_COUNT;
    IF c <> (SELECT count(DISTINCT x) FROM unnest(d_account) x) THEN
      RAISE EXCEPTION 'end: a buyer balance is short' USING ERRCODE = 'P0001';
    END IF;
  END IF;
  IF d_account IS NOT NULL OR e_offer IS NOT NULL THEN
    PERFORM 1 FROM offers o
     WHERE o.id = ANY(e_offer) OR o.id IN (SELECT i.offer FROM unnest(v) i WHERE i.clear IS NOT NULL)
     ORDER BY o.id FOR NO KEY UPDATE;
  END IF;
  IF any_charge THEN
    WITH g AS (SELECT i.offer, i.offer_holder AS holder, sum(i.burn)::bigint AS burn
                 FROM unnest(v) i WHERE i.clear IS NOT NULL
                GROUP BY 1, 2 HAVING sum(i.burn) > 0),
         u AS (UPDATE offer_escrows e SET charged_micro_diem = e.charged_micro_diem + g.burn
                 FROM g WHERE e.offer_id = g.offer AND e.holder = g.holder
                   AND e.amount_micro_diem - e.charged_micro_diem >= g.burn
               RETURNING 1)
    SELECT (SELECT count(*) FROM g), (SELECT count(*) FROM u) INTO c, k;
    IF k <> c THEN
      RAISE EXCEPTION 'end: an offer slice is missing or short' USING ERRCODE = 'P0001';
    END IF;
  END IF;
  IF e_offer IS NOT NULL THEN
    UPDATE offer_escrows e SET amount_micro_diem = e.amount_micro_diem - d.amount
      FROM unnest(e_offer, e_holder, e_amount) AS d(offer, holder, amount)
     WHERE e.offer_id = d.offer AND e.holder = d.holder
       AND e.amount_micro_diem - e.charged_micro_diem >= d.amount;
    GET DIAGNOSTICS c = ROW_COUNT;
    IF c <> cardinality(e_offer) THEN
      RAISE EXCEPTION 'end: an offer slice is missing or short' USING ERRCODE = 'P0001';
    END IF;
    DELETE FROM offer_escrows e USING unnest(e_offer, e_holder) AS d(offer, holder)
     WHERE e.offer_id = d.offer AND e.holder = d.holder AND e.amount_micro_diem = 0;
    UPDATE offers o SET reserved_micro_diem = o.reserved_micro_diem - s.m
      FROM (SELECT d.offer, sum(d.amount)::bigint AS m FROM unnest(e_offer, e_amount) AS d(offer, amount)
             GROUP BY d.offer) s
     WHERE o.id = s.offer AND o.reserved_micro_diem >= s.m;
    GET DIAGNOSTICS c = ROW_COUNT;
    IF c <> (SELECT count(DISTINCT x) FROM unnest(e_offer) x) THEN
      RAISE EXCEPTION 'end: an offer is short' USING ERRCODE = 'P0001';
    END IF;
  END IF;
  -- key budgets (docs/decisions.md "Key budgets"): a request's hold (a key with a limit) ends with it;
  -- its charge counts toward its key's spend of the request's start day as its clear (svc_key_spend);
  -- a charge above its hold raises (and the deletion rolls back with everything else)
  WITH d AS (DELETE FROM key_budget_holds h USING unnest(v) i WHERE h.request_id = i.request
             RETURNING i.clear IS NOT NULL AND i.gross > h.amount_micro_usdc AS over)
  SELECT COALESCE(bool_or(d.over), false) INTO over_hold FROM d;
  IF over_hold THEN
    RAISE EXCEPTION 'end: a charge beyond its key budget hold' USING ERRCODE = 'P0001';
  END IF;
  -- the buyer's live confirmed balance: the row's, less its slices' unfolded charges (svc_buyer_unfolded)
  RETURN QUERY
    SELECT (x.o - 1)::integer,
           a.confirmed_micro_usdc - COALESCE((SELECT sum(u.gross) FROM svc_buyer_unfolded(x.account) u), 0)::bigint
      FROM unnest(v) WITH ORDINALITY AS x(request, support, account, api_key, route, model, stream, status, error_code,
                                         ceiling, admitted, attempt_count, started, first_byte, now, offer, key, supplier,
                                         price, burn, gross, fee, share, clear, prompt, completion, cached,
                                         buyer_holder, offer_holder, returns, attempts, modality, video, cache_write,
                                         payment, o)
      JOIN accounts a ON a.id = x.account;
END $$;
