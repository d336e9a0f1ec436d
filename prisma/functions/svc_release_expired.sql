-- The sweeper: gives back every slice of holders whose lease expired (their process died), up to
-- p_limit holders at a time, or of the one holder p_holder (a process closing cleanly). Holders
-- another sweeper is releasing are skipped; a lease renewed before the lock is taken is kept.
-- Each holder's unfolded clears are folded first (svc_fold_holder: crash recovery, the charges of a
-- process that died are applied from what it appended), then its slices go back. Lock order as
-- everywhere: holders, buyers, offers, each in id order. A fold takes the holder's fold lock and
-- then its row, so the sweeper never waits for a fold lock while it holds rows: an expired holder
-- whose fold lock is taken (a fold or an append of it running) is passed over until the next
-- sweep, and a closing holder's fold lock is taken before its row, as a fold takes them (waiting
-- for the one while holding the other deadlocked with a fold of the same holder).
-- Caller: src/domain/inference/escrow/escrow.ts.
CREATE OR REPLACE FUNCTION svc_release_expired(p_now timestamptz, p_limit integer, p_holder uuid DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  h uuid[];
BEGIN
  IF p_holder IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(svc_fold_key(p_holder));
  END IF;
  SELECT array_agg(x.id ORDER BY x.id) INTO h FROM (
    SELECT e.id FROM escrow_holders e
     WHERE (p_holder IS NULL AND e.expires_at < p_now) OR e.id = p_holder
     ORDER BY e.id LIMIT p_limit FOR UPDATE SKIP LOCKED) x
   WHERE x.id = p_holder OR pg_try_advisory_xact_lock(svc_fold_key(x.id));
  IF h IS NULL THEN
    RETURN 0;
  END IF;
  PERFORM svc_fold_holder(x) FROM unnest(h) AS x ORDER BY x;
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
