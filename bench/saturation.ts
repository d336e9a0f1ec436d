// Issue 19 target 3: clears/s ≥ 50% of the bare pass-through proxy's requests/s, each at the
// concurrency that saturates it. Both are swept over the same concurrencies (closed loop, the order
// of proxy and service alternated per level) and each is taken at its best level.
import { load, post } from "./client.js";
import { cpuPerRequest, cpuSnapshot } from "./cpu.js";
import { CHAT_BODY, type Market } from "./market.js";
import { ms, pct, series, serverTimingP50, targetLine } from "./stats.js";

type Emit = (f: Record<string, unknown>) => void;

/** ids taken by `roundTrips` itself */
let ownXids = 0;

/**
 * Postgres write transactions (transaction ids assigned so far, cluster-wide, less those this
 * function took: exact at once, where `pg_stat_database` counts a commit only once its backend
 * flushes its statistics) and Redis commands (the whole server) so far. Other databases on the
 * same server count too: on a shared machine read these as an upper bound.
 */
async function roundTrips(m: Market): Promise<{ xacts: number; redisCommands: number }> {
  const x = await m.app.rt.sql.query<{ n: string }>("SELECT pg_current_xact_id()::text AS n");
  ownXids++;
  const info = await m.app.rt.redis.command.info("stats");
  return {
    xacts: Number(x.rows[0]?.n ?? 0) - ownXids,
    redisCommands: Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0),
  };
}

function levels(): number[] {
  const raw = process.env.BENCH_SATURATION_CONCURRENCY;
  const xs = (raw ?? "8,16,32,64,128,256").split(",").map(Number);
  return xs.filter((x) => Number.isInteger(x) && x > 0);
}

export async function benchSaturation(m: Market, emit: Emit): Promise<void> {
  const direct = () => post(`${m.sim.baseUrl}/chat/completions`, m.directKey, CHAT_BODY);
  const proxy = () => post(`${m.proxyUrl}/v1/chat/completions`, m.directKey, CHAT_BODY);
  const service = () => post(`${m.svcUrl}/v1/chat/completions`, m.buyer.apiKey, CHAT_BODY);
  await load(300, 16, direct);
  await load(300, 16, proxy);
  await load(300, 16, service);
  const sweep: {
    concurrency: number;
    requests: number;
    directPerSecond: number;
    proxyPerSecond: number;
    clearsPerSecond: number;
    proxyP50Ms: number;
    serviceP50Ms: number;
  }[] = [];
  let best: { rate: number; concurrency: number; extra: Record<string, unknown> } = {
    rate: 0,
    concurrency: 0,
    extra: {},
  };
  const ls = levels();
  for (const [i, c] of ls.entries()) {
    const requests = Math.max(1500, c * 40);
    const d = await load(requests, c, direct);
    const runProxy = () => load(requests, c, proxy);
    const runService = async () => {
      const pids = { bench: process.pid, service: m.svcPid };
      const rt0 = await roundTrips(m);
      const c0 = cpuSnapshot(pids);
      const r = await load(requests, c, service);
      const c1 = cpuSnapshot(pids);
      const rt1 = await roundTrips(m);
      return {
        ...r,
        extra: {
          cpu: cpuPerRequest(c0, c1, requests),
          perClear: {
            postgresTransactions: +((rt1.xacts - rt0.xacts) / requests).toFixed(2),
            redisCommands: +((rt1.redisCommands - rt0.redisCommands) / requests).toFixed(2),
          },
          serverTimingP50Ms: serverTimingP50(r.samples),
        },
      };
    };
    // alternate which goes first, so neither always follows the other's leftovers
    const first = i % 2 === 0 ? await runProxy() : await runService();
    const second = i % 2 === 0 ? await runService() : await runProxy();
    const p = i % 2 === 0 ? first : second;
    const s = (i % 2 === 0 ? second : first) as Awaited<ReturnType<typeof runService>>;
    const point = {
      concurrency: c,
      requests,
      directPerSecond: Math.round((requests / d.wallMs) * 1000),
      proxyPerSecond: Math.round((requests / p.wallMs) * 1000),
      clearsPerSecond: Math.round((requests / s.wallMs) * 1000),
      proxyP50Ms: ms(
        pct(
          series(p.samples, (x) => x.totalMs),
          50,
        ),
      ),
      serviceP50Ms: ms(
        pct(
          series(s.samples, (x) => x.totalMs),
          50,
        ),
      ),
    };
    sweep.push(point);
    if (point.clearsPerSecond > best.rate) best = { rate: point.clearsPerSecond, concurrency: c, extra: s.extra };
  }
  const bestProxy = sweep.reduce((a, b) => (b.proxyPerSecond > a.proxyPerSecond ? b : a));
  emit({ bench: "saturation.sweep", sweep });
  // what the service's best level cost: CPU per clear by process, round trips per clear
  emit({ bench: "saturation.service_at_best", concurrency: best.concurrency, ...best.extra });
  emit(
    targetLine("saturation", {
      target: bestProxy.proxyPerSecond * 0.5,
      service: best.rate,
      floor: bestProxy.proxyPerSecond,
      unit: "requests/s",
      higherIsBetter: true,
      ratio: +(best.rate / bestProxy.proxyPerSecond).toFixed(3),
      targetRatio: 0.5,
      serviceConcurrency: best.concurrency,
      floorConcurrency: bestProxy.concurrency,
      // a best level at the top of the sweep may not be saturation yet: sweep higher to know
      serviceBestAtSweepTop: best.concurrency === ls[ls.length - 1],
      method: "closed loop at each concurrency swept; clears/s at the service's best level against the proxy's best",
    }),
  );
}
