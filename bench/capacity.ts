// The capacity model's measurements (docs/scale.md): clears a second with 1, 2 and 4 API processes
// (`--role=api`, each in its own process as `npm run start:api` runs it) against one Postgres and one
// Redis, the load spread over them round-robin as a balancer would. Redis is a redis-server of the bench's
// own (no persistence), so its CPU and commands are the bench's alone; Postgres is the machine's, shared.
// Per run: clears/s and latency; CPU ms per clear of each process group (the API processes, the bench's
// load client and simulator, the Postgres backends of the bench's database, every Postgres process of the
// server, Redis, the machine); WAL bytes and write transactions per clear of the bench's database
// (bench/wal.ts), and what the database grew by per clear; and the connections each API process holds, to
// Postgres (`pg_stat_activity` by `application_name`, which the bench sets per process in DATABASE_URL,
// with how many are busy and how many wait for a lock) and to Redis (`CLIENT LIST`, each client's address
// matched to the process owning that socket), sampled through the run.
//
// The process counts run in the order BENCH_CAPACITY_PROCESSES (default 1,2,4,4,2,1: alternated, so
// a drift of the shared machine hits every count alike), each on the same world; a process count
// keeps its processes from the previous run when it can (started or stopped to match), and every
// run warms up first. Other knobs: BENCH_CAPACITY_REQUESTS (6,000 per run), BENCH_CAPACITY_CONCURRENCY
// (64 in all, closed loop), BENCH_CAPACITY_BUYERS (16; 1 puts every clear on one buyer's rows),
// BENCH_CAPACITY_DB_POOL_SIZE (each process's DB_POOL_SIZE, 8: a process opens up to two pools of it,
// and four at the service's default of 20 would take 160 connections of a server whose default
// max_connections is 100). BENCH_CAPACITY_PREFILL (0) fills this month's partitions first with that many
// ended requests of other buyers, with random ids, and takes a CHECKPOINT before each run: the WAL of
// a clear on a database that has served for a while (`prefillMonth`).
//   npm run bench -- --only=capacity
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import pg from "pg";
import { PG_ADMIN_URL } from "../testkit/db.js";
import { freePort } from "../testkit/harness.js";
import { generateScaleRows } from "../testkit/scale-rows.js";
import { SoakRedis } from "../testkit/soak/processes.js";
import { waitForExit, waitForHttp } from "../testkit/spawn.js";
import { load, post } from "./client.js";
import { cpuPerRequest, cpuSnapshot, procTicks, TICK_MS } from "./cpu.js";
import { CHAT_BODY, marketWorld, serviceEnv, spawnService, track } from "./market.js";
import { ms, pct, series } from "./stats.js";
import { databaseWal, relationNames, walPosition } from "./wal.js";

type Emit = (f: Record<string, unknown>) => void;

function numbers(name: string, fallback: string): number[] {
  return (process.env[name] ?? fallback)
    .split(",")
    .map(Number)
    .filter((x) => Number.isInteger(x) && x > 0);
}
const one = (name: string, fallback: number) => numbers(name, String(fallback))[0] ?? fallback;

/** TCP sockets by inode (Linux): local and remote port. */
function tcpSockets(): Map<string, { local: number; remote: number }> {
  const out = new Map<string, { local: number; remote: number }>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = (addr: string | undefined) => Number.parseInt(addr?.split(":").pop() ?? "0", 16);
      out.set(f[9] as string, { local: port(f[1]), remote: port(f[2]) });
    }
  }
  return out;
}

/** The local ports of every TCP socket `pid` holds. */
function localPortsOf(pid: number, sockets: Map<string, { local: number; remote: number }>): Set<number> {
  const ports = new Set<number>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      let link = "";
      try {
        link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      const s = inode ? sockets.get(inode) : undefined;
      if (s) ports.add(s.local);
    }
  } catch {
    // the process ended
  }
  return ports;
}

interface Api {
  name: string;
  url: string;
  child: ChildProcess & { output: () => { stdout: string; stderr: string } };
}

/** Every sample of each figure over one run; reported as its median and its peak. */
class Samples {
  private readonly xs = new Map<string, number[]>();
  private count = 0;
  /** one round of samples: a figure absent from a round counts 0 there */
  round(figures: Record<string, number>): void {
    for (const k of Object.keys(figures)) if (!this.xs.has(k)) this.xs.set(k, Array(this.count).fill(0));
    for (const [k, xs] of this.xs) xs.push(figures[k] ?? 0);
    this.count++;
  }
  summary(): Record<string, { median: number; peak: number }> {
    const out: Record<string, { median: number; peak: number }> = {};
    for (const [k, xs] of [...this.xs].sort(([a], [b]) => a.localeCompare(b))) {
      const s = [...xs].sort((a, b) => a - b);
      out[k] = { median: s[Math.floor(s.length / 2)] ?? 0, peak: s[s.length - 1] ?? 0 };
    }
    return out;
  }
}

/**
 * BENCH_CAPACITY_PREFILL: this month's partitions first hold that many ended requests (95 % with
 * their clear, their lone attempt stored as it) of 2,000 other buyers and two other suppliers, with
 * random (v4) ids, as a database that has served for a while holds (testkit/scale-rows.ts, books
 * balanced); their offers are cancelled, so the bench's requests route as they do on an empty
 * database.
 */
async function prefillMonth(databaseUrl: string, requests: number): Promise<Record<string, unknown>> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const made = await generateScaleRows(c, {
      requests,
      months: 1,
      buyers: 2_000,
      suppliers: 2,
      now: new Date(),
      loneAttemptAsClear: true,
    });
    await c.query(
      `UPDATE offers SET status = 'cancelled' WHERE upstream_key_id IN (SELECT id FROM upstream_keys WHERE label = 'scale')`,
    );
    await c.query("VACUUM ANALYZE inference_requests, clears");
    const pages = await c.query<{ name: string; pages: number }>(
      `SELECT p.relname AS name, sum(c.relpages)::int AS pages
         FROM pg_class p JOIN pg_inherits i ON i.inhparent = p.oid JOIN pg_class c ON c.oid = i.inhrelid
        WHERE p.relname IN ('inference_requests_pkey', 'clears_pkey') GROUP BY 1 ORDER BY 1`,
    );
    return {
      requests: made.requests,
      clears: made.clears,
      months: made.months,
      loadMs: Math.round(made.loadMs),
      primaryKeyPages: Object.fromEntries(pages.rows.map((p) => [p.name, p.pages])),
    };
  } finally {
    await c.end();
  }
}

export async function benchCapacity(emit: Emit): Promise<void> {
  const order = numbers("BENCH_CAPACITY_PROCESSES", "1,2,4,4,2,1");
  const requests = one("BENCH_CAPACITY_REQUESTS", 6_000);
  const concurrency = one("BENCH_CAPACITY_CONCURRENCY", 64);
  const buyerCount = one("BENCH_CAPACITY_BUYERS", 16);
  const poolSize = one("BENCH_CAPACITY_DB_POOL_SIZE", 8);
  const redis = new SoakRedis(await freePort());
  await redis.start();
  const { sim, world, app, buyers } = await marketWorld(buyerCount, { REDIS_URL: redis.url });
  const dbName = new URL(world.databaseUrl).pathname.slice(1);
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  const dbOid = Number(
    (await admin.query<{ oid: string }>("SELECT oid::text FROM pg_database WHERE datname = $1", [dbName])).rows[0]?.oid,
  );
  const prefill = one("BENCH_CAPACITY_PREFILL", 0);
  if (prefill > 0) emit({ bench: "capacity.prefill", ...(await prefillMonth(world.databaseUrl, prefill)) });
  const apis: Api[] = [];
  const start = async (i: number): Promise<Api> => {
    const name = `capacity-api-${i + 1}`;
    const url = new URL(world.databaseUrl);
    url.searchParams.set("application_name", name);
    const port = await freePort();
    const env = serviceEnv(app, sim, world, port, {
      DATABASE_URL: url.toString(),
      REDIS_URL: redis.url,
      DB_POOL_SIZE: String(poolSize),
    });
    const child = track(spawnService(env));
    const api = { name, url: `http://127.0.0.1:${port}`, child };
    await waitForHttp(`${api.url}/healthz`, 90_000, child);
    return api;
  };
  const stop = async (api: Api) => {
    api.child.kill("SIGTERM");
    await waitForExit(api.child, 30_000).catch(() => api.child.kill("SIGKILL"));
  };
  const send = (targets: Api[]) => (i: number) =>
    post(
      `${(targets[i % targets.length] as Api).url}/v1/chat/completions`,
      (buyers[Math.floor(i / targets.length) % buyers.length] as { apiKey: string }).apiKey,
      CHAT_BODY,
    );
  const backendPids = async () =>
    (await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1", [dbName])).rows.map(
      (r) => r.pid,
    );
  const databaseSize = async () =>
    Number((await admin.query<{ b: string }>("SELECT pg_database_size($1)::text AS b", [dbName])).rows[0]?.b ?? 0);
  // per-function calls and time (track_functions, set on the bench's database before any API process
  // connects), and the database's commits: where a clear's Postgres time goes, and its transactions
  await admin.query(`ALTER DATABASE "${dbName}" SET track_functions = 'pl'`);
  const walByRelationOf = async (byFile: Map<string, { bytes: number; records: number }>, clears: number) => {
    const c = new pg.Client({ connectionString: world.databaseUrl });
    await c.connect();
    try {
      return await relationNames(c, byFile, clears);
    } finally {
      await c.end();
    }
  };
  const dbStats = async () => {
    const c = new pg.Client({ connectionString: world.databaseUrl });
    await c.connect();
    try {
      await c.query("SELECT pg_stat_clear_snapshot()");
      const f = await c.query<{ f: string; calls: string; total: number; self: number }>(
        "SELECT funcname AS f, calls::text, total_time AS total, self_time AS self FROM pg_stat_user_functions",
      );
      const d = await c.query<{ commits: string }>(
        "SELECT xact_commit::text AS commits FROM pg_stat_database WHERE datname = current_database()",
      );
      return {
        functions: new Map(f.rows.map((r) => [r.f, { calls: Number(r.calls), total: r.total, self: r.self }])),
        commits: Number(d.rows[0]?.commits ?? 0),
      };
    } finally {
      await c.end();
    }
  };
  const redisAdmin = app.rt.redis.command;
  const redisCommands = async () =>
    Number(/total_commands_processed:(\d+)/.exec(await redisAdmin.info("stats"))?.[1] ?? 0);

  /** one sample of the connections: Postgres by application_name and state, Redis by process and client name */
  const sampleConnections = async (targets: Api[], pgSamples: Samples, redisSamples: Samples) => {
    const rows = (
      await admin.query<{ app: string; state: string | null; locked: boolean; n: string }>(
        `SELECT application_name AS app, state, wait_event_type IS NOT DISTINCT FROM 'Lock' AS locked,
                count(*)::text AS n
           FROM pg_stat_activity WHERE datname = $1 GROUP BY 1, 2, 3`,
        [dbName],
      )
    ).rows;
    const pgRound: Record<string, number> = {};
    const add = (k: string, n: number) => {
      pgRound[k] = (pgRound[k] ?? 0) + n;
    };
    for (const r of rows) {
      const who = r.app.startsWith("capacity-api-") ? r.app : "bench (fixtures)";
      const n = Number(r.n);
      add(`${who}.open`, n);
      // running a statement or inside a transaction: what a pooler would have to give it
      if (r.state && r.state !== "idle") add(`${who}.busy`, n);
      if (who !== "bench (fixtures)") {
        add("apis.open", n);
        if (r.state && r.state !== "idle") add("apis.busy", n);
        // waiting for a row or transaction lock another backend holds: the hot rows
        if (r.locked) add("apis.waitingForLock", n);
      }
    }
    pgSamples.round(pgRound);
    const list = String(await redisAdmin.client("LIST"));
    const sockets = tcpSockets();
    const redisRound: Record<string, number> = {};
    for (const api of targets) {
      const ports = localPortsOf(api.child.pid ?? 0, sockets);
      for (const line of list.split("\n")) {
        const port = Number(/ addr=[^ ]*:(\d+) /.exec(` ${line}`)?.[1]);
        if (!ports.has(port)) continue;
        const name = /name=(\S*)/.exec(line)?.[1] || "(unnamed)";
        for (const k of [`${api.name}.open`, `${api.name}.${name}`, "apis.open"])
          redisRound[k] = (redisRound[k] ?? 0) + 1;
      }
    }
    redisSamples.round(redisRound);
  };

  const runs: { processes: number; clearsPerSecond: number }[] = [];
  try {
    for (const [k, n] of order.entries()) {
      while (apis.length > n) await stop(apis.pop() as Api);
      while (apis.length < n) apis.push(await start(apis.length));
      const targets = apis.slice(0, n);
      // warm-up: JIT, pools, escrow slices and gate leases of every process
      await load(Math.max(600, 300 * n), concurrency, send(targets));
      const loadBefore = loadavg().map((x) => +x.toFixed(2));
      const pids: Record<string, number | undefined> = { bench: process.pid, ownRedis: redis.pid };
      for (const a of targets) pids[a.name] = a.child.pid;
      const backends0 = await backendPids();
      const ticks0 = new Map(backends0.map((p) => [p, procTicks(p)?.ticks ?? 0]));
      const clears0 = await app.rt.db.clear.count();
      const size0 = await databaseSize();
      const redis0 = await redisCommands();
      const stats0 = await dbStats();
      // at scale, every run starts where a checkpoint has just been: the first change to each page
      // after it writes the whole page (docs/performance.md "Record ids in time order")
      if (prefill > 0) await admin.query("CHECKPOINT");
      const wal0 = await walPosition(admin);
      const c0 = cpuSnapshot(pids);
      const pgSamples = new Samples();
      const redisSamples = new Samples();
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          await sampleConnections(targets, pgSamples, redisSamples).catch(() => undefined);
          await new Promise((r) => setTimeout(r, 250));
        }
      })();
      const r = await load(requests, concurrency, send(targets));
      const c1 = cpuSnapshot(pids);
      const wal1 = await walPosition(admin);
      sampling = false;
      await sampler;
      const redis1 = await redisCommands();
      // the stats collector publishes a backend's counters at its transaction's end, at most once a second
      await new Promise((r) => setTimeout(r, 1100));
      const stats1 = await dbStats();
      const clears = (await app.rt.db.clear.count()) - clears0;
      const size1 = await databaseSize();
      const backends1 = await backendPids();
      let backendTicks = 0;
      for (const p of new Set([...backends0, ...backends1])) {
        const t = procTicks(p);
        if (t) backendTicks += t.ticks - (ticks0.get(p) ?? 0);
      }
      const loadAfter = loadavg().map((x) => +x.toFixed(2));
      const wal = await databaseWal(admin, dbOid, wal0, wal1);
      const walByRelation = "unavailable" in wal ? null : await walByRelationOf(wal.byFile, clears);
      const cpu = cpuPerRequest(c0, c1, clears);
      const byGroup = (cpu.cpuMsPerRequest ?? {}) as Record<string, number>;
      const perProcess = targets.map((a) => byGroup[a.name] ?? 0);
      const clearsPerSecond = Math.round((clears / r.wallMs) * 1000);
      runs.push({ processes: n, clearsPerSecond });
      const totals = series(r.samples, (s) => s.totalMs);
      emit({
        bench: "capacity.run",
        run: k + 1,
        processes: n,
        concurrency,
        buyers: buyerCount,
        dbPoolSize: poolSize,
        requests,
        // requests that failed (no answer, or not 200): counted, not fatal up to 1% (client.ts `load`)
        errors: r.errors,
        clears,
        clearsPerSecond,
        p50Ms: ms(pct(totals, 50)),
        p99Ms: ms(pct(totals, 99)),
        cpuMsPerClear: {
          apiProcesses: +perProcess.reduce((a, b) => a + b, 0).toFixed(3),
          perApiProcess: perProcess,
          benchLoadAndSimulator: byGroup.bench ?? null,
          postgresBackendsOfThisDatabase: +((backendTicks * TICK_MS) / clears).toFixed(3),
          postgresAllProcesses: byGroup.postgres ?? null,
          redisAllProcesses: byGroup.redis ?? null,
          redis: byGroup.ownRedis ?? null,
          machine: byGroup.machine ?? null,
        },
        machineBusyPct: cpu.machineBusyPct,
        wal:
          "unavailable" in wal
            ? { unavailable: wal.unavailable, clusterBytesPerClear: Math.round(wal.clusterBytes / clears) }
            : {
                bytesPerClear: Math.round(wal.bytes / clears),
                recordsPerClear: +(wal.records / clears).toFixed(2),
                writeTransactionsPerClear: +(wal.transactions / clears).toFixed(3),
                clusterBytesPerClear: Math.round(wal.clusterBytes / clears),
                // per clear, by the relation (table or index) each record's first block is in
                byRelation: walByRelation,
              },
        // commits of the bench's database per clear (the bench's own counting queries included), and
        // each stored function's calls and time (ms, its own and with what it calls) per clear
        commitsPerClear: +((stats1.commits - stats0.commits) / clears).toFixed(3),
        functionsPerClear: Object.fromEntries(
          [...stats1.functions]
            .map(([f, b]) => {
              const a = stats0.functions.get(f) ?? { calls: 0, total: 0, self: 0 };
              return [
                f,
                {
                  calls: +((b.calls - a.calls) / clears).toFixed(3),
                  ms: +((b.total - a.total) / clears).toFixed(4),
                  selfMs: +((b.self - a.self) / clears).toFixed(4),
                },
              ] as const;
            })
            .filter(([, x]) => x.calls > 0),
        ),
        redisCommandsPerClear: +((redis1 - redis0) / clears).toFixed(2),
        // what the database grew by (tables, indexes, TOAST; no vacuum reclaims it within a run)
        diskBytesPerClear: Math.round((size1 - size0) / clears),
        connections: { postgres: pgSamples.summary(), redis: redisSamples.summary() },
        loadavg: { before: loadBefore, after: loadAfter },
        method:
          "closed loop, requests round-robin over the API processes; CPU from /proc; WAL attributed to the bench's database with pg_waldump (cluster-wide beside it); connections sampled every 250 ms",
      });
    }
  } finally {
    await Promise.all(apis.map(stop));
    await admin.end().catch(() => undefined);
    await app.close();
    await world.drop();
    await sim.close();
    await redis.stop();
  }
  const byCount = new Map<number, number[]>();
  for (const r of runs) byCount.set(r.processes, [...(byCount.get(r.processes) ?? []), r.clearsPerSecond]);
  emit({
    bench: "capacity.summary",
    cpus: cpus().length,
    clearsPerSecond: Object.fromEntries([...byCount].map(([n, xs]) => [`${n}_processes`, xs])),
    loadavg: loadavg().map((x) => +x.toFixed(2)),
  });
}
