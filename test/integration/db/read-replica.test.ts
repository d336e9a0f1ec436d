import { describe, expect } from "vitest";
import { call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest } from "../../../testkit/app-test.js";
import { withAdmin } from "../../../testkit/db.js";
import type { TestApp } from "../../../testkit/harness.js";
import { addSupply, chat, fundedBuyerKey } from "../../../testkit/market.js";
import { type Replica, replicaUnavailable, startReplica } from "../../../testkit/replica.js";

/**
 * Issue 42 item 5 against a real streaming replica of the machine's PostgreSQL (testkit/replica.ts):
 * read-only pages (history, dashboard, market statistics, GraphQL queries) read the replica; a
 * caller's read right after its own write reads the primary while the replica lags (replay paused);
 * someone else's read may be stale within READ_REPLICA_MAX_LAG_MS; beyond it, everything reads the primary.
 */

const MODEL = "zai-org-glm-5-1";
/** long enough that the stale reads below happen within it on a busy machine (other runs move the WAL too) */
const MAX_LAG_MS = 15_000;

const test = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("replica", { scope: "file" }, async ({}, { onCleanup }): Promise<Replica> => {
    const replica = await startReplica();
    onCleanup(() => replica.stop());
    return replica;
  });
test.override("appOptions", ({ replica, database }) => ({
  sim: {},
  syncCatalog: true,
  env: {
    DATABASE_URL_READ_REPLICA: replica.url(new URL(database.databaseUrl).pathname.slice(1)),
    READ_REPLICA_MAX_LAG_MS: String(MAX_LAG_MS),
  },
}));

const statsClears = async (app: TestApp) =>
  ((await call(app, { method: "GET", path: "/v1/market/stats" })).body as { savings: { clears: number } }).savings
    .clears;
const primaryClears = async (app: TestApp) => app.rt.db.clear.count({ where: { refundedAt: null } });
const gql = async (app: TestApp, user: SignedInUser, query: string) => {
  const r = await call(app, { method: "POST", path: "/graphql", headers: { cookie: user.cookie }, body: { query } });
  const body = r.body as { data?: Record<string, unknown>; errors?: unknown[] };
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data as Record<string, { maxPriceCentsPerDollar: number }>;
};
/** the replica is fresh (its lag probe has caught up with the primary) */
async function settled(app: TestApp, replica: Replica): Promise<void> {
  // fresh past every write made before this call (a sign-in's mark sends its account's reads to the
  // primary until the replica is known to hold it), not merely less than a second behind
  const since = Date.now();
  await replica.catchUp();
  for (let i = 0; i < 100; i++) {
    const lag = app.rt.reads.lagMs();
    if (lag !== undefined && Date.now() - lag > since + 100) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the app never saw the replica fresh (lag ${app.rt.reads.lagMs()})`);
}
/** The replica's two gauges as GET /metrics exposes them (seconds; +Inf parses as Infinity). */
async function replicaGauges(app: TestApp): Promise<{ lag: number; bound: number }> {
  const res = await fetch(`${app.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  const value = (name: string) => {
    const line = text.split("\n").find((l) => l.startsWith(`${name} `));
    expect(line, `${name} is exported`).toBeDefined();
    return Number((line as string).slice(name.length + 1));
  };
  return { lag: value("svc_read_replica_lag_seconds"), bound: value("svc_read_replica_max_lag_seconds") };
}
/** a write on the primary nobody's request made: moves the WAL on (other databases of the machine may too) */
const walNudge = () => withAdmin((c) => c.query("SELECT pg_switch_wal(), txid_current()"));

describe.skipIf(replicaUnavailable() !== undefined)("read replica (issue 42 item 5)", () => {
  test("a fresh replica serves reads; a lagging one serves others' reads but not the caller's own", {
    timeout: 90_000,
  }, async ({ app, sim, replica }) => {
    expect(app.rt.reads.replicated).toBe(true);
    await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(app, 10_000_000n);
    const other = await signIn(app);
    const third = await signIn(app);
    const first = await chat(app, buyer.apiKey, { model: MODEL, messages: [{ role: "user", content: "one" }] });
    expect(first.status).toBe(200);
    await settled(app, replica);
    expect(await statsClears(app)).toBe(await primaryClears(app));
    // the lag gauge: a fresh replica is well within the bound
    const fresh = await replicaGauges(app);
    expect(fresh.bound).toBe(MAX_LAG_MS / 1000);
    expect(fresh.lag).toBeGreaterThanOrEqual(0);
    expect(fresh.lag).toBeLessThan(MAX_LAG_MS / 1000);

    await replica.pauseReplay();
    try {
      // what the primary has now, the paused replica has not: a change nobody's request made
      await app.rt.db.account.update({ where: { id: other.accountId }, data: { maxPriceCentsPerDollar: 33 } });
      await walNudge();
      // the other caller's dashboard and GraphQL query read the replica: the old ceiling (stale, bounded)
      const dash = await call(app, { method: "GET", path: "/v1/account", headers: { cookie: other.cookie } });
      expect((dash.body as { maxPriceCentsPerDollar: number }).maxPriceCentsPerDollar).not.toBe(33);
      expect((await gql(app, other, "{ viewer { maxPriceCentsPerDollar } }")).viewer?.maxPriceCentsPerDollar).not.toBe(
        33,
      );

      // the buyer's own write: paid chats (buffered), then its history at once — from the primary
      const before = await primaryClears(app);
      const refs = await Promise.all(
        [1, 2, 3].map(async (i) => {
          const r = await chat(app, buyer.apiKey, { model: MODEL, messages: [{ role: "user", content: `w${i}` }] });
          expect(r.status).toBe(200);
          const ref = r.headers.get("x-svc-support-reference");
          const history = await call(app, {
            method: "GET",
            path: "/v1/agent/requests?limit=50",
            headers: { authorization: `Bearer ${buyer.apiKey}` },
          });
          expect(history.status).toBe(200);
          return { ref, rows: (history.body as { data: { supportReference: string }[] }).data };
        }),
      );
      for (const { ref, rows } of refs) {
        expect(ref).toBeTruthy();
        expect(rows.map((x) => x.supportReference)).toContain(ref);
      }
      // the public statistics (no caller) come from the paused replica: the three clears are not there yet
      expect(await primaryClears(app)).toBe(before + 3);
      expect(await statsClears(app)).toBe(before);

      // a streamed chat settles before its last frame: the history read after the stream ends lists it
      const stream = await fetch(`${app.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${buyer.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "streamed" }] }),
      });
      expect(stream.status).toBe(200);
      const streamRef = stream.headers.get("x-svc-support-reference");
      expect(await stream.text()).toContain("[DONE]");
      const afterStream = await call(app, {
        method: "GET",
        path: `/v1/agent/requests/${streamRef}`,
        headers: { authorization: `Bearer ${buyer.apiKey}` },
      });
      expect(afterStream.status, JSON.stringify(afterStream.body)).toBe(200);
      expect((afterStream.body as { status: string }).status).not.toBe("in_progress");

      // the other caller writes (REST) and reads at once: its own write shows
      const put = await call(app, {
        method: "PATCH",
        path: "/v1/account/max-price",
        headers: { cookie: other.cookie },
        body: { maxPriceCentsPerDollar: 61 },
      });
      expect(put.status).toBe(200);
      const after = await call(app, { method: "GET", path: "/v1/account", headers: { cookie: other.cookie } });
      expect((after.body as { maxPriceCentsPerDollar: number }).maxPriceCentsPerDollar).toBe(61);
      // a third caller writes through a GraphQL mutation alone, then queries
      await gql(
        app,
        third,
        "mutation { setMaxPrice(input: { maxPriceCentsPerDollar: 62 }) { maxPriceCentsPerDollar } }",
      );
      expect((await gql(app, third, "{ viewer { maxPriceCentsPerDollar } }")).viewer?.maxPriceCentsPerDollar).toBe(62);

      // a sign-in creates the account: the new caller's dashboard finds it at once (the replica has not got it)
      const newcomer = await signIn(app);
      const mine = await call(app, { method: "GET", path: "/v1/account", headers: { cookie: newcomer.cookie } });
      expect(mine.status, JSON.stringify(mine.body)).toBe(200);
      expect((mine.body as { accountId: string }).accountId).toBe(newcomer.accountId);

      // replay still paused, past READ_REPLICA_MAX_LAG_MS: the replica serves nobody
      await walNudge();
      const until = Date.now() + MAX_LAG_MS * 3;
      while ((app.rt.reads.lagMs() ?? 0) <= MAX_LAG_MS) {
        if (Date.now() > until) throw new Error("lag never passed the bound");
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await statsClears(app)).toBe(before + 4);
      // the gauge shows what the routing saw: past the bound (the alert's condition)
      const stale = await replicaGauges(app);
      expect(stale.lag).toBeGreaterThan(stale.bound);
    } finally {
      await replica.resumeReplay();
    }
    // caught up: the replica serves again, and has everything
    await settled(app, replica);
    expect(await statsClears(app)).toBe(await primaryClears(app));
    // and the gauge is back within the bound
    expect((await replicaGauges(app)).lag).toBeLessThan(MAX_LAG_MS / 1000);
  });
});
