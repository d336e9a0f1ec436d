import { join } from "node:path";
import type pg from "pg";
import { type ExportedFile, exportedFileIntact, exportTableCsv } from "../../adapters/pg-export.js";
import { type Sql, withConnection } from "../../adapters/sql.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import {
  closeMonth,
  ident,
  MONTH_PARTITION,
  monthLabel,
  monthPartition,
  openItems,
  RETAINED_TABLES,
  retentionHorizon,
} from "./month-closing.js";

export { monthPartition, RETAINED_TABLES, retentionHorizon } from "./month-closing.js";

/**
 * Retention of the month partitions of `inference_requests` and `clears` (docs/decisions.md
 * "Monthly partitions and retention"; docs/operations.md "Retention"). With RETENTION_MONTHS = N, a
 * month older than the current one and the N whole months before it is retired, oldest first, in
 * three recorded steps (table `retention_months`), each resumed where a crash left it:
 *
 * 1. **closed** — only once the books check passes (svc_books_check) and nothing of the month is
 *    still open (a held share not yet final, a pay-per-request payment not yet settled or lost, a
 *    video job still rendering): in ONE transaction, the month's clear lines summed per account and
 *    book into `ledger_closings` (from the function `ledger_lines` itself, so the derivation stays
 *    its own), its unrefunded clears summed per buyer into `clear_closings`, and both month partitions
 *    DETACHed; `ledger_lines` yields the closing lines from that commit on, so every balance derived
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

/** ASCII "svrr": the session advisory lock one retention run holds. */
export const RETENTION_LOCK_ID = 0x73767272;

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
      const closed = await closeMonth(c, month, this.deps.lockTimeoutMs);
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
    return openItems(c, month);
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
