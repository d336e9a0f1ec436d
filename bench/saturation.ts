// Issue 19 target 3: clears/s ≥ 50% of the bare pass-through proxy's requests/s, each at the
// concurrency that saturates it. Both (and, for issue 32, Portkey's gateway) are swept over the same
// concurrencies (closed loop, the order of the peers rotated per level) and each is taken at its best
// level.
import { load, post } from "./client.js";
import { cpuPerRequest, cpuSnapshot } from "./cpu.js";
import { CHAT_BODY, type Market } from "./market.js";
import type { PortkeyPeer } from "./portkey.js";
import { ms, pct, portkeyRatioLine, series, serverTimingP50, targetLine } from "./stats.js";

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

export async function benchSaturation(m: Market, emit: Emit, portkey: PortkeyPeer | null): Promise<void> {
  const direct = () => post(`${m.sim.baseUrl}/chat/completions`, m.directKey, CHAT_BODY);
  const proxy = () => post(`${m.proxyUrl}/v1/chat/completions`, m.directKey, CHAT_BODY);
  const service = () => post(`${m.svcUrl}/v1/chat/completions`, m.buyer.apiKey, CHAT_BODY);
  await load(300, 16, direct);
  await load(300, 16, proxy);
  await load(300, 16, service);
  if (portkey) await load(300, 16, () => portkey.chat(CHAT_BODY));
  const sweep: {
    concurrency: number;
    requests: number;
    directPerSecond: number;
    proxyPerSecond: number;
    clearsPerSecond: number;
    portkeyPerSecond?: number;
    proxyP50Ms: number;
    serviceP50Ms: number;
    portkeyP50Ms?: number;
    /** failed requests of each peer at this level (client.ts `load`: fatal past 1%) */
    errors: { direct: number; proxy: number; service: number; portkey?: number };
  }[] = [];
  let best: { rate: number; concurrency: number; extra: Record<string, unknown> } = {
    rate: 0,
    concurrency: 0,
    extra: {},
  };
  let bestPortkey: { rate: number; concurrency: number; cpu: ReturnType<typeof cpuPerRequest> | null } = {
    rate: 0,
    concurrency: 0,
    cpu: null,
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
    const runPortkey = async (peer: PortkeyPeer) => {
      const pids = { bench: process.pid, portkey: peer.pid };
      const c0 = cpuSnapshot(pids);
      const r = await load(requests, c, () => peer.chat(CHAT_BODY));
      const cpu = cpuPerRequest(c0, cpuSnapshot(pids), requests);
      // Portkey uses neither Postgres nor Redis: their CPU here is other work on the shared servers
      // (and reads negative when a backend exits during the run), so it is left out
      const byGroup = cpu.cpuMsPerRequest as Record<string, number> | null;
      if (byGroup) {
        delete byGroup.postgres;
        delete byGroup.redis;
      }
      return { ...r, cpu };
    };
    // rotate which goes first, so none always follows another's leftovers
    const got: {
      proxy?: Awaited<ReturnType<typeof runProxy>>;
      service?: Awaited<ReturnType<typeof runService>>;
      portkey?: Awaited<ReturnType<typeof runPortkey>>;
    } = {};
    const steps = [
      async () => {
        got.proxy = await runProxy();
      },
      async () => {
        got.service = await runService();
      },
    ];
    if (portkey)
      steps.push(async () => {
        got.portkey = await runPortkey(portkey);
      });
    for (let j = 0; j < steps.length; j++) await steps[(i + j) % steps.length]?.();
    const { proxy: p, service: s, portkey: k } = got;
    if (!p || !s) throw new Error("saturation: a peer was not run");
    const p50 = (samples: typeof p.samples) =>
      ms(
        pct(
          series(samples, (x) => x.totalMs),
          50,
        ),
      );
    // answered requests per second: a failed request (counted in `errors`) is no clear
    const perSecond = (r: { samples: unknown[]; wallMs: number }) => Math.round((r.samples.length / r.wallMs) * 1000);
    const point: (typeof sweep)[number] = {
      concurrency: c,
      requests,
      directPerSecond: perSecond(d),
      proxyPerSecond: perSecond(p),
      clearsPerSecond: perSecond(s),
      proxyP50Ms: p50(p.samples),
      serviceP50Ms: p50(s.samples),
      errors: { direct: d.errors, proxy: p.errors, service: s.errors },
    };
    if (k) {
      point.portkeyPerSecond = perSecond(k);
      point.portkeyP50Ms = p50(k.samples);
      point.errors.portkey = k.errors;
      if (point.portkeyPerSecond > bestPortkey.rate)
        bestPortkey = { rate: point.portkeyPerSecond, concurrency: c, cpu: k.cpu };
    }
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
  if (!portkey) return;
  // what Portkey's best level cost: CPU per request by process (portkey = its own process)
  emit({
    bench: "saturation.portkey_at_best",
    concurrency: bestPortkey.concurrency,
    requestsPerSecond: bestPortkey.rate,
    cpu: bestPortkey.cpu,
  });
  // by process group (bench, service or portkey, postgres, redis) and the machine
  type ByGroup = Record<string, number> | null | undefined;
  const serviceCpu = (best.extra.cpu as ReturnType<typeof cpuPerRequest> | undefined)?.cpuMsPerRequest as ByGroup;
  const portkeyCpu = bestPortkey.cpu?.cpuMsPerRequest as ByGroup;
  emit(
    portkeyRatioLine("saturation", {
      service: best.rate,
      portkey: bestPortkey.rate,
      unit: "requests/s",
      higherIsBetter: true,
      serviceConcurrency: best.concurrency,
      portkeyConcurrency: bestPortkey.concurrency,
      portkeyBestAtSweepTop: bestPortkey.concurrency === ls[ls.length - 1],
      // CPU ms per request of the peer's own process, and of the whole machine, at each one's best level
      serviceCpuMsPerRequest: serviceCpu?.service ?? null,
      portkeyCpuMsPerRequest: portkeyCpu?.portkey ?? null,
      serviceMachineCpuMsPerRequest: serviceCpu?.machine ?? null,
      portkeyMachineCpuMsPerRequest: portkeyCpu?.machine ?? null,
      method:
        "closed loop at each concurrency swept, the peers' order rotated per level; ratio = the service's clears/s at its best level / Portkey's requests/s at its best",
    }),
  );
}
