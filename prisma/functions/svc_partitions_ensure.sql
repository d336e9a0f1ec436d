-- Monthly partitions of the tables that gain a row per request (docs/decisions.md "Monthly partitions
-- and retention"; migration monthly_partitions): `inference_requests` by started_at, `clears` by
-- created_at, one partition per UTC month named <table>_yYYYYmMM, below them <table>_before (FROM
-- MINVALUE, for anything older) and a DEFAULT partition that takes any row no month takes, so an
-- insert never fails for want of a partition.
--
-- Creates the partitions of the month of `p_now` and the `p_ahead` months after it when missing, of
-- any month between the newest existing one and those (a gap after a long stop: months stay
-- contiguous, so reads bounded within them prune the DEFAULT partition), and of every month that has
-- rows in the DEFAULT partition (moved into their month, so the default stays empty). Returns the
-- partitions it created. Run at start-up (runMigrations) and daily by the maintenance worker;
-- idempotent, serialised by an advisory lock.
--
-- Locks: a new month is made as a table of its own, then ATTACHed: SHARE UPDATE EXCLUSIVE on the
-- parent (inserts and reads go on) and a brief ACCESS EXCLUSIVE on the (empty) default partition,
-- whose scan proves it holds no row of the new range. Only when the default holds rows (the job did
-- not run for months) is the default detached and its rows re-inserted, under ACCESS EXCLUSIVE on
-- the parent. A lock not granted within lock_timeout fails the call, to be run again later; nothing
-- queues behind it.
CREATE OR REPLACE FUNCTION svc_partitions_ensure(p_now timestamptz DEFAULT now(), p_ahead integer DEFAULT 3)
RETURNS SETOF text
LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  t record;
  m date;
  first_month date := date_trunc('month', p_now AT TIME ZONE 'UTC')::date;
  wanted date[];
  have date[];
  floor_month date;
  missing date[];
  moving boolean;
  cols text;
  part text;
BEGIN
  IF p_ahead < 0 OR p_ahead > 36 THEN
    RAISE EXCEPTION 'svc_partitions_ensure: ahead must be 0-36 months, got %', p_ahead;
  END IF;
  -- ASCII "svcp": one caller at a time; the next sees what the first created
  PERFORM pg_advisory_xact_lock(1937138544);
  FOR t IN SELECT * FROM (VALUES ('inference_requests', 'started_at'), ('clears', 'created_at')) AS x(tbl, col) LOOP
    -- the months already attached (by their lower bound, whatever their name)
    SELECT COALESCE(array_agg(date_trunc('month', (b[1]::timestamptz) AT TIME ZONE 'UTC')::date), '{}')
      INTO have
      FROM pg_inherits i
      JOIN pg_class c ON c.oid = i.inhrelid
      CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)') AS b
     WHERE i.inhparent = t.tbl::regclass AND b IS NOT NULL;
    -- the upper bound of <table>_before: no month below it is made
    SELECT date_trunc('month', (b[1]::timestamptz) AT TIME ZONE 'UTC')::date INTO floor_month
      FROM pg_inherits i
      JOIN pg_class c ON c.oid = i.inhrelid
      CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(MINVALUE\) TO \(''([^'']+)''\)') AS b
     WHERE i.inhparent = t.tbl::regclass AND b IS NOT NULL;
    SELECT array_agg(g::date) INTO wanted
      FROM generate_series(LEAST(first_month, COALESCE((SELECT (max(x) + interval '1 month')::date FROM unnest(have) x), first_month)),
                           first_month + make_interval(months => p_ahead), interval '1 month') g;
    EXECUTE format('SELECT COALESCE(array_agg(DISTINCT date_trunc(''month'', %I AT TIME ZONE ''UTC'')::date), ''{}'') FROM %I',
                   t.col, t.tbl || '_default')
       INTO missing;
    moving := cardinality(missing) > 0;
    SELECT COALESCE(array_agg(DISTINCT x ORDER BY x), '{}') INTO missing
      FROM unnest(wanted || missing) x WHERE x <> ALL (have) AND (floor_month IS NULL OR x >= floor_month);
    IF cardinality(missing) = 0 THEN
      CONTINUE;
    END IF;
    IF moving THEN
      -- rows wait in the default: it leaves with them, a new empty default takes its place, and they
      -- are routed again once their months exist
      EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', t.tbl, t.tbl || '_default');
      EXECUTE format('ALTER TABLE %I RENAME TO %I', t.tbl || '_default', t.tbl || '_default_moving');
      EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t.tbl || '_default', t.tbl);
    END IF;
    FOREACH m IN ARRAY missing LOOP
      part := t.tbl || '_y' || to_char(m, 'YYYY') || 'm' || to_char(m, 'MM');
      IF to_regclass(part) IS NOT NULL THEN
        -- a table by that name that is not attached: a detached month retention has not dropped yet
        RAISE EXCEPTION 'svc_partitions_ensure: % exists but is not a partition of %', part, t.tbl;
      END IF;
      EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)',
                     part, t.tbl);
      EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', t.tbl, part,
                     to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00',
                     to_char((m + interval '1 month')::date, 'YYYY-MM-DD') || ' 00:00:00+00');
      RETURN NEXT part;
    END LOOP;
    IF moving THEN
      SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
        FROM pg_attribute a WHERE a.attrelid = t.tbl::regclass AND a.attnum > 0 AND NOT a.attisdropped;
      EXECUTE format('INSERT INTO %I (%s) SELECT %s FROM %I', t.tbl, cols, cols, t.tbl || '_default_moving');
      EXECUTE format('DROP TABLE %I', t.tbl || '_default_moving');
    END IF;
  END LOOP;
END $$;
