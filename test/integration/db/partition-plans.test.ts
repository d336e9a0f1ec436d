import pg from "pg";
import { describe, expect } from "vitest";
import { AccountService } from "../../../src/domain/accounts/account-service.js";
import { accountLedgerLines } from "../../../src/domain/ledger/ledger-lines.js";
import { encodeCursor } from "../../../src/lib/cursor.js";
import { appTest } from "../../../testkit/app-test.js";
import { monthStart } from "../../../testkit/month-rows.js";
import {
  buffersOf,
  type Explained,
  executedScans,
  explainJson,
  type PlanNode,
  planNodes,
  recordingPrisma,
  type Statement,
  statementOn,
} from "../../../testkit/plans.js";
import { generateScaleRows } from "../../../testkit/scale-rows.js";

/**
 * The plans of the two hot lookups on partitioned `inference_requests`, as the service sends them
 * (recorded from Prisma, then EXPLAIN ANALYZE BUFFERS): a history page reads the newest month's
 * partition alone, backwards on its (account_id, started_at DESC, id DESC) index, and stops at the
 * page (an ordered Append: the months after the bound pruned at planning, the older ones never
 * started); a page behind a cursor starts at the cursor, in its month; a v7 support reference reads
 * one partition's unique index; a v4 one probes each month's unique index until found. Bounded rows
 * and buffers, whatever the table holds: 60,000 requests over four months here, 10 million in
 * `npm run scale:rows` (docs/scale.md). No timings are asserted.
 */
const NOW = new Date();
const MONTHS = 4;

const test = appTest
  .extend("client", { scope: "file" }, async ({ app }, { onCleanup }) => {
    const c = new pg.Client({ connectionString: app.rt.config.database.url });
    await c.connect();
    onCleanup(() => c.end());
    await generateScaleRows(c, {
      requests: 60_000,
      months: MONTHS,
      buyers: 300,
      suppliers: 5,
      now: NOW,
      v7Months: 2,
      seed: 0.3,
    });
    return c;
  })
  .extend("recorded", { scope: "file" }, async ({ app, client: _ }, { onCleanup }) => {
    const r = recordingPrisma(app.rt.config.database.url);
    onCleanup(() => r.db.$disconnect());
    return { ...r, accounts: new AccountService(r.db, app.rt.bus, app.rt.clock) };
  });

const BUSIEST = "scale-account:1";

async function busiest(c: pg.Client): Promise<string> {
  return (await c.query<{ id: string }>("SELECT md5($1)::uuid::text AS id", [BUSIEST])).rows[0]?.id as string;
}

/** The recorded statement on inference_requests of `run`, explained. */
async function planOf(
  c: pg.Client,
  statements: Statement[],
  run: () => Promise<unknown>,
): Promise<{ e: Explained; s: Statement }> {
  statements.length = 0;
  await run();
  const s = statementOn(statements, "inference_requests");
  return { e: await explainJson(c, s), s };
}

const partition = (offset: number, table = "inference_requests") => {
  const m = monthStart(NOW, offset);
  return `${table}_y${m.getUTCFullYear()}m${String(m.getUTCMonth() + 1).padStart(2, "0")}`;
};

/**
 * A newest-first read asks for rows up to now plus a day (`newestReadBound`), so on a month's last
 * day the bound reaches into the next month: the planner keeps its partition, which holds nothing
 * yet, and an ordered Append starts there (an empty read, by index or by a Seq Scan of no pages).
 * Those scans are checked to have read nothing and set apart; on any other day there are none.
 */
function withoutEmptyAhead(scans: PlanNode[], table = "inference_requests"): PlanNode[] {
  const next = partition(1, table);
  const ahead = scans.filter((n) => n["Relation Name"] === next);
  const lastDay = monthStart(NOW, 1).getTime() - NOW.getTime() <= 86_400_000 + 3_600_000;
  if (!lastDay) expect(ahead).toEqual([]);
  for (const n of ahead) {
    expect(n["Actual Rows"]).toBe(0);
    expect(n["Shared Hit Blocks"] + n["Shared Read Blocks"]).toBeLessThanOrEqual(2);
  }
  return scans.filter((n) => n["Relation Name"] !== next);
}

describe("plans on partitioned requests", () => {
  test("a history page: the newest month's index alone, stopped at the page", async ({ client: c, recorded }) => {
    const account = await busiest(c);
    const { e } = await planOf(c, recorded.statements, () =>
      recorded.accounts.inferenceHistory({ accountId: account, limit: 20 }),
    );
    const types = planNodes(e.plan).map((n) => n["Node Type"]);
    expect(types).not.toContain("Merge Append");
    expect(types).not.toContain("Sort");
    const requests = withoutEmptyAhead(
      planNodes(e.plan).filter((n) => (n["Relation Name"] ?? "").startsWith("inference_requests_")),
    );
    expect(requests.map((n) => n["Node Type"])).not.toContain("Seq Scan");
    const ran = withoutEmptyAhead(executedScans(e.plan, "inference_requests"));
    expect(ran.map((n) => n["Relation Name"])).toEqual([partition(0)]);
    expect(ran[0]?.["Index Name"]).toBe(`${partition(0)}_account_id_started_at_id_idx`);
    expect(e.plan["Actual Rows"]).toBe(21);
    // 21 rows' heap pages and the index path: nothing proportional to the account's 6,000 requests
    expect(buffersOf(e.plan, "inference_requests")).toBeLessThanOrEqual(60);
  });

  test("a page behind a cursor starts at the cursor, in its month (across a boundary: two)", async ({
    client: c,
    recorded,
  }) => {
    const account = await busiest(c);
    // at the boundary: the page begins in this month's first instants and goes on into last month's
    const boundary = encodeCursor({
      at: new Date(monthStart(NOW, 0).getTime() + 1),
      id: "ffffffff-ffff-ffff-ffff-ffffffffffff",
    });
    const { e } = await planOf(c, recorded.statements, () =>
      recorded.accounts.inferenceHistory({ accountId: account, limit: 20, cursor: boundary }),
    );
    expect(executedScans(e.plan, "inference_requests").map((n) => n["Relation Name"])).toEqual([
      partition(0),
      partition(-1),
    ]);
    expect(e.plan["Actual Rows"]).toBe(21);
    expect(buffersOf(e.plan, "inference_requests")).toBeLessThanOrEqual(60);
    // deep in the oldest month: its partition alone, from the cursor on
    const deep = encodeCursor({
      at: new Date(monthStart(NOW, -(MONTHS - 1)).getTime() + 15 * 86_400_000),
      id: "ffffffff-ffff-ffff-ffff-ffffffffffff",
    });
    const d = await planOf(c, recorded.statements, () =>
      recorded.accounts.inferenceHistory({ accountId: account, limit: 20, cursor: deep }),
    );
    const ran = executedScans(d.e.plan, "inference_requests");
    expect(ran.map((n) => n["Relation Name"])).toEqual([partition(-(MONTHS - 1))]);
    expect(ran[0]?.["Actual Rows"]).toBeLessThanOrEqual(22);
    expect(buffersOf(d.e.plan, "inference_requests")).toBeLessThanOrEqual(60);
  });

  test("a support reference that is the request id (v7): one partition's primary key and unique index", async ({
    client: c,
    recorded,
  }) => {
    const r = await c.query<{ ref: string; stored: string | null; account: string; p: string }>(
      `SELECT id::text AS ref, support_reference::text AS stored, account_id::text AS account,
              tableoid::regclass::text AS p
         FROM inference_requests WHERE started_at >= $1 AND started_at < $2 LIMIT 1 OFFSET 777`,
      [monthStart(NOW, -1), monthStart(NOW, 0)],
    );
    const row = r.rows[0];
    expect(row?.ref[14]).toBe("7");
    expect(row?.stored).toBeNull();
    const { e, s } = await planOf(c, recorded.statements, () =>
      recorded.accounts.requestDetail({ accountId: row?.account as string, supportReference: row?.ref as string }),
    );
    expect(s.sql).toMatch(/started_at >= \$\d+::timestamptz/);
    // the day after the id's time: its month's partition alone (the next month's too only near its end),
    // its id on the primary key (and an older record's stored reference on the unique index)
    const scans = planNodes(e.plan).filter((n) => (n["Relation Name"] ?? "").startsWith("inference_requests_"));
    expect(new Set(scans.map((n) => n["Relation Name"]))).toEqual(new Set([row?.p]));
    expect(new Set(scans.flatMap(indexesOf))).toEqual(
      new Set([`${row?.p}_pkey`, `${row?.p}_support_reference_started_at_idx`]),
    );
    expect(e.plan["Actual Rows"]).toBe(1);
    expect(buffersOf(e.plan, "inference_requests")).toBeLessThanOrEqual(8);
  });

  test("a v4 support reference (made before v7 ones): each month's two indexes until found", async ({
    client: c,
    recorded,
  }) => {
    const r = await c.query<{ ref: string; account: string; p: string }>(
      `SELECT support_reference::text AS ref, account_id::text AS account, tableoid::regclass::text AS p
         FROM inference_requests WHERE started_at >= $1 AND started_at < $2 LIMIT 1 OFFSET 777`,
      [monthStart(NOW, -2), monthStart(NOW, -1)],
    );
    const row = r.rows[0];
    expect(row?.ref[14]).toBe("4");
    const { e } = await planOf(c, recorded.statements, () =>
      recorded.accounts.requestDetail({ accountId: row?.account as string, supportReference: row?.ref as string }),
    );
    const ran = executedScans(e.plan, "inference_requests");
    // the months in order up to the one that has it (plus the empty partition for anything older)
    expect(ran[ran.length - 1]?.["Relation Name"]).toBe(row?.p);
    // in each, the reference as an id on the primary key and as a stored reference on the unique index
    for (const n of ran.filter((x) => /_y\d{4}m\d{2}$/.test(x["Relation Name"] ?? ""))) {
      const p = n["Relation Name"];
      expect(new Set(indexesOf(n))).toEqual(new Set([`${p}_pkey`, `${p}_support_reference_started_at_idx`]));
    }
    expect(e.plan["Actual Rows"]).toBe(1);
    expect(buffersOf(e.plan, "inference_requests")).toBeLessThanOrEqual(8 * ran.length);
  });

  test("a supplier's ledger page: each source's newest month, backwards on its index, stopped at the page", async ({
    client: c,
    recorded,
  }) => {
    // the function ledger_lines orders and limits each of its sources (Postgres 15 builds no ordered
    // path for a partitioned table under a UNION ALL: ordered outside, a page would read all 12,000)
    const supplier = (await c.query<{ id: string }>("SELECT md5('scale-account:301')::uuid::text AS id")).rows[0]?.id;
    const total = await c.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM clears WHERE supplier_account_id = $1",
      [supplier],
    );
    expect(Number(total.rows[0]?.n)).toBeGreaterThan(5_000);
    recorded.statements.length = 0;
    const lines = await accountLedgerLines(recorded.db, { accountId: supplier as string, now: NOW, limit: 21 });
    expect(lines).toHaveLength(21);
    const s = recorded.statements.find((x) => /ledger_lines\(/.test(x.sql));
    if (!s) throw new Error("no statement on ledger_lines");
    const e = await explainJson(c, s);
    const scans = withoutEmptyAhead(executedScans(e.plan, "clears"), "clears");
    // (the partition for anything older is empty: a Seq Scan of it reads nothing)
    const months = scans.filter((n) => /_y\d{4}m\d{2}$/.test(n["Relation Name"] ?? ""));
    expect(months.map((n) => n["Node Type"])).not.toContain("Seq Scan");
    expect(scans.map((n) => n["Relation Name"])).toContain(partition(0, "clears"));
    // about a page per source that has lines, not the account's thousands (the held source filters
    // the supplier's index on supplier_held, a read of its clears that returns none: as before)
    expect(scans.reduce((a, n) => a + n["Actual Rows"] * n["Actual Loops"], 0)).toBeLessThanOrEqual(3 * 22);
  });
});

/** The indexes a scan reads (its own, or its bitmap's). */
function indexesOf(n: PlanNode): string[] {
  return planNodes(n).flatMap((x) => (x["Index Name"] ? [x["Index Name"]] : []));
}
