-- Each escrow slice counts what its holder's unfolded clears charged it (docs/decisions.md "One
-- append per clear", "Slices count their charges"). The append adds a charge to its slice, guarded by
-- what the slice holds (amount - charged), and the fold takes it out of both: so a slice covers its
-- unfolded charges by a CHECK, the append reads no other clear, and a buyer's or an offer's unfolded
-- part is the sum of its slices' counts (a primary-key range) instead of a scan of the unfolded clears.
-- Slices holding unfolded clears when this runs start with those clears' sums (the same rule as
-- svc_unfolded, written out: functions are applied after the migrations).
ALTER TABLE "buyer_escrows" ADD COLUMN "charged_micro_usdc" BIGINT NOT NULL DEFAULT 0;
ALTER TABLE "offer_escrows" ADD COLUMN "charged_micro_diem" BIGINT NOT NULL DEFAULT 0;

UPDATE "buyer_escrows" e SET "charged_micro_usdc" = s.gross
  FROM (SELECT x.buyer_account_id AS account, x.holder, sum(x.gross_micro_usdc)::bigint AS gross
          FROM escrow_holders h
          JOIN clears x ON x.holder = h.id AND x.seq > h.folded_seq AND x.created_at >= h.folded_through - interval '1 day'
         WHERE x.payment_id IS NULL
         GROUP BY 1, 2) s
 WHERE e.account_id = s.account AND e.holder = s.holder;

UPDATE "offer_escrows" e SET "charged_micro_diem" = s.burn
  FROM (SELECT x.offer_id AS offer, x.holder, sum(x.burn_micro_diem)::bigint AS burn
          FROM escrow_holders h
          JOIN clears x ON x.holder = h.id AND x.seq > h.folded_seq AND x.created_at >= h.folded_through - interval '1 day'
         GROUP BY 1, 2) s
 WHERE e.offer_id = s.offer AND e.holder = s.holder;

ALTER TABLE "buyer_escrows" ADD CONSTRAINT "buyer_escrows_charged_check"
  CHECK ("charged_micro_usdc" >= 0 AND "charged_micro_usdc" <= "amount_micro_usdc");
ALTER TABLE "offer_escrows" ADD CONSTRAINT "offer_escrows_charged_check"
  CHECK ("charged_micro_diem" >= 0 AND "charged_micro_diem" <= "amount_micro_diem");
