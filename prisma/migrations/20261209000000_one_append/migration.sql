-- One append per clear (docs/decisions.md "One append per clear"). A request's ending appends its
-- request row and its clear, and nothing else: the clear carries the escrow holder whose slices fund
-- it (`holder`) and its place in one order (`seq`, from `clear_seq`), and what the fold needs to
-- apply it without reading the request (`api_key_id`, `spend_day`: the key's spend of the request's
-- start day). A holder's clears with a `seq` above its `folded_seq` are unfolded: in the books
-- already (ledger_lines derives from the clears), not yet in the hot rows (balances, offers, keys,
-- payables, key spend), which `svc_fold_holder` moves. `folded_through` is the latest `created_at`
-- the holder's last fold applied: an unfolded clear of the holder is never a day older than it (the
-- append refuses one that would be), so a lookup of the unfolded clears reads only the newest months.
-- A key budget's hold ends with the append, as before: its request's charge counts from then on as
-- an unfolded clear of the key (svc_key_spend), then in api_key_spend. Clears written before this migration have no holder: every one of them was applied
-- by the ending that wrote it, so nothing is unfolded at the start.
ALTER TABLE "clears" ADD COLUMN "holder" UUID,
                     ADD COLUMN "seq" BIGINT,
                     ADD COLUMN "api_key_id" UUID,
                     ADD COLUMN "spend_day" DATE;

CREATE SEQUENCE "clear_seq" AS BIGINT;

CREATE INDEX "clears_holder_seq_idx" ON "clears" ("holder", "seq") WHERE "holder" IS NOT NULL;

ALTER TABLE "escrow_holders" ADD COLUMN "folded_seq" BIGINT NOT NULL DEFAULT 0,
                             ADD COLUMN "folded_through" TIMESTAMPTZ(3) NOT NULL DEFAULT '-infinity';
