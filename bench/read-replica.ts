// Issue 42 item 5: what read-your-writes over a streaming replica costs here. Starts a real standby
// of the machine's PostgreSQL (testkit/replica.ts), then measures (a) replication visibility: a
// commit on the primary until the standby has replayed it; (b) the read routing
// (src/adapters/read-replica.ts) against it and the real Redis: a write mark's cost, a routing
// decision's cost, and how long a caller reads the primary after its write before the replica
// serves it again. Run: `node --import tsx bench/read-replica.ts` (root; about 20 s).
import { performance } from "node:perf_hooks";
import { Redis } from "ioredis";
import pg from "pg";
import { createPrisma } from "../src/adapters/db.js";
import { createReadRouting } from "../src/adapters/read-replica.js";
import { PG_ADMIN_URL, REDIS_URL } from "../testkit/db.js";
import { startReplica } from "../testkit/replica.js";

const N = Number(process.env.N ?? 50);
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return Number((s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN).toFixed(2));
};
const line = (what: string, xs: number[]) =>
  console.log(JSON.stringify({ what, n: xs.length, p50Ms: pct(xs, 50), p99Ms: pct(xs, 99), maxMs: pct(xs, 100) }));

const t0 = performance.now();
const replica = await startReplica();
console.log(
  JSON.stringify({ what: "standby started (pg_basebackup + postgres)", ms: Math.round(performance.now() - t0) }),
);
const primary = new pg.Client({ connectionString: PG_ADMIN_URL });
const standby = new pg.Client({ connectionString: replica.url("postgres") });
await Promise.all([primary.connect(), standby.connect()]);
const redis = new Redis(REDIS_URL);
const db = createPrisma(PG_ADMIN_URL, { max: 2 });
const reads = createReadRouting({
  primary: db,
  primaryUrl: PG_ADMIN_URL,
  replicaUrl: replica.url("postgres"),
  maxLagMs: 10_000,
  redis,
  prefix: `bench-rr-${process.pid}`,
  poolSize: 2,
});
try {
  // (a) a commit (an xid's commit record) until the standby replayed it
  const visible: number[] = [];
  for (let i = 0; i < N; i++) {
    const start = performance.now();
    const { rows } = await primary.query<{ l: string }>(
      "SELECT txid_current(), pg_current_wal_insert_lsn()::text AS l",
    );
    for (;;) {
      const r = await standby.query<{ ok: boolean }>("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok", [
        rows[0]?.l,
      ]);
      if (r.rows[0]?.ok) break;
    }
    visible.push(performance.now() - start);
  }
  line("commit on the primary → replayed on the standby", visible);

  // (b) the routing
  while ((reads.lagMs() ?? Number.POSITIVE_INFINITY) > 1_000) await new Promise((r) => setTimeout(r, 20));
  const mark: number[] = [];
  const decide: number[] = [];
  const primaryWindow: number[] = [];
  for (let i = 0; i < N; i++) {
    const account = `acct-${i}`;
    await primary.query("SELECT txid_current()"); // the caller's write
    let s = performance.now();
    await reads.wrote(account);
    mark.push(performance.now() - s);
    s = performance.now();
    const first = await reads.reader(account);
    decide.push(performance.now() - s);
    if (first !== db) throw new Error("a caller's read right after its write went to the replica");
    while ((await reads.reader(account)) === db) await new Promise((r) => setTimeout(r, 5));
    primaryWindow.push(performance.now() - s);
  }
  line("write mark (Redis EVAL)", mark);
  line("routing decision (Redis GET)", decide);
  line("caller reads the primary after its write for", primaryWindow);
} finally {
  await reads.close();
  await db.$disconnect();
  await Promise.all([primary.end(), standby.end()]);
  redis.disconnect();
  await replica.stop();
}
