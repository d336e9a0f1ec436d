import pg from "pg";
import { describe, expect } from "vitest";
import { call } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";

/**
 * The public aggregates (GET /v1/market/stats, GET /v1/models/stats) scan many clears for one cheap
 * GET: callers at once share one computation (src/lib/shared-calls.ts). Each test holds a table the
 * aggregate reads under an exclusive lock, so its first computation waits; 20 callers arrive while it
 * does; then the lock goes.
 */
let queries: string[] = [];
test.override("appOptions", { onQuery: (q) => queries.push(q) });

/** Backends of the app's database waiting for a lock on a query that mentions `text`. */
async function waiting(admin: pg.Client, text: string): Promise<number> {
  const r = await admin.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`,
    [text],
  );
  return Number(r.rows[0]?.n ?? 0);
}

/** `paths` called at once while `table` is locked; how many statements matching `marker` ran. */
async function callersAtOnce(app: TestApp, table: string, marker: string, paths: string[]) {
  const admin = new pg.Client({ connectionString: app.rt.config.database.url });
  await admin.connect();
  try {
    await admin.query("BEGIN");
    await admin.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    queries = [];
    const answers = Promise.all(paths.map((path) => call(app, { method: "GET", path })));
    const watcher = new pg.Client({ connectionString: app.rt.config.database.url });
    await watcher.connect();
    let blocked = 0;
    try {
      for (let i = 0; i < 100 && blocked === 0; i++) {
        blocked = await waiting(watcher, marker);
        if (blocked === 0) await new Promise((r) => setTimeout(r, 50));
      }
      // every caller has had time to arrive; without sharing, each would wait on the lock by now
      await new Promise((r) => setTimeout(r, 500));
      blocked = await waiting(watcher, marker);
    } finally {
      await watcher.end();
    }
    await admin.query("COMMIT");
    const res = await answers;
    return { blocked, res, ran: queries.filter((q) => q.includes(marker)).length };
  } finally {
    await admin.end();
  }
}

describe("public aggregates: callers at once share one computation", () => {
  test("GET /v1/market/stats: 20 callers, one scan, one answer", async ({ app }) => {
    const paths = Array.from({ length: 20 }, () => "/v1/market/stats");
    const { blocked, res, ran } = await callersAtOnce(app, "market_days", "FROM svc_market_days()", paths);
    expect(blocked).toBe(1);
    expect(ran).toBe(1);
    expect(res.map((r) => r.status)).toEqual(paths.map(() => 200));
    expect(new Set(res.map((r) => JSON.stringify(r.body))).size).toBe(1);
    // once it has settled, the next caller computes anew
    queries = [];
    const again = await call(app, { method: "GET", path: "/v1/market/stats" });
    expect(again.status).toBe(200);
    expect(queries.filter((q) => q.includes("FROM svc_market_days()"))).toHaveLength(1);
  });

  test("GET /v1/models/stats: callers of one window share; each window computes its own", async ({ app }) => {
    const paths = [
      ...Array.from({ length: 10 }, () => "/v1/models/stats?window=30d"),
      ...Array.from({ length: 10 }, () => "/v1/models/stats?window=24h"),
    ];
    const marker = "FROM svc_model_hours(";
    const { blocked, res, ran } = await callersAtOnce(app, "catalog_models", marker, paths);
    expect(blocked).toBe(2);
    expect(ran).toBe(2);
    expect(res.map((r) => r.status)).toEqual(paths.map(() => 200));
    const windows = new Set(res.map((r) => (r.body as { window: string }).window));
    expect(windows).toEqual(new Set(["30d", "24h"]));
  });
});
