import type pg from "pg";

/**
 * Closing one month of the partitioned tables (retention's step 1, src/domain/maintenance/retention.ts;
 * docs/decisions.md "Monthly partitions and retention"): what may still change in it, and the one
 * transaction that sums its clear lines into closing lines and detaches its partitions.
 */

/** The partitioned tables retention retires, with their partition key. */
export const RETAINED_TABLES = [
  { table: "inference_requests", column: "started_at" },
  { table: "clears", column: "created_at" },
] as const;

export const MONTH_PARTITION = /_y(\d{4})m(\d{2})$/;

/** `<table>_yYYYYmMM`: a month's partition (svc_partitions_ensure names them so). */
export function monthPartition(table: string, month: Date): string {
  return `${table}_y${month.getUTCFullYear()}m${String(month.getUTCMonth() + 1).padStart(2, "0")}`;
}

export function monthLabel(month: Date): string {
  return month.toISOString().slice(0, 7);
}

export function addMonths(month: Date, n: number): Date {
  return new Date(Date.UTC(month.getUTCFullYear(), month.getUTCMonth() + n, 1));
}

/** The first month kept: the current UTC month less `months` whole months. */
export function retentionHorizon(now: Date, months: number): Date {
  return addMonths(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)), -months);
}

export const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** What of the month may still change: a held share, an unsettled payment, a rendering video job. */
export async function openItems(c: pg.ClientBase, month: Date): Promise<string | null> {
  const r = await c.query<{ held: string; payments: string; videos: string }>(
    `SELECT (SELECT count(*) FROM clears c
              WHERE c.created_at >= $1 AND c.created_at < $2 AND c.supplier_held AND c.refunded_at IS NULL
                AND (SELECT count(*) FROM ledger_transactions t
                      WHERE t.clear_id = c.id AND t.kind IN ('release', 'rehold')) % 2 = 0)::text AS held,
            (SELECT count(*) FROM clears c JOIN request_payments p ON p.id = c.payment_id
              WHERE c.created_at >= $1 AND c.created_at < $2 AND p.status NOT IN ('settled', 'lost'))::text AS payments,
            (SELECT count(*) FROM video_jobs v
              WHERE v.created_at < $2 AND v.status IN ('rendering', 'completed_no_media'))::text AS videos`,
    [month, addMonths(month, 1)],
  );
  const row = r.rows[0];
  const open: string[] = [];
  if (Number(row?.held ?? 0) > 0) open.push(`${row?.held} held supplier shares not yet final`);
  if (Number(row?.payments ?? 0) > 0) open.push(`${row?.payments} pay-per-request payments not yet settled or lost`);
  if (Number(row?.videos ?? 0) > 0) open.push(`${row?.videos} video jobs from before its end not yet final`);
  return open.length > 0 ? `open items: ${open.join("; ")}` : null;
}

/**
 * Step 1, one transaction: the month's partitions locked against writes, the open items checked
 * again under that lock, the closings written, the partitions detached, the partition for anything
 * older moved up to the month's end, the state recorded.
 */
export async function closeMonth(
  c: pg.ClientBase,
  month: Date,
  lockTimeoutMs = 3000,
): Promise<{ rows: Record<string, number> } | { blocked: string }> {
  const next = addMonths(month, 1);
  const day = month.toISOString().slice(0, 10);
  await c.query("BEGIN");
  try {
    const rows: Record<string, number> = {};
    const present: string[] = [];
    for (const { table } of RETAINED_TABLES) {
      const part = monthPartition(table, month);
      const attached = await c.query(
        "SELECT 1 FROM pg_inherits WHERE inhparent = $1::regclass AND inhrelid = to_regclass($2)",
        [table, part],
      );
      if (!attached.rowCount) continue;
      present.push(table);
      await c.query(`LOCK TABLE ${ident(part)} IN SHARE MODE`);
      const n = await c.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${ident(part)}`);
      rows[table] = Number(n.rows[0]?.n ?? 0);
    }
    const open = await openItems(c, month);
    if (open) {
      await c.query("ROLLBACK");
      return { blocked: open };
    }
    // the month's clear lines, as the ledger derives them (the function ledger_lines, bounded to the
    // month: its partition alone), summed per account and book; a line at the month's last
    // millisecond stands for them
    await c.query(
      `INSERT INTO ledger_closings (id, month, account_id, book, amount_micro_usdc, lines, created_at)
       SELECT md5('closing:' || $1::date::text || ':' || COALESCE(l.account_id::text, 'platform') || ':' || l.book::text)::uuid,
              $1::date, l.account_id, l.book, sum(l.amount_micro_usdc), count(*), $2::timestamptz - interval '1 millisecond'
         FROM ledger_lines(p_since => $1::timestamptz, p_until => $2::timestamptz) l
        WHERE l.transaction_kind = 'clear'
        GROUP BY l.account_id, l.book
       HAVING sum(l.amount_micro_usdc) <> 0`,
      [day, next],
    );
    // what the buyer savings and the market's read of every clear (AccountService.savings,
    // MarketService.stats): the same sums, per buyer
    await c.query(
      `INSERT INTO clear_closings (month, buyer_account_id, clears, burn_micro_diem, at_ceiling_micro_usdc, gross_micro_usdc)
       SELECT $1::date, c.buyer_account_id, count(*), sum(c.burn_micro_diem), sum((c.burn_micro_diem * c.ceiling_cents) / 100),
              sum(c.gross_micro_usdc)
         FROM clears c
        WHERE c.created_at >= $1::timestamptz AND c.created_at < $2::timestamptz AND c.refunded_at IS NULL
        GROUP BY c.buyer_account_id`,
      [day, next],
    );
    // the month's hours per model go with its clears: no statistics window reaches a retired month, and
    // the books check compares the hours with the clears kept (docs/decisions.md "Model statistics at
    // the fold")
    await c.query("DELETE FROM model_hours WHERE hour >= $1 AND hour < $2", [month, next]);
    // only now the parents' lock (ACCESS EXCLUSIVE, held to the commit): briefly, and never queued for long
    await c.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))}`);
    for (const { table } of RETAINED_TABLES) {
      if (present.includes(table)) {
        await c.query(`ALTER TABLE ${ident(table)} DETACH PARTITION ${ident(monthPartition(table, month))}`);
      }
      await raiseFloor(c, table, next);
    }
    await c.query(
      `INSERT INTO retention_months (month, state, rows, closed_at, updated_at) VALUES ($1::date, 'closed', $2, now(), now())
       ON CONFLICT (month) DO UPDATE SET state = 'closed', blocked_reason = NULL, rows = $2, closed_at = now(), updated_at = now()`,
      [day, JSON.stringify(rows)],
    );
    await c.query("COMMIT");
    return { rows };
  } catch (e) {
    await c.query("ROLLBACK").catch(() => undefined);
    throw e;
  }
}

/**
 * `<table>_before` (FROM MINVALUE) ends at `next` from now on: detached, replaced, and its rows (none,
 * normally: a row older than every month) routed again into the new one.
 */
async function raiseFloor(c: pg.ClientBase, table: string, next: Date): Promise<void> {
  const before = `${table}_before`;
  const old = `${table}_before_old`;
  const lower = await c.query(
    `SELECT 1 FROM pg_inherits i JOIN pg_class cl ON cl.oid = i.inhrelid
      CROSS JOIN LATERAL regexp_match(pg_get_expr(cl.relpartbound, cl.oid), 'FROM \\(''([^'']+)''\\)') AS b
      WHERE i.inhparent = $1::regclass AND b IS NOT NULL AND (b[1])::timestamptz < $2::timestamptz`,
    [table, next],
  );
  if (lower.rowCount) throw new Error(`retention: ${table} has a month partition below ${next.toISOString()}`);
  const cols = await c.query<{ cols: string }>(
    `SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) AS cols FROM pg_attribute
      WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`,
    [table],
  );
  const list = cols.rows[0]?.cols ?? "*";
  await c.query(`ALTER TABLE ${ident(table)} DETACH PARTITION ${ident(before)}`);
  await c.query(`ALTER TABLE ${ident(before)} RENAME TO ${ident(old)}`);
  await c.query(
    `CREATE TABLE ${ident(before)} PARTITION OF ${ident(table)} FOR VALUES FROM (MINVALUE) TO ('${next.toISOString()}')`,
  );
  await c.query(`INSERT INTO ${ident(table)} (${list}) SELECT ${list} FROM ${ident(old)}`);
  await c.query(`DROP TABLE ${ident(old)}`);
}
