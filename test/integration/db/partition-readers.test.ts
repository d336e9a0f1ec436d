import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect } from "vitest";
import { RetentionService } from "../../../src/domain/maintenance/retention.js";
import { bearer, call, createKey, type Res, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { type ChargedRequest, chargedRequest, fund, monthStart, seller } from "../../../testkit/month-rows.js";
import { generateScaleRows } from "../../../testkit/scale-rows.js";

/**
 * Every reader of the partitioned tables across a month's boundary, through the routes: the buyer's
 * history (REST and GraphQL, cursor pages that cross from one month's partition into the previous
 * one's), one request by support reference (a v7 reference found in its month, a v4 one made before
 * them in any), the supplier's ledger and clears, the account's ledger, savings and the market's
 * figures; then the same once the oldest month is retired (its lines are its closing lines).
 * Months: the current one and the two before it, with generated traffic from other accounts beside.
 */
const EXPORT_DIR = mkdtempSync(join(tmpdir(), "svc-readers-"));
afterAll(() => rmSync(EXPORT_DIR, { recursive: true, force: true }));

const test = appTest.extend("client", { scope: "file" }, async ({ app }, { onCleanup }) => {
  const c = new pg.Client({ connectionString: app.rt.config.database.url });
  await c.connect();
  onCleanup(() => c.end());
  return c;
});

const NOW = new Date();
const THIS = monthStart(NOW, 0);
const LAST = monthStart(NOW, -1);
const OLDEST = monthStart(NOW, -2);
const HOUR = 3_600_000;

type Body = Record<string, unknown>;
const as = (user: SignedInUser) => ({ cookie: user.cookie });
const ok = (r: Res) => {
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as Body;
};

/** Every page of a cursor-paged REST list. */
async function pages(fetchPage: (cursor: string | null) => Promise<Body>): Promise<Body[]> {
  const all: Body[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 50; i++) {
    const p = await fetchPage(cursor);
    all.push(...(p.data as Body[]));
    cursor = p.nextCursor as string | null;
    if (!cursor) return all;
  }
  throw new Error("more than 50 pages");
}

describe("readers across months", () => {
  let buyer: SignedInUser;
  let supplier: SignedInUser;
  let apiKey = "";
  /** the buyer's requests, newest first */
  let mine: ChargedRequest[] = [];

  test.beforeAll(async ({ app, client: c }) => {
    await generateScaleRows(c, { requests: 1500, months: 3, buyers: 20, suppliers: 2, now: NOW, seed: 0.2 });
    buyer = await signIn(app);
    supplier = await signIn(app);
    apiKey = (await createKey(app, buyer)).apiKey;
    const s = await seller(c, { accountId: supplier.accountId });
    await fund(c, buyer.accountId, 10_000_000n, OLDEST);
    const made: ChargedRequest[] = [];
    // two in the oldest month; four in the last hours of last month (v4 references: made before
    // v7 ones), four in this month's first hours
    for (const at of [OLDEST.getTime() + 5 * HOUR, OLDEST.getTime() + 6 * HOUR]) {
      made.push(await chargedRequest(c, { accountId: buyer.accountId, seller: s, at: new Date(at), reference: "v4" }));
    }
    for (let i = 4; i >= 1; i--) {
      made.push(
        await chargedRequest(c, {
          accountId: buyer.accountId,
          seller: s,
          at: new Date(THIS.getTime() - i * HOUR),
          reference: i > 2 ? "v4" : "v7",
          grossMicroUsdc: BigInt(10_000 * i),
        }),
      );
    }
    for (let i = 0; i < 4; i++) {
      made.push(
        await chargedRequest(c, {
          accountId: buyer.accountId,
          seller: s,
          at: new Date(Math.min(THIS.getTime() + i * HOUR, NOW.getTime() - (4 - i) * 1000)),
          grossMicroUsdc: BigInt(20_000 + i),
        }),
      );
    }
    mine = made.sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime());
    await c.query("ANALYZE");
    await assertBooksBalance(app.rt.db);
  }, 120_000);

  test("the history pages newest first across the months, REST and GraphQL alike", async ({ app }) => {
    const rest = await pages(async (cursor) =>
      ok(
        await call(app, {
          method: "GET",
          path: `/v1/account/inference-history?limit=3${cursor ? `&cursor=${cursor}` : ""}`,
          headers: as(buyer),
        }),
      ),
    );
    expect(rest.map((r) => r.supportReference)).toEqual(mine.map((m) => m.supportReference));
    const viaKey = await pages(async (cursor) =>
      ok(
        await call(app, {
          method: "GET",
          path: `/v1/agent/requests?limit=4${cursor ? `&cursor=${cursor}` : ""}`,
          headers: bearer(apiKey),
        }),
      ),
    );
    expect(viaKey.map((r) => r.supportReference)).toEqual(mine.map((m) => m.supportReference));
    const gql = await pages(async (cursor) => {
      const r = ok(
        await call(app, {
          method: "POST",
          path: "/graphql",
          headers: as(buyer),
          body: {
            query:
              "query ($c: String) { myInferenceHistory(limit: 3, cursor: $c) { items { supportReference } nextCursor } }",
            variables: { c: cursor },
          },
        }),
      );
      const page = (r.data as { myInferenceHistory: { items: Body[]; nextCursor: string | null } }).myInferenceHistory;
      return { data: page.items, nextCursor: page.nextCursor };
    });
    expect(gql.map((r) => r.supportReference)).toEqual(mine.map((m) => m.supportReference));
    // a period that spans the boundary
    const spanning = ok(
      await call(app, {
        method: "GET",
        path: `/v1/account/inference-history?from=${new Date(THIS.getTime() - 3 * HOUR).toISOString()}&to=${new Date(THIS.getTime() + 2 * HOUR).toISOString()}`,
        headers: as(buyer),
      }),
    );
    expect((spanning.data as Body[]).map((r) => r.supportReference)).toEqual(
      mine
        .filter(
          (m) =>
            m.startedAt.getTime() >= THIS.getTime() - 3 * HOUR && m.startedAt.getTime() < THIS.getTime() + 2 * HOUR,
        )
        .map((m) => m.supportReference),
    );
  });

  test("one request by support reference, v7 or v4, in either month", async ({ app }) => {
    for (const m of mine) {
      const r = ok(
        await call(app, { method: "GET", path: `/v1/agent/requests/${m.supportReference}`, headers: bearer(apiKey) }),
      );
      expect(r).toMatchObject({ requestId: m.requestId, supportReference: m.supportReference });
      const g = ok(
        await call(app, {
          method: "POST",
          path: "/graphql",
          headers: as(buyer),
          body: {
            query: "query ($r: String!) { myInferenceRequest(supportReference: $r) { supportReference cost } }",
            variables: { r: m.supportReference },
          },
        }),
      );
      expect(g.data).toEqual({
        myInferenceRequest: { supportReference: m.supportReference, cost: m.grossMicroUsdc.toString() },
      });
    }
    // another account's reference is not found, whichever month it is in
    for (const m of [mine[0], mine[mine.length - 1]]) {
      const other = ok(
        await call(app, {
          method: "POST",
          path: "/graphql",
          headers: as(supplier),
          body: {
            query: "query ($r: String!) { myInferenceRequest(supportReference: $r) { supportReference } }",
            variables: { r: m?.supportReference },
          },
        }),
      );
      expect((other.errors as { extensions: { code: string } }[])[0]?.extensions.code).toBe("not_found");
    }
  });

  test("the supplier's ledger and clears, the account's ledger, savings and the market's figures", async ({
    app,
    client: c,
  }) => {
    const lines = await pages(async (cursor) =>
      ok(
        await call(app, {
          method: "GET",
          path: `/v1/supply/ledger?limit=3${cursor ? `&cursor=${cursor}` : ""}`,
          headers: as(supplier),
        }),
      ),
    );
    expect(lines.map((l) => l.transactionId)).toEqual(mine.map((m) => m.clearId));
    const sold = await pages(async (cursor) =>
      ok(
        await call(app, {
          method: "GET",
          path: `/v1/supply/inference-history?limit=3${cursor ? `&cursor=${cursor}` : ""}`,
          headers: as(supplier),
        }),
      ),
    );
    expect(sold.map((l) => l.clearId)).toEqual(mine.map((m) => m.clearId));
    // the buyer's ledger (GraphQL Account.ledger) sums to its balance, page by page across the months
    const ledger = await viewerLedger(app, buyer);
    const account = ok(await call(app, { method: "GET", path: "/v1/account", headers: as(buyer) }));
    expect(formatMicro(ledger.reduce((a, l) => a + BigInt(l.amount as string), 0n))).toBe(account.confirmedUsdc);
    expect(ledger.filter((l) => l.kind === "buyer_debit").map((l) => l.transactionId)).toEqual(
      mine.map((m) => m.clearId),
    );
    // savings and the market's figures read every clear of every month
    const savings = ok(await call(app, { method: "GET", path: "/v1/account/savings", headers: as(buyer) }));
    expect(savings.clears).toBe(mine.length);
    const stats = ok(await call(app, { method: "GET", path: "/v1/market/stats" }));
    const all = await c.query<{ n: number }>("SELECT count(*)::int AS n FROM clears WHERE refunded_at IS NULL");
    expect((stats.savings as Body).clears).toBe(all.rows[0]?.n);
  });

  test("once the oldest month is retired: the kept months read as before, its lines are one closing line", async ({
    app,
    client: c,
  }) => {
    const savings = ok(await call(app, { method: "GET", path: "/v1/account/savings", headers: as(buyer) }));
    const stats = ok(await call(app, { method: "GET", path: "/v1/market/stats" }));
    const supplierBefore = ok(await call(app, { method: "GET", path: "/v1/supply/ledger", headers: as(supplier) }));
    const run = await new RetentionService({
      sql: app.rt.sql,
      clock: app.rt.clock,
      months: 1,
      exportDir: EXPORT_DIR,
    }).run();
    expect(run.months.map((m) => [m.month, m.state])).toEqual([[OLDEST.toISOString().slice(0, 7), "dropped"]]);

    const kept = mine.filter((m) => m.startedAt.getTime() >= LAST.getTime());
    const gone = mine.filter((m) => m.startedAt.getTime() < LAST.getTime());
    expect(gone).toHaveLength(2);
    const rest = await pages(async (cursor) =>
      ok(
        await call(app, {
          method: "GET",
          path: `/v1/account/inference-history?limit=3${cursor ? `&cursor=${cursor}` : ""}`,
          headers: as(buyer),
        }),
      ),
    );
    expect(rest.map((r) => r.supportReference)).toEqual(kept.map((m) => m.supportReference));
    for (const m of gone) {
      const r = await call(app, {
        method: "GET",
        path: `/v1/agent/requests/${m.supportReference}`,
        headers: bearer(apiKey),
      });
      expect(r.status).toBe(404);
    }
    // the retired month's clear lines: one closing line per book, at the month's last millisecond
    const ledger = await viewerLedger(app, buyer);
    const closing = ledger.filter((l) => l.kind === "closing");
    expect(closing).toEqual([
      expect.objectContaining({
        book: "buyer_confirmed",
        amount: (-gone.reduce((a, m) => a + m.grossMicroUsdc, 0n)).toString(),
        createdAt: new Date(LAST.getTime() - 1).toISOString(),
      }),
    ]);
    const account = ok(await call(app, { method: "GET", path: "/v1/account", headers: as(buyer) }));
    expect(formatMicro(ledger.reduce((a, l) => a + BigInt(l.amount as string), 0n))).toBe(account.confirmedUsdc);
    const supplierAfter = ok(await call(app, { method: "GET", path: "/v1/supply/ledger", headers: as(supplier) }));
    expect(supplierAfter.payableUsdc).toBe(supplierBefore.payableUsdc);
    const supplierLines = await pages(async (cursor) =>
      ok(
        await call(app, {
          method: "GET",
          path: `/v1/supply/ledger?limit=3${cursor ? `&cursor=${cursor}` : ""}`,
          headers: as(supplier),
        }),
      ),
    );
    expect(supplierLines.map((l) => l.kind)).toEqual([...kept.map(() => "supplier_credit"), "closing"]);
    expect(ok(await call(app, { method: "GET", path: "/v1/account/savings", headers: as(buyer) }))).toEqual(savings);
    expect(ok(await call(app, { method: "GET", path: "/v1/market/stats" })).savings).toEqual(stats.savings);
    await assertBooksBalance(app.rt.db);
    expect((await c.query("SELECT * FROM svc_books_check()")).rows).toEqual([]);
  });
});

/** Six decimals, as the REST bodies render micro-USDC. */
function formatMicro(v: bigint): string {
  const neg = v < 0n;
  const a = neg ? -v : v;
  return `${neg ? "-" : ""}${a / 1_000_000n}.${(a % 1_000_000n).toString().padStart(6, "0")}`;
}

/** Every line of the viewer's ledger (GraphQL Account.ledger), newest first, paged by 3. */
async function viewerLedger(app: Parameters<typeof call>[0], user: SignedInUser): Promise<Body[]> {
  const all: Body[] = [];
  let after: string | null = null;
  for (let i = 0; i < 50; i++) {
    const r = ok(
      await call(app, {
        method: "POST",
        path: "/graphql",
        headers: as(user),
        body: {
          query: `query ($a: String) { viewer { ledger(first: 3, after: $a) { edges { node { id kind book amount transactionId createdAt } }
                    pageInfo { hasNextPage endCursor } } } }`,
          variables: { a: after },
        },
      }),
    );
    const page = (r.data as { viewer: { ledger: { edges: { node: Body }[]; pageInfo: Body } } }).viewer.ledger;
    all.push(...page.edges.map((e) => e.node));
    if (!page.pageInfo.hasNextPage) return all;
    after = page.pageInfo.endCursor as string;
  }
  throw new Error("more than 50 pages");
}
