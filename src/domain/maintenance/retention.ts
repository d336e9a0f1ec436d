import { join } from "node:path";
import type pg from "pg";
import { type ExportedFile, exportedFileIntact, exportTableCsv } from "../../adapters/pg-export.js";
import { type Sql, withConnection } from "../../adapters/sql.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";

/**
 * Retention of the month partitions of `inference_requests` and `clears` (docs/decisions.md
 * "Monthly partitions and retention"; docs/operations.md "Retention"). With RETENTION_MONTHS = N, a
 * month older than the current one and the N whole months before it is retired, oldest first, in
 * three recorded steps (table `retention_months`), each resumed where a crash left it:
 *
 * 1. **closed** — only once the books check passes (svc_books_check) and nothing of the month is
 *    still open (a held share not yet final, a pay-per-request payment not yet settled or lost, a
 *    video job still rendering): in ONE transaction, the month's clear lines summed per account and
 *    book into `ledger_closings` (from view `ledger_lines` itself, so the derivation stays the
 *    view's), its unrefunded clears summed per buyer into `clear_closings`, and both month partitions
 *    DETACHed; `ledger_lines` reads the closing lines from that commit on, so every balance derived
 *    from the ledger is the same before and after. The partition for anything older
 *    (`<table>_before`) is moved up to the month's end in the same transaction, so the months stay
 *    contiguous (reads prune the DEFAULT partition).
 * 2. **exported** — each detached partition written to `<RETENTION_EXPORT_DIR>/<table>/<YYYY-MM>.csv`
 *    (COPY's CSV with a header), fsynced before the state says so; its rows, bytes and sha256 recorded.
 * 3. **dropped** — the files checked whole again (size and sha256), then the detached tables dropped
 *    in the transaction that records it.
 *
 * One run at a time across every worker: a session advisory lock, taken without waiting (a second
 * worker's run returns `busy` and does nothing). Each step is also guarded by the recorded state, and
 * a closing row is unique per month, account and book.
 */

/** Where one month's retention is. */
export type RetentionState = "blocked" | "closed" | "exported" | "dropped";

export interface MonthRetention {
  /** YYYY-MM */
  month: string;
  state: RetentionState;
  /** why it could not be closed (blocked) */
  blockedReason?: string;
  /** rows each table held when the month was closed */
  rows?: Record<string, number>;
  files?: ({ table: string } & ExportedFile)[];
}

export interface RetentionRun {
  /** RETENTION_MONTHS is set */
  enabled: boolean;
  /** another worker holds the retention lock: this run did nothing */
  skipped?: "busy";
  /** months before this one (YYYY-MM) are retired */
  horizon?: string;
  /** what this run did, month by month, oldest first (it stops at a blocked month) */
  months: MonthRetention[];
}

export interface RetentionDeps {
  sql: Sql;
  clock: Clock;
  /** RETENTION_MONTHS; undefined: keep every month */
  months: number | undefined;
  /** RETENTION_EXPORT_DIR */
  exportDir: string;
  /** called after each step has committed (tests make a crash there by throwing) */
  afterStep?: (month: string, state: RetentionState) => void | Promise<void>;
  /** how long the detach waits for the tables' lock before the run gives up until next time (ms) */
  lockTimeoutMs?: number;
}

/** The partitioned tables retention retires, with their partition key. */
export const RETAINED_TABLES = [
  { table: "inference_requests", column: "started_at" },
  { table: "clears", column: "created_at" },
] as const;

/** ASCII "svrr": the session advisory lock one retention run holds. */
export const RETENTION_LOCK_ID = 0x73767272;

const MONTH_PARTITION = /_y(\d{4})m(\d{2})$/;

/** `<table>_yYYYYmMM`: a month's partition (svc_partitions_ensure names them so). */
export function monthPartition(table: string, month: Date): string {
  return `${table}_y${month.getUTCFullYear()}m${String(month.getUTCMonth() + 1).padStart(2, "0")}`;
}

function monthLabel(month: Date): string {
  return month.toISOString().slice(0, 7);
}

function addMonths(month: Date, n: number): Date {
  return new Date(Date.UTC(month.getUTCFullYear(), month.getUTCMonth() + n, 1));
}

/** The first month kept: the current UTC month less `months` whole months. */
export function retentionHorizon(now: Date, months: number): Date {
  return addMonths(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)), -months);
}

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;

export class RetentionService {
  constructor(private readonly deps: RetentionDeps) {}

  /**
   * Retires every month before the horizon that is due, oldest first, resuming any month a previous
   * run left closed or exported; stops at the first month that cannot be closed yet (blocked, with
   * the reason recorded). Without RETENTION_MONTHS it does nothing.
   */
  async run(): Promise<RetentionRun> {
    const { months } = this.deps;
    if (months === undefined) return { enabled: false, months: [] };
    const horizon = retentionHorizon(this.deps.clock.now(), months);
    return withConnection(this.deps.sql, async (c) => {
      const locked = await c.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1) AS ok", [RETENTION_LOCK_ID]);
      if (!locked.rows[0]?.ok) return { enabled: true, skipped: "busy", horizon: monthLabel(horizon), months: [] };
      try {
        const done: MonthRetention[] = [];
        for (const month of await this.dueMonths(c, horizon)) {
          const r = await this.retire(c, month);
          done.push(r);
          if (r.state === "blocked") break;
        }
        return { enabled: true, horizon: monthLabel(horizon), months: done };
      } finally {
        await c.query("SELECT pg_advisory_unlock($1)", [RETENTION_LOCK_ID]);
      }
    });
  }

  /** Months left closed or exported by an earlier run, and attached months before the horizon. */
  private async dueMonths(c: pg.ClientBase, horizon: Date): Promise<Date[]> {
    const unfinished = await c.query<{ month: string }>(
      `SELECT to_char(month, 'YYYY-MM-DD') AS month FROM retention_months WHERE state IN ('closed', 'exported')`,
    );
    const attached = await c.query<{ name: string }>(
      `SELECT cl.relname AS name FROM pg_inherits i JOIN pg_class cl ON cl.oid = i.inhrelid
        WHERE i.inhparent IN ('inference_requests'::regclass, 'clears'::regclass)`,
    );
    const due = new Map<number, Date>();
    for (const r of unfinished.rows) {
      const m = new Date(`${r.month}T00:00:00.000Z`);
      due.set(m.getTime(), m);
    }
    for (const r of attached.rows) {
      const p = MONTH_PARTITION.exec(r.name);
      if (!p) continue;
      const m = new Date(Date.UTC(Number(p[1]), Number(p[2]) - 1, 1));
      if (m.getTime() < horizon.getTime()) due.set(m.getTime(), m);
    }
    return [...due.values()].sort((a, b) => a.getTime() - b.getTime());
  }

  private async stateOf(c: pg.ClientBase, month: Date): Promise<MonthRetention | null> {
    const r = await c.query<{ state: RetentionState; rows: Record<string, number>; files: MonthRetention["files"] }>(
      "SELECT state, rows, files FROM retention_months WHERE month = $1::date",
      [month.toISOString().slice(0, 10)],
    );
    const row = r.rows[0];
    return row ? { month: monthLabel(month), state: row.state, rows: row.rows, files: row.files ?? [] } : null;
  }

  /** One month, from wherever it is to dropped (or blocked). */
  private async retire(c: pg.ClientBase, month: Date): Promise<MonthRetention> {
    const label = monthLabel(month);
    let at = await this.stateOf(c, month);
    if (at?.state === "dropped") {
      // its partitions are attached again: nothing in this design makes that; an operator looks (the
      // record of its retirement stays as it is)
      const reason = "the month was retired before, yet it has partitions again";
      logger.error({ month: label, reason }, "retention: month not closed");
      return { month: label, state: "blocked", blockedReason: reason };
    }
    if (!at || at.state === "blocked") {
      const why = await this.whyNotClosable(c, month);
      if (why) return this.block(c, month, why);
      const closed = await this.close(c, month);
      if ("blocked" in closed) return this.block(c, month, closed.blocked);
      at = { month: label, state: "closed", rows: closed.rows };
      logger.info({ month: label, rows: closed.rows }, "retention: month closed and detached");
      await this.deps.afterStep?.(label, "closed");
    }
    if (at.state === "closed") {
      const files = await this.export(c, month, at.rows ?? {});
      at = { ...at, state: "exported", files };
      logger.info({ month: label, files }, "retention: month exported");
      await this.deps.afterStep?.(label, "exported");
    }
    if (at.state === "exported") {
      let files = at.files ?? [];
      const whole = await Promise.all(files.map((f) => exportedFileIntact(f)));
      if (whole.some((ok) => !ok)) {
        // a file went missing or changed since (another host's disk, a hand): written again while
        // the tables are still there, else the month stops here
        files = await this.export(c, month, at.rows ?? {});
      }
      await this.drop(c, month);
      at = { ...at, state: "dropped", files };
      logger.info({ month: label }, "retention: month dropped");
      await this.deps.afterStep?.(label, "dropped");
    }
    return at;
  }

  private async block(c: pg.ClientBase, month: Date, reason: string): Promise<MonthRetention> {
    await c.query(
      `INSERT INTO retention_months (month, state, blocked_reason, updated_at) VALUES ($1::date, 'blocked', $2, now())
       ON CONFLICT (month) DO UPDATE SET state = 'blocked', blocked_reason = $2, updated_at = now()
        WHERE retention_months.state = 'blocked'`,
      [month.toISOString().slice(0, 10), reason],
    );
    logger.warn({ month: monthLabel(month), reason }, "retention: month not closed");
    return { month: monthLabel(month), state: "blocked", blockedReason: reason };
  }

  /**
   * Why the month cannot be closed yet, or null: the books (svc_books_check, the whole ledger in one
   * snapshot), then what of the month is still open — a closing sums lines that must never move again.
   */
  private async whyNotClosable(c: pg.ClientBase, month: Date): Promise<string | null> {
    const broken = await c.query<{ rule: string; subject: string }>("SELECT rule, subject FROM svc_books_check()");
    if (broken.rows.length > 0) {
      const first = broken.rows.slice(0, 5).map((r) => `${r.rule} ${r.subject}`);
      return `the books check failed (${broken.rows.length}): ${first.join(", ")}`;
    }
    return this.openItems(c, month);
  }

  /** What of the month may still change: a held share, an unsettled payment, a rendering video job. */
  private async openItems(c: pg.ClientBase, month: Date): Promise<string | null> {
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
  private async close(c: pg.ClientBase, month: Date): Promise<{ rows: Record<string, number> } | { blocked: string }> {
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
      const open = await this.openItems(c, month);
      if (open) {
        await c.query("ROLLBACK");
        return { blocked: open };
      }
      // the month's clear lines, as the view derives them, summed per account and book; a line at the
      // month's last millisecond stands for them
      await c.query(
        `INSERT INTO ledger_closings (id, month, account_id, book, amount_micro_usdc, lines, created_at)
         SELECT md5('closing:' || $1::date::text || ':' || COALESCE(l.account_id::text, 'platform') || ':' || l.book::text)::uuid,
                $1::date, l.account_id, l.book, sum(l.amount_micro_usdc), count(*), $2::timestamptz - interval '1 millisecond'
           FROM ledger_lines l
          WHERE l.transaction_kind = 'clear' AND l.created_at >= $1::timestamptz AND l.created_at < $2::timestamptz
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
      // only now the parents' lock (ACCESS EXCLUSIVE, held to the commit): briefly, and never queued for long
      await c.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(this.deps.lockTimeoutMs ?? 3000))}`);
      for (const { table } of RETAINED_TABLES) {
        if (present.includes(table)) {
          await c.query(`ALTER TABLE ${ident(table)} DETACH PARTITION ${ident(monthPartition(table, month))}`);
        }
        await this.raiseFloor(c, table, next);
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
  private async raiseFloor(c: pg.ClientBase, table: string, next: Date): Promise<void> {
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

  /** Step 2: each detached partition to its CSV file, durable, then the state with what was written. */
  private async export(
    c: pg.ClientBase,
    month: Date,
    rows: Record<string, number>,
  ): Promise<({ table: string } & ExportedFile)[]> {
    const files: ({ table: string } & ExportedFile)[] = [];
    for (const { table } of RETAINED_TABLES) {
      const part = monthPartition(table, month);
      const exists = await c.query("SELECT to_regclass($1) IS NOT NULL AS ok", [part]);
      if (!exists.rows[0]?.ok) {
        if (rows[table] !== undefined) throw new Error(`retention: ${part} is gone before it was exported`);
        continue;
      }
      const f = await exportTableCsv(c, part, join(this.deps.exportDir, table, `${monthLabel(month)}.csv`));
      if (rows[table] !== undefined && f.rows !== rows[table]) {
        throw new Error(`retention: ${part} exported ${f.rows} rows, ${rows[table]} when closed`);
      }
      files.push({ table, ...f });
    }
    await c.query(
      `UPDATE retention_months SET state = 'exported', files = $2, exported_at = now(), updated_at = now()
        WHERE month = $1::date AND state IN ('closed', 'exported')`,
      [month.toISOString().slice(0, 10), JSON.stringify(files)],
    );
    return files;
  }

  /** Step 3: the detached tables dropped in the transaction that records it. */
  private async drop(c: pg.ClientBase, month: Date): Promise<void> {
    await c.query("BEGIN");
    try {
      for (const { table } of RETAINED_TABLES) {
        const part = monthPartition(table, month);
        // never an attached partition: only what step 1 detached
        const attached = await c.query("SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1)", [part]);
        if (attached.rowCount) throw new Error(`retention: ${part} is attached; not dropped`);
        await c.query(`DROP TABLE IF EXISTS ${ident(part)}`);
      }
      await c.query(
        `UPDATE retention_months SET state = 'dropped', dropped_at = now(), updated_at = now()
          WHERE month = $1::date AND state = 'exported'`,
        [month.toISOString().slice(0, 10)],
      );
      await c.query("COMMIT");
    } catch (e) {
      await c.query("ROLLBACK").catch(() => undefined);
      throw e;
    }
  }
}
