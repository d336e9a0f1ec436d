-- Data that grows for years (docs/decisions.md "Monthly partitions and retention"): the two tables
-- that gain a row per request, `inference_requests` (by `started_at`) and `clears` (by `created_at`),
-- become native RANGE-partitioned tables with one partition per UTC month, one for anything older and
-- a DEFAULT partition that catches a row no month partition takes (the maintenance job creates months
-- ahead, so it stays empty; svc_partitions_ensure moves anything found there into its month), so an
-- insert never fails for want of a partition. Existing rows are carried:
-- each table is rebuilt partitioned beside the old one, the rows are copied, the old table dropped
-- and the new one takes its name, with the old one's columns, defaults, CHECKs, comments, indexes,
-- triggers and outgoing foreign keys (read from the catalog, so what another migration added before
-- this one is carried too).
--
-- A primary or unique key of a partitioned table must contain the partition key:
--   inference_requests: PRIMARY KEY (id, started_at); UNIQUE (support_reference, started_at)
--   clears:             PRIMARY KEY (id, created_at); request_id and payment_id indexed, not unique
-- and no foreign key can reference a partitioned table by `id` alone, so the three that did go:
--   clears.request_id -> inference_requests, video_jobs.request_id -> inference_requests,
--   ledger_transactions.clear_id -> clears.
-- What they guaranteed is kept by the one writer of both tables: svc_end_items inserts a request and
-- its clear (and a video job) in one statement, so neither exists without the other; a second ending
-- of one request collides on the request's key (same id, same start); a payment funds one clear
-- because the ending takes it from `open` to `charged`; a journal naming a clear (refund, release,
-- rehold) is written by code that has just locked that clear's row. A retained month's clears and
-- requests are dropped while the journals and video jobs that named them stay (see below), which a
-- foreign key could not allow either.
--
-- Retention (RETENTION_MONTHS, src/domain/maintenance/retention.ts) closes a month before it drops
-- its partitions: `ledger_closings` holds one line per account and book (and the platform's fee) that
-- sums that month's clear lines, in the view `ledger_lines` beside them, so every balance derived
-- from the ledger stays exact; `clear_closings` holds what the buyer savings and market statistics
-- summed over those clears; `retention_months` records how far each month's retention went.

-- a closing line's kinds (the view casts text: a value added in a transaction is not usable in it)
ALTER TYPE "ledger_transaction_kind" ADD VALUE IF NOT EXISTS 'closing';
ALTER TYPE "ledger_entry_kind" ADD VALUE IF NOT EXISTS 'closing';

-- What is rebuilt, read from the catalog before anything moves: indexes (but the keys, redefined
-- below), triggers and outgoing foreign keys of both tables.
CREATE TEMP TABLE "_partition_ddl" ("seq" serial, "sql" text NOT NULL);
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT i.indexrelid::regclass::text AS name, i.indisunique AS uniq, pg_get_indexdef(i.indexrelid) AS def
      FROM pg_index i
     WHERE i.indrelid IN ('"inference_requests"'::regclass, '"clears"'::regclass)
     ORDER BY 1
  LOOP
    IF r.name IN ('inference_requests_pkey', 'inference_requests_support_reference_key', 'clears_pkey',
                  'clears_request_id_key', 'clears_payment_id_key', 'inference_requests_account_id_started_at_idx') THEN
      CONTINUE; -- redefined below
    END IF;
    IF r.uniq THEN
      -- a unique key must gain the partition key: a new one needs a decision, not a guess
      RAISE EXCEPTION 'monthly_partitions: unexpected unique index %', r.name;
    END IF;
    INSERT INTO "_partition_ddl" ("sql") VALUES (r.def);
  END LOOP;
  FOR r IN
    SELECT t.tgname, pg_get_triggerdef(t.oid) AS def
      FROM pg_trigger t
     WHERE t.tgrelid IN ('"inference_requests"'::regclass, '"clears"'::regclass) AND NOT t.tgisinternal
     ORDER BY t.tgname
  LOOP
    INSERT INTO "_partition_ddl" ("sql") VALUES (r.def);
  END LOOP;
  FOR r IN
    SELECT c.conname, c.conrelid::regclass::text AS tbl, pg_get_constraintdef(c.oid) AS def
      FROM pg_constraint c
     WHERE c.contype = 'f' AND c.conrelid IN ('"inference_requests"'::regclass, '"clears"'::regclass)
       AND c.confrelid NOT IN ('"inference_requests"'::regclass, '"clears"'::regclass)
     ORDER BY c.conname
  LOOP
    INSERT INTO "_partition_ddl" ("sql") VALUES (format('ALTER TABLE %s ADD CONSTRAINT %I %s', r.tbl, r.conname, r.def));
  END LOOP;
  -- foreign keys that reference the two tables: the three known ones go (above); any other stops here
  FOR r IN
    SELECT c.conname FROM pg_constraint c
     WHERE c.contype = 'f' AND c.confrelid IN ('"inference_requests"'::regclass, '"clears"'::regclass)
       AND c.conname NOT IN ('clears_request_id_fkey', 'video_jobs_request_id_fkey', 'ledger_transactions_clear_id_fkey')
  LOOP
    RAISE EXCEPTION 'monthly_partitions: unexpected foreign key % references a partitioned table', r.conname;
  END LOOP;
END $$;

ALTER TABLE "clears" DROP CONSTRAINT "clears_request_id_fkey";
ALTER TABLE "video_jobs" DROP CONSTRAINT "video_jobs_request_id_fkey";
ALTER TABLE "ledger_transactions" DROP CONSTRAINT "ledger_transactions_clear_id_fkey";
DROP VIEW "ledger_lines";

ALTER TABLE "inference_requests" RENAME TO "inference_requests_unpartitioned";
ALTER TABLE "clears" RENAME TO "clears_unpartitioned";

CREATE TABLE "inference_requests" (
  LIKE "inference_requests_unpartitioned"
  INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMMENTS INCLUDING STORAGE INCLUDING COMPRESSION
  INCLUDING GENERATED INCLUDING IDENTITY
) PARTITION BY RANGE ("started_at");
CREATE TABLE "clears" (
  LIKE "clears_unpartitioned"
  INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMMENTS INCLUDING STORAGE INCLUDING COMPRESSION
  INCLUDING GENERATED INCLUDING IDENTITY
) PARTITION BY RANGE ("created_at");

-- One partition per UTC month from the oldest row's month to the month after this one (the
-- maintenance job, svc_partitions_ensure, keeps creating months ahead); below them a partition that
-- takes anything older (FROM MINVALUE: normally empty; retention moves its bound up as it drops
-- months), and a DEFAULT partition that takes anything no month takes (a start beyond the months
-- made ahead). With both, every value has a partition, and a read bounded above by a time within the
-- months made ahead prunes the DEFAULT partition at planning, which keeps the partitions in order for
-- the planner: a newest-first page reads the newest month first and stops there.
-- Partition names: <table>_yYYYYmMM, <table>_before, <table>_default.
DO $$
DECLARE
  t record;
  m date;
  last_month date := (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month')::date;
BEGIN
  FOR t IN SELECT * FROM (VALUES ('inference_requests', 'started_at'), ('clears', 'created_at')) AS x(tbl, col) LOOP
    EXECUTE format('SELECT COALESCE(min(date_trunc(''month'', %I AT TIME ZONE ''UTC''))::date, %L::date) FROM %I',
                   t.col, date_trunc('month', now() AT TIME ZONE 'UTC')::date, t.tbl || '_unpartitioned') INTO m;
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (MINVALUE) TO (%L)',
                   t.tbl || '_before', t.tbl, to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00');
    WHILE m <= last_month LOOP
      EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                     t.tbl || '_y' || to_char(m, 'YYYY') || 'm' || to_char(m, 'MM'), t.tbl,
                     to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00',
                     to_char((m + interval '1 month')::date, 'YYYY-MM-DD') || ' 00:00:00+00');
      m := (m + interval '1 month')::date;
    END LOOP;
    EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t.tbl || '_default', t.tbl);
  END LOOP;
END $$;

-- the rows, then the keys and indexes (built once over the loaded rows, faster than row by row)
INSERT INTO "inference_requests" SELECT * FROM "inference_requests_unpartitioned";
INSERT INTO "clears" SELECT * FROM "clears_unpartitioned";
DROP TABLE "inference_requests_unpartitioned";
DROP TABLE "clears_unpartitioned";

ALTER TABLE "inference_requests" ADD CONSTRAINT "inference_requests_pkey" PRIMARY KEY ("id", "started_at");
-- a support reference is looked up with its month when it carries one (a v7 uuid: its time is the
-- request's start), else in every partition
ALTER TABLE "inference_requests"
  ADD CONSTRAINT "inference_requests_support_reference_started_at_key" UNIQUE ("support_reference", "started_at");
-- the buyer's history page: newest first on (started_at, id), the keyset its cursor holds
CREATE INDEX "inference_requests_account_id_started_at_id_idx"
  ON "inference_requests" ("account_id", "started_at" DESC, "id" DESC);
ALTER TABLE "clears" ADD CONSTRAINT "clears_pkey" PRIMARY KEY ("id", "created_at");
CREATE INDEX "clears_request_id_idx" ON "clears" ("request_id");
CREATE INDEX "clears_payment_id_idx" ON "clears" ("payment_id") WHERE "payment_id" IS NOT NULL;

DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT "sql" FROM "_partition_ddl" ORDER BY "seq" LOOP
    EXECUTE r."sql";
  END LOOP;
END $$;
DROP TABLE "_partition_ddl";

-- ───────────────────────────── closings ─────────────────────────────

-- One line per retained month, account and book: the sum of that month's clear lines on it (the
-- platform's fee: no account). Written in the transaction that detaches the month's partitions, so
-- `ledger_lines` holds either the month's clear lines or its closing, never both, never neither.
CREATE TABLE "ledger_closings" (
  -- md5('closing:<month>:<account or platform>:<book>') as a uuid: the same on every read
  "id" UUID NOT NULL,
  -- the first day of the closed month (UTC)
  "month" DATE NOT NULL,
  "account_id" UUID,
  "book" "ledger_book" NOT NULL,
  "amount_micro_usdc" BIGINT NOT NULL,
  -- how many clear lines it stands for
  "lines" BIGINT NOT NULL,
  -- the last millisecond of the month: where its lines were, in (created_at, id) order
  "created_at" TIMESTAMPTZ(3) NOT NULL,
  CONSTRAINT "ledger_closings_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "ledger_closings_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE,
  CONSTRAINT "ledger_closings_month_first_day" CHECK (date_trunc('month', "month") = "month"),
  CONSTRAINT "ledger_closings_account_book" CHECK (
    ("book"::text IN ('buyer_confirmed', 'supplier_payable', 'supplier_held', 'payment_receivable') AND "account_id" IS NOT NULL)
    OR ("book"::text = 'platform_fee' AND "account_id" IS NULL)),
  CONSTRAINT "ledger_closings_lines_positive" CHECK ("lines" > 0)
);
CREATE UNIQUE INDEX "ledger_closings_month_account_id_book_key"
  ON "ledger_closings" ("month", "account_id", "book") NULLS NOT DISTINCT;
CREATE INDEX "ledger_closings_account_id_created_at_idx" ON "ledger_closings" ("account_id", "created_at");
CREATE TRIGGER "ledger_closings_append_only" BEFORE UPDATE OR DELETE ON "ledger_closings"
  FOR EACH ROW EXECUTE FUNCTION "ledger_forbid_mutation"();

-- What a retained month's unrefunded clears summed per buyer, for the figures that read every clear:
-- a buyer's savings (GET /v1/account/savings) and the market's (GET /v1/market/stats).
CREATE TABLE "clear_closings" (
  "month" DATE NOT NULL,
  "buyer_account_id" UUID NOT NULL,
  "clears" BIGINT NOT NULL,
  "burn_micro_diem" BIGINT NOT NULL,
  -- sum over the clears of (burn * ceiling_cents) / 100, each rounded down as the savings read it
  "at_ceiling_micro_usdc" BIGINT NOT NULL,
  "gross_micro_usdc" BIGINT NOT NULL,
  CONSTRAINT "clear_closings_pkey" PRIMARY KEY ("buyer_account_id", "month"),
  CONSTRAINT "clear_closings_buyer_account_id_fkey" FOREIGN KEY ("buyer_account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE,
  CONSTRAINT "clear_closings_month_first_day" CHECK (date_trunc('month', "month") = "month")
);
CREATE TRIGGER "clear_closings_append_only" BEFORE UPDATE OR DELETE ON "clear_closings"
  FOR EACH ROW EXECUTE FUNCTION "ledger_forbid_mutation"();

-- How far each month's retention went: closed (closings written, partitions detached, one
-- transaction), exported (each detached partition written to a CSV file and fsynced), dropped. A
-- run resumes a month from its state; `blocked` says why a month could not be closed yet.
CREATE TABLE "retention_months" (
  "month" DATE NOT NULL,
  "state" TEXT NOT NULL,
  "blocked_reason" TEXT,
  -- rows of each table when closed: {"inference_requests": n, "clears": n}
  "rows" JSONB NOT NULL DEFAULT '{}',
  -- [{table, file, rows, bytes, sha256}] once exported
  "files" JSONB NOT NULL DEFAULT '[]',
  "closed_at" TIMESTAMPTZ(3),
  "exported_at" TIMESTAMPTZ(3),
  "dropped_at" TIMESTAMPTZ(3),
  "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "retention_months_pkey" PRIMARY KEY ("month"),
  CONSTRAINT "retention_months_state" CHECK ("state" IN ('blocked', 'closed', 'exported', 'dropped')),
  CONSTRAINT "retention_months_month_first_day" CHECK (date_trunc('month', "month") = "month")
);

-- The whole ledger: the written entries, the lines each clear implies, and the closing lines of
-- retained months (what their clears' lines summed per account and book).
CREATE VIEW "ledger_lines" AS
SELECT e."id", e."transaction_id", t."kind" AS "transaction_kind", e."account_id", e."book", e."kind",
       e."amount_micro_usdc", e."created_at"
  FROM "ledger_entries" e
  JOIN "ledger_transactions" t ON t."id" = e."transaction_id"
UNION ALL
SELECT md5(c."id"::text || ':buyer')::uuid, c."id", 'clear'::"ledger_transaction_kind", c."buyer_account_id",
       (CASE WHEN c."payment_id" IS NULL THEN 'buyer_confirmed'::text ELSE 'payment_receivable'::text END)::"ledger_book",
       'buyer_debit'::"ledger_entry_kind", -c."gross_micro_usdc", c."created_at"
  FROM "clears" c WHERE c."gross_micro_usdc" > 0
UNION ALL
SELECT md5(c."id"::text || ':supplier')::uuid, c."id", 'clear'::"ledger_transaction_kind", c."supplier_account_id",
       (CASE WHEN c."supplier_held" THEN 'supplier_held'::text ELSE 'supplier_payable'::text END)::"ledger_book",
       'supplier_credit'::"ledger_entry_kind", c."supplier_micro_usdc", c."created_at"
  FROM "clears" c WHERE c."supplier_micro_usdc" > 0
UNION ALL
SELECT md5(c."id"::text || ':fee')::uuid, c."id", 'clear'::"ledger_transaction_kind", NULL::uuid,
       'platform_fee'::"ledger_book", 'platform_fee'::"ledger_entry_kind", c."fee_micro_usdc", c."created_at"
  FROM "clears" c WHERE c."fee_micro_usdc" > 0
UNION ALL
SELECT k."id", md5('closing:' || k."month"::text)::uuid, ('closing'::text)::"ledger_transaction_kind", k."account_id",
       k."book", ('closing'::text)::"ledger_entry_kind", k."amount_micro_usdc", k."created_at"
  FROM "ledger_closings" k;

ANALYZE "inference_requests";
ANALYZE "clears";
