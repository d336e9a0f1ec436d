// `npm run scale:rows`: the partitioned tables at scale (docs/scale.md "Data growth and retention").
// In a scratch database of its own (dropped at the end unless --keep): 10 million requests spread over
// 12 months with their clears and the funding that balances the books (testkit/scale-rows.ts, INSERT …
// SELECT generate_series, loaded month by month and attached); then a history page and a
// support-reference lookup through AccountService as the routes call it, timed over many runs (p50,
// p99) with their EXPLAIN (ANALYZE, BUFFERS); the market statistics (MarketService.stats, beside the
// scan of every clear they replaced) and the model statistics' read (beside the scan of the window's
// clears it replaced); the books check (svc_books_check); and the migration
// carrying existing rows (a database at the migration before it, --migration-rows of requests and as
// many clears). One JSON line per figure.
//   npm run scale:rows
//   npm run scale:rows -- --requests=1000000 --months=6 --runs=200 --migration-rows=0 --keep
//   npm run scale:rows -- --measure-only --migration-rows=0   (again, on the database --keep left)
import { loadavg } from "node:os";
import pg from "pg";
import { createPrisma, runMigrations } from "../src/adapters/db.js";
import { createEventBus } from "../src/adapters/pubsub.js";
import { closeRedis, createRedis } from "../src/adapters/redis/client.js";
import { createSql, sqlRunner } from "../src/adapters/sql.js";
import { AccountService } from "../src/domain/accounts/account-service.js";
import { STATS_MIN_BUYERS, STATS_WINDOW_MS } from "../src/domain/catalog/catalog-stats.js";
import { moreBuyers, readModelWindow } from "../src/domain/catalog/model-window.js";
import { MarketService } from "../src/domain/market/market-service.js";
import { systemClock } from "../src/lib/clock.js";
import { databaseBefore, dbUrl, withAdmin } from "../testkit/db.js";
import { buffersOf, executedScans, explainJson, explainText, recordingPrisma, statementOn } from "../testkit/plans.js";
import { generateScaleRows } from "../testkit/scale-rows.js";

const MIGRATION = "20261206000000_monthly_partitions";
const opts = {
  requests: 10_000_000,
  months: 12,
  buyers: 20_000,
  suppliers: 50,
  runs: 1000,
  migrationRows: 1_000_000,
  db: "svc_scale_rows",
  keep: false,
  /** measure a database an earlier run kept (--keep), without generating again */
  measureOnly: false,
};
for (const a of process.argv.slice(2)) {
  const m = /^--(requests|months|buyers|suppliers|runs|migration-rows)=(\d+)$/.exec(a);
  const d = /^--db=([a-z0-9_]+)$/.exec(a);
  if (m?.[1] && m[2]) {
    const k =
      m[1] === "migration-rows" ? "migrationRows" : (m[1] as "requests" | "months" | "buyers" | "suppliers" | "runs");
    opts[k] = Number(m[2]);
  } else if (d?.[1]) opts.db = d[1];
  else if (a === "--keep") opts.keep = true;
  else if (a === "--measure-only") {
    opts.measureOnly = true;
    opts.keep = true;
  } else {
    console.error(`unknown argument ${a}`);
    process.exit(2);
  }
}

/** each figure with the machine's load average then (other work on it moves the latencies) */
const emit = (line: Record<string, unknown>) =>
  console.log(JSON.stringify({ ...line, loadAvg1m: Math.round((loadavg()[0] ?? 0) * 100) / 100 }));
const ms = (t: number) => Math.round((performance.now() - t) * 10) / 10;
function percentiles(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
  const r = (v: number) => Math.round(v * 100) / 100;
  return { runs: s.length, p50Ms: r(at(50)), p90Ms: r(at(90)), p99Ms: r(at(99)), maxMs: r(s[s.length - 1] ?? 0) };
}

async function main() {
  const url = dbUrl(opts.db);
  if (!opts.measureOnly) {
    await withAdmin(async (a) => {
      await a.query(`DROP DATABASE IF EXISTS "${opts.db}" WITH (FORCE)`);
      await a.query(`CREATE DATABASE "${opts.db}"`);
    });
    await runMigrations(url);
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  if (!opts.measureOnly) await generate(c);
  await measure(c, url);
  if (opts.migrationRows > 0) await migrationFigure(opts.migrationRows);
}

async function generate(c: pg.Client) {
  const gen = await generateScaleRows(c, {
    requests: opts.requests,
    months: opts.months,
    buyers: opts.buyers,
    suppliers: opts.suppliers,
    now: new Date(),
  });
  const rows = gen.requests + gen.clears;
  emit({
    figure: "scale.generate",
    requests: gen.requests,
    clears: gen.clears,
    months: gen.months.length,
    buyers: opts.buyers,
    busiestBuyerRequests: gen.busiest.requests,
    loadMs: Math.round(gen.loadMs),
    rowsPerSec: Math.round(rows / (gen.loadMs / 1000)),
    booksSetupMs: Math.round(gen.booksMs),
  });
}

async function measure(c: pg.Client, url: string) {
  const size = await c.query<{ requests: string; clears: string }>(
    `SELECT pg_size_pretty(pg_total_relation_size('inference_requests') + COALESCE((SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'inference_requests'::regclass), 0)) AS requests,
            pg_size_pretty(COALESCE((SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'clears'::regclass), 0)) AS clears`,
  );
  emit({ figure: "scale.size", ...size.rows[0] });

  // the routes' path: AccountService over Prisma (a real event bus, unused by these reads)
  const publish = createRedis("redis://127.0.0.1:6379", "command");
  const subscribe = createRedis("redis://127.0.0.1:6379", "subscriber");
  const bus = createEventBus({ publishClient: publish, subscribeClient: subscribe, prefix: "scale-rows" });
  const db = createPrisma(url, { max: 4 });
  const accounts = new AccountService(db, bus, systemClock);
  const recorded = recordingPrisma(url);
  const explainedAccounts = new AccountService(recorded.db, bus, systemClock);

  // who asks: half the time one of the 10 busiest buyers (3.7% to 0.5% of all requests each), else any
  const buyerIds = (
    await c.query<{ id: string; n: number }>(
      `SELECT md5('scale-account:' || g)::uuid::text AS id, g AS n FROM generate_series(1, $1::int) g ORDER BY g`,
      [opts.buyers],
    )
  ).rows.map((r) => r.id);
  const pick = (i: number) => buyerIds[i % 2 === 0 ? i % 10 : (i * 7919) % buyerIds.length] as string;
  const first: number[] = [];
  const next: number[] = [];
  for (let i = 0; i < opts.runs; i++) {
    const accountId = pick(i);
    let t = performance.now();
    const page = await accounts.inferenceHistory({ accountId, limit: 20 });
    first.push(performance.now() - t);
    if (page.nextCursor) {
      t = performance.now();
      await accounts.inferenceHistory({ accountId, limit: 20, cursor: page.nextCursor });
      next.push(performance.now() - t);
    }
  }
  emit({ figure: "scale.history.firstPage", limit: 20, ...percentiles(first) });
  emit({ figure: "scale.history.nextPage", limit: 20, ...percentiles(next) });

  // references: v7 ones of the newer half of the months, v4 ones of the older half, sampled over all
  const refs = await c.query<{ ref: string; account: string; v7: boolean }>(
    `SELECT COALESCE(support_reference, id)::text AS ref, account_id::text AS account,
            substr(COALESCE(support_reference, id)::text, 15, 1) = '7' AS v7
       FROM inference_requests TABLESAMPLE BERNOULLI (1) ORDER BY random() LIMIT $1`,
    [opts.runs * 2],
  );
  const byKind: Record<"v7" | "v4", number[]> = { v7: [], v4: [] };
  for (const r of refs.rows) {
    const t = performance.now();
    const row = await accounts.requestDetail({ accountId: r.account, supportReference: r.ref });
    byKind[r.v7 ? "v7" : "v4"].push(performance.now() - t);
    if (row.supportReference !== r.ref) throw new Error(`lookup of ${r.ref} found ${row.supportReference}`);
  }
  emit({ figure: "scale.supportReference.v7", ...percentiles(byKind.v7) });
  emit({ figure: "scale.supportReference.v4", ...percentiles(byKind.v4) });

  // the plans, as the service sends the statements
  const busiest = buyerIds[0] as string;
  const shown: [string, () => Promise<unknown>][] = [
    ["history.firstPage (busiest buyer)", () => explainedAccounts.inferenceHistory({ accountId: busiest, limit: 20 })],
    [
      "history.nextPage (busiest buyer)",
      async () => {
        const p = await accounts.inferenceHistory({ accountId: busiest, limit: 20 });
        return explainedAccounts.inferenceHistory({ accountId: busiest, limit: 20, cursor: p.nextCursor ?? undefined });
      },
    ],
    ...(["v7", "v4"] as const).map((kind): [string, () => Promise<unknown>] => {
      const r = refs.rows.find((x) => x.v7 === (kind === "v7"));
      return [
        `supportReference.${kind}`,
        () => explainedAccounts.requestDetail({ accountId: r?.account ?? "", supportReference: r?.ref ?? "" }),
      ];
    }),
  ];
  for (const [name, run] of shown) {
    recorded.statements.length = 0;
    await run();
    // the one on inference_requests (a v4 reference: the lookup that found it, the last one)
    const ons = recorded.statements.filter((s) => /FROM "public"\."inference_requests"/.test(s.sql));
    const s = ons[ons.length - 1] ?? statementOn(recorded.statements, "inference_requests");
    const e = await explainJson(c, s);
    emit({
      figure: `scale.plan.${name}`,
      partitionsRead: executedScans(e.plan).map((n) => n["Relation Name"]),
      buffers: buffersOf(e.plan),
      rows: e.plan["Actual Rows"],
      planningMs: e.planningMs,
      executionMs: e.executionMs,
      plan: await explainText(c, s),
    });
  }

  // the market statistics (GET /v1/market/stats) as the service computes them, from the market's day
  // rows (docs/decisions.md "Market totals at the fold"), alternated with the scan of every clear kept
  // that they replaced (its totals must agree)
  const pool = createSql(url, 2);
  const market = new MarketService(db, sqlRunner(pool), bus, systemClock);
  const viaRows: number[] = [];
  const viaScan: number[] = [];
  for (let i = 0; i < 10; i++) {
    let t0 = performance.now();
    const stats = await market.stats();
    viaRows.push(performance.now() - t0);
    t0 = performance.now();
    const scan = await c.query<{ clears: string; face: string; paid: string }>(
      `SELECT COALESCE(SUM(x.clears), 0)::text AS clears, COALESCE(SUM(x.face), 0)::text AS face,
              COALESCE(SUM(x.paid), 0)::text AS paid
         FROM (SELECT COUNT(*) AS clears, SUM(burn_micro_diem) AS face, SUM(gross_micro_usdc) AS paid
                 FROM clears WHERE refunded_at IS NULL
               UNION ALL
               SELECT SUM(clears), SUM(burn_micro_diem), SUM(gross_micro_usdc) FROM clear_closings) x`,
    );
    viaScan.push(performance.now() - t0);
    const r = scan.rows[0];
    if (
      String(stats.savings.clears) !== r?.clears ||
      String(stats.savings.faceMicroUsdc) !== r?.face ||
      String(stats.savings.paidMicroUsdc) !== r?.paid
    )
      throw new Error(`market totals ${JSON.stringify(stats.savings)} differ from the scan ${JSON.stringify(r)}`);
  }
  const dayRows = await c.query<{ n: string }>("SELECT count(*)::text AS n FROM market_days");
  emit({ figure: "scale.marketStats", dayRows: Number(dayRows.rows[0]?.n), ...percentiles(viaRows) });
  emit({ figure: "scale.marketStats.scanOfClears", ...percentiles(viaScan) });
  await pool.end();

  // the model statistics' read (GET /v1/models/stats: the window's hour rows and its two partial hours,
  // docs/decisions.md "Model statistics at the fold"), alternated with the scan of the window's clears it
  // replaced (their burns by model and day, and the count, must agree)
  for (const window of ["24h", "30d"] as const) {
    const viaHours: number[] = [];
    const viaWindowScan: number[] = [];
    for (let i = 0; i < 10; i++) {
      const now = new Date();
      const from = new Date(now.getTime() - STATS_WINDOW_MS[window]);
      let t0 = performance.now();
      const read = await readModelWindow(db, from, now);
      const buyers = await moreBuyers(db, from, now, read.buyers, STATS_MIN_BUYERS);
      viaHours.push(performance.now() - t0);
      t0 = performance.now();
      const scan = await c.query<{ model: string; day: string; clears: string; burn: string; buyers: string }>(
        `SELECT c.model, to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*)::text AS clears,
                sum(c.burn_micro_diem)::text AS burn, count(DISTINCT c.buyer_account_id)::text AS buyers
           FROM clears c LEFT JOIN catalog_models m ON m.id = c.model
          WHERE c.created_at > $1 AND c.created_at <= $2 AND c.refunded_at IS NULL AND m.disabled IS NOT TRUE
          GROUP BY 1, 2`,
        [from, now],
      );
      viaWindowScan.push(performance.now() - t0);
      const key = (m: string, d: string, n: string, b: string) => `${m}/${d}/${n}/${b}`;
      const got = read.days.map((d) => key(d.model, d.day, String(d.clears), String(d.burn))).sort();
      const want = scan.rows.map((r) => key(r.model, r.day, r.clears, r.burn)).sort();
      if (JSON.stringify(got) !== JSON.stringify(want) || (scan.rows.length > 0 && buyers.length < STATS_MIN_BUYERS))
        throw new Error(`model statistics of ${window} differ from the scan of its clears`);
    }
    const hourRows = await c.query<{ n: string }>("SELECT count(*)::text AS n FROM model_hours");
    emit({ figure: `scale.modelStats.${window}`, hourRows: Number(hourRows.rows[0]?.n), ...percentiles(viaHours) });
    emit({ figure: `scale.modelStats.${window}.scanOfClears`, ...percentiles(viaWindowScan) });
  }

  // the books check on all of it
  const t = performance.now();
  const broken = await c.query("SELECT * FROM svc_books_check()");
  emit({ figure: "scale.booksCheck", violations: broken.rowCount, ms: ms(t) });

  await db.$disconnect();
  await recorded.db.$disconnect();
  await closeRedis(publish);
  await closeRedis(subscribe);
  await c.end();
  if (!opts.keep) await withAdmin((a) => a.query(`DROP DATABASE IF EXISTS "${opts.db}" WITH (FORCE)`));
}

/** The migration carrying `n` requests and their clears (a database at the migration before it). */
async function migrationFigure(n: number) {
  const before = await databaseBefore(MIGRATION);
  const c = before.client;
  try {
    await c.query(`INSERT INTO accounts (id, wallet_address, auth_provider)
                   SELECT md5('m' || g)::uuid, '0x' || lpad(to_hex(g), 40, '0'), 'siwe' FROM generate_series(1, 1000) g`);
    await c.query(`INSERT INTO upstream_keys (id, account_id, label, secret_ciphertext, secret_iv, secret_tag,
                                              encryption_key_id, secret_fingerprint, secret_last4)
                   VALUES (md5('k')::uuid, md5('m1')::uuid, 'k', '\\x00', '\\x00', '\\x00', 'v1', 'fp', 'abcd')`);
    await c.query(`INSERT INTO offers (id, account_id, upstream_key_id, price_cents_per_dollar, quantity_micro_diem,
                                       remaining_micro_diem, expires_at)
                   VALUES (md5('o')::uuid, md5('m1')::uuid, md5('k')::uuid, 40, 9000000000000, 9000000000000, now() + interval '1 day')`);
    await c.query(
      `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents,
                                       status, cost_micro_usdc, attempts, started_at)
       SELECT gen_random_uuid(), gen_random_uuid(), md5('m' || (2 + g % 999))::uuid, 'chat', 'text', 'm', 80, 'succeeded',
              400, '[{"ordinal": 1, "outcome": "succeeded"}]', now() - (g * interval '1 second') * (180 * 86400 / $1::int)
         FROM generate_series(1, $1::int) g`,
      [n],
    );
    await c.query(
      `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                           modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                           fee_micro_usdc, supplier_micro_usdc, created_at)
       SELECT gen_random_uuid(), r.id, r.account_id, md5('m1')::uuid, md5('o')::uuid, md5('k')::uuid, 'm', 'text', 40, 80,
              1000, 400, 40, 360, r.started_at + interval '2 seconds'
         FROM inference_requests r`,
    );
    await c.query("ANALYZE");
    const t = performance.now();
    await before.migrate();
    const took = ms(t);
    const after = await c.query<{ requests: string; clears: string; parts: string }>(
      `SELECT (SELECT count(*) FROM inference_requests)::text AS requests, (SELECT count(*) FROM clears)::text AS clears,
              (SELECT count(*) FROM pg_inherits WHERE inhparent = 'clears'::regclass)::text AS parts`,
    );
    emit({
      figure: "scale.migration",
      requests: Number(after.rows[0]?.requests),
      clears: Number(after.rows[0]?.clears),
      clearPartitions: Number(after.rows[0]?.parts),
      ms: took,
      rowsPerSec: Math.round((2 * n) / (took / 1000)),
    });
  } finally {
    await before.drop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
