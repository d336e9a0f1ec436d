import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { afterAll, describe, expect } from "vitest";
import { refundClear } from "../../../src/domain/ledger/ledger.js";
import { monthPartition, RetentionService, type RetentionState } from "../../../src/domain/maintenance/retention.js";
import { appTest } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chargedRequest, fund, monthStart, releaseHeldShare, seller } from "../../../testkit/month-rows.js";
import { generateScaleRows } from "../../../testkit/scale-rows.js";

/**
 * Retention (RETENTION_MONTHS=2): months before the current one and the two before it are closed
 * (the books checked, closing lines written, the partitions detached, in one transaction), exported
 * to CSV and dropped, and every balance the ledger gives is the same before and after; a month with
 * something still open waits; two workers at once retire each month once; a crash after any step is
 * resumed by the next run. Five months of generated traffic (the current one and four before it).
 */
const EXPORT_DIR = mkdtempSync(join(tmpdir(), "svc-retention-"));
const test = appTest.extend("client", { scope: "file" }, async ({ app }, { onCleanup }) => {
  const c = new pg.Client({ connectionString: app.rt.config.database.url });
  await c.connect();
  onCleanup(() => c.end());
  return c;
});
test.override("appOptions", { env: { RETENTION_MONTHS: "2", RETENTION_EXPORT_DIR: EXPORT_DIR } });

const NOW = new Date();
const OLDEST = monthStart(NOW, -4);
const SECOND = monthStart(NOW, -3);
const THIRD = monthStart(NOW, -2);
const label = (m: Date) => m.toISOString().slice(0, 7);

/** Every balance the ledger gives: per account and book, and the platform's. */
async function ledgerBalances(c: pg.Client) {
  return (
    await c.query(
      `SELECT COALESCE(account_id::text, 'platform') AS account, book::text AS book, sum(amount_micro_usdc)::text AS amount
         FROM ledger_lines() GROUP BY 1, 2 ORDER BY 1, 2`,
    )
  ).rows;
}

async function monthIds(c: pg.Client, table: "clears" | "inference_requests", month: Date): Promise<string[]> {
  const col = table === "clears" ? "created_at" : "started_at";
  const r = await c.query<{ id: string }>(
    `SELECT id::text AS id FROM ${table} WHERE ${col} >= $1 AND ${col} < $2 ORDER BY id`,
    [month, monthStart(month, 1)],
  );
  return r.rows.map((x) => x.id);
}

const attached = async (c: pg.Client, name: string) =>
  (await c.query("SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1)", [name])).rowCount === 1;
const exists = async (c: pg.Client, name: string) =>
  (await c.query<{ ok: boolean }>("SELECT to_regclass($1) IS NOT NULL AS ok", [name])).rows[0]?.ok;

afterAll(() => rmSync(EXPORT_DIR, { recursive: true, force: true }));

describe("retention", () => {
  let heldClear = "";
  const before: {
    balances?: unknown;
    savings?: unknown;
    market?: unknown;
    ids?: Record<string, string[]>;
    gross?: Record<string, string>;
  } = {};
  let buyer = "";

  test.beforeAll(async ({ app, client: c }) => {
    await generateScaleRows(c, { requests: 3000, months: 5, buyers: 30, suppliers: 3, now: NOW, seed: 0.1 });
    // a buyer of our own with the cases a closing must carry: a video clear whose share is held, then
    // released; a clear paid per request whose payment settled; a clear refunded
    const s = await seller(c);
    buyer = (
      await c.query<{ id: string }>(
        `INSERT INTO accounts (id, wallet_address, auth_provider) VALUES (gen_random_uuid(), '0x00000000000000000000000000000000000e0001', 'siwe') RETURNING id`,
      )
    ).rows[0]?.id as string;
    await fund(c, buyer, 10_000_000n, OLDEST);
    heldClear = (
      await chargedRequest(c, { accountId: buyer, seller: s, at: new Date(OLDEST.getTime() + 86_400_000), video: true })
    ).clearId;
    const payment = (
      await c.query<{ id: string }>(
        `INSERT INTO request_payments (account_id, route, status, payer_address, pay_to_address, asset_address,
                                       facilitator_address, permit2_nonce, max_micro_usdc, deadline, charge_micro_usdc,
                                       settled_micro_usdc, fingerprint, payload, requirements, charged_at, settled_at)
         VALUES ($1, 'chat', 'settled', '0x00000000000000000000000000000000000e0001',
                 '0x00000000000000000000000000000000000000f0', '0x00000000000000000000000000000000000000f1',
                 '0x00000000000000000000000000000000000000f2', '1', 1000000, $2, 40000, 40000, 'fp', '{}', '{}', $2, $2)
         RETURNING id`,
        [buyer, new Date(SECOND.getTime() + 3_600_000)],
      )
    ).rows[0]?.id as string;
    await chargedRequest(c, {
      accountId: buyer,
      seller: s,
      at: new Date(SECOND.getTime() + 3_599_000),
      paymentId: payment,
    });
    await c.query("BEGIN");
    const j = await c.query<{ id: string }>(
      `INSERT INTO ledger_transactions (kind, request_payment_id, idempotency_key, created_at)
       VALUES ('request_payment', $1, $2, $3) RETURNING id`,
      [payment, `request_payment:${payment}`, new Date(SECOND.getTime() + 3_700_000)],
    );
    await c.query(
      `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
       VALUES ($1, NULL, 'external', 'request_payment', -40000, $3), ($1, $2, 'payment_receivable', 'request_payment', 40000, $3)`,
      [j.rows[0]?.id, buyer, new Date(SECOND.getTime() + 3_700_000)],
    );
    await c.query("COMMIT");
    const refunded = await chargedRequest(c, {
      accountId: buyer,
      seller: s,
      at: new Date(SECOND.getTime() + 7_200_000),
    });
    await app.rt.db.$transaction((tx) =>
      refundClear(tx, { clearId: refunded.clearId, at: new Date(SECOND.getTime() + 9_000_000) }),
    );
    await c.query("ANALYZE");
    await assertBooksBalance(app.rt.db);
  }, 120_000);

  test("a month with a share still held waits; nothing of it is closed", async ({ app, client: c }) => {
    const run = await app.rt.services.retention.run();
    expect(run).toMatchObject({ enabled: true, horizon: label(THIRD) });
    expect(run.months).toHaveLength(1);
    expect(run.months[0]).toMatchObject({ month: label(OLDEST), state: "blocked" });
    expect(run.months[0]?.blockedReason).toMatch(/1 held supplier shares not yet final/);
    expect((await c.query("SELECT count(*)::int AS n FROM ledger_closings")).rows[0]?.n).toBe(0);
    expect(await attached(c, monthPartition("clears", OLDEST))).toBe(true);
    expect((await c.query("SELECT state, blocked_reason FROM retention_months")).rows).toEqual([
      { state: "blocked", blocked_reason: run.months[0]?.blockedReason },
    ]);
  });

  test("two workers at once: one retires the months, exported and dropped, every balance the same", async ({
    app,
    client: c,
  }) => {
    await releaseHeldShare(c, heldClear, new Date(OLDEST.getTime() + 2 * 86_400_000));
    before.balances = await ledgerBalances(c);
    before.savings = await app.rt.services.accounts.savings(buyer);
    before.market = (await app.rt.services.market.stats()).savings;
    before.ids = {};
    before.gross = {};
    for (const m of [OLDEST, SECOND]) {
      before.ids[`clears ${label(m)}`] = await monthIds(c, "clears", m);
      before.ids[`inference_requests ${label(m)}`] = await monthIds(c, "inference_requests", m);
      before.gross[label(m)] = (
        await c.query(
          "SELECT sum(gross_micro_usdc)::text AS g FROM clears WHERE created_at >= $1 AND created_at < $2",
          [m, monthStart(m, 1)],
        )
      ).rows[0]?.g;
    }
    expect((await c.query("SELECT * FROM svc_books_check()")).rows).toEqual([]);

    // worker A holds the lock while worker B runs: B does nothing
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let paused: () => void = () => undefined;
    const pausedAt = new Promise<void>((r) => {
      paused = r;
    });
    const service = (afterStep?: (m: string, s: RetentionState) => Promise<void>) =>
      new RetentionService({ sql: app.rt.sql, clock: app.rt.clock, months: 2, exportDir: EXPORT_DIR, afterStep });
    const a = service(async (m, s) => {
      if (m === label(OLDEST) && s === "closed") {
        paused();
        await gate;
      }
    }).run();
    await pausedAt;
    const b = await service().run();
    release();
    const done = await a;
    expect(b).toMatchObject({ enabled: true, skipped: "busy", months: [] });
    expect(done.months.map((m) => [m.month, m.state])).toEqual([
      [label(OLDEST), "dropped"],
      [label(SECOND), "dropped"],
    ]);

    // every balance the ledger gives, the savings and the market's figures are as before
    expect(await ledgerBalances(c)).toEqual(before.balances);
    expect(await app.rt.services.accounts.savings(buyer)).toEqual(before.savings);
    expect((await app.rt.services.market.stats()).savings).toEqual(before.market);
    expect((await c.query("SELECT * FROM svc_books_check()")).rows).toEqual([]);
    await assertBooksBalance(app.rt.db);

    // each month closed once: its clear lines are its closing lines, which balance
    const closings = await c.query<{ month: string; lines: string; total: string }>(
      `SELECT to_char(month, 'YYYY-MM') AS month, sum(lines)::text AS lines, sum(amount_micro_usdc)::text AS total
         FROM ledger_closings GROUP BY 1 ORDER BY 1`,
    );
    expect(closings.rows.map((r) => [r.month, r.total])).toEqual([
      [label(OLDEST), "0"],
      [label(SECOND), "0"],
    ]);
    for (const r of closings.rows) {
      // three lines per clear (buyer, supplier, fee; generated fees are never zero)
      expect(Number(r.lines)).toBe(3 * (before.ids[`clears ${r.month}`]?.length ?? -1));
    }

    // the partitions are gone, the floor partition moved up to where the kept months begin
    for (const m of [OLDEST, SECOND]) {
      for (const t of ["clears", "inference_requests"]) expect(await exists(c, monthPartition(t, m))).toBe(false);
    }
    const floor = await c.query<{ bound: string }>(
      `SELECT pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_class c WHERE c.relname = 'clears_before'`,
    );
    expect(new Date(/TO \('([^']+)'\)/.exec(floor.rows[0]?.bound ?? "")?.[1] ?? "").getTime()).toBe(THIRD.getTime());
    expect(await attached(c, monthPartition("clears", THIRD))).toBe(true);

    // one file per table and month: a header, then every row of the month once
    const state = await c.query<{
      month: string;
      state: string;
      files: { table: string; file: string; rows: number }[];
    }>("SELECT to_char(month, 'YYYY-MM') AS month, state, files FROM retention_months ORDER BY month");
    expect(state.rows.map((r) => [r.month, r.state])).toEqual([
      [label(OLDEST), "dropped"],
      [label(SECOND), "dropped"],
    ]);
    for (const r of state.rows) {
      for (const t of ["inference_requests", "clears"]) {
        const file = join(EXPORT_DIR, t, `${r.month}.csv`);
        expect(r.files.find((f) => f.table === t)?.file).toBe(file);
        const lines = readFileSync(file, "utf8").trimEnd().split("\n");
        expect(lines[0]?.split(",")[0]).toBe("id");
        expect(
          lines
            .slice(1)
            .map((l) => l.slice(0, 36))
            .sort(),
        ).toEqual(before.ids[`${t} ${r.month}`]);
      }
    }
    // and a file restores (docs/operations.md): COPY … FROM into a table shaped like the parent
    await c.query("CREATE TEMP TABLE restored (LIKE clears)");
    const copy = c.query(copyFrom("COPY restored FROM STDIN WITH (FORMAT csv, HEADER true)"));
    await pipeline(Readable.from([readFileSync(join(EXPORT_DIR, "clears", `${label(SECOND)}.csv`))]), copy);
    expect((await c.query("SELECT sum(gross_micro_usdc)::text AS g FROM restored")).rows[0]?.g).toBe(
      before.gross[label(SECOND)],
    );

    // nothing left to do
    expect((await app.rt.services.retention.run()).months).toEqual([]);
  });

  test("a crash after each step is resumed by the next run", async ({ app, client: c }) => {
    // one month kept: THIRD is due now; a run crashes after closing it, the next after exporting it
    const balances = await ledgerBalances(c);
    const crashAt: RetentionState[] = ["closed", "exported"];
    const crashing = () =>
      new RetentionService({
        sql: app.rt.sql,
        clock: app.rt.clock,
        months: 1,
        exportDir: EXPORT_DIR,
        afterStep: (_m, s) => {
          if (s === crashAt[0]) {
            crashAt.shift();
            throw new Error(`crash after ${s}`);
          }
        },
      });
    const part = (t: string) => monthPartition(t, THIRD);

    await expect(crashing().run()).rejects.toThrow("crash after closed");
    // closed: detached (the tables wait for their export), the closings already stand in their place
    expect(await attached(c, part("clears"))).toBe(false);
    expect(await exists(c, part("clears"))).toBe(true);
    expect(await ledgerBalances(c)).toEqual(balances);
    // a half-written file of a crashed export is written over
    mkdirSync(join(EXPORT_DIR, "clears"), { recursive: true });
    writeFileSync(join(EXPORT_DIR, "clears", `${label(THIRD)}.csv.partial`), "id,half");

    await expect(crashing().run()).rejects.toThrow("crash after exported");
    expect(existsSync(join(EXPORT_DIR, "clears", `${label(THIRD)}.csv`))).toBe(true);
    expect(await exists(c, part("clears"))).toBe(true);

    const last = await crashing().run();
    expect(last.months.map((m) => [m.month, m.state])).toEqual([[label(THIRD), "dropped"]]);
    expect(await exists(c, part("clears"))).toBe(false);
    expect(await exists(c, part("inference_requests"))).toBe(false);
    expect(existsSync(join(EXPORT_DIR, "clears", `${label(THIRD)}.csv.partial`))).toBe(false);
    const rows = readFileSync(join(EXPORT_DIR, "clears", `${label(THIRD)}.csv`), "utf8")
      .trimEnd()
      .split("\n");
    const closed = await c.query<{ rows: Record<string, number> }>(
      "SELECT rows FROM retention_months WHERE month = $1",
      [THIRD],
    );
    expect(rows.length - 1).toBe(closed.rows[0]?.rows.clears);
    expect(await ledgerBalances(c)).toEqual(balances);
    expect((await c.query("SELECT * FROM svc_books_check()")).rows).toEqual([]);
    await assertBooksBalance(app.rt.db);
  });
});
