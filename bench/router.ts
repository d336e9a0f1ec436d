// The router figures of issue 6: the same buffered chat request straight to the simulator and
// through the service (settlement included), side by side in one run; and streaming TTFB overhead.
import { spawn } from "node:child_process";
import http from "node:http";
import { performance } from "node:perf_hooks";
import type { UpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { startUpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { assertBooksBalance } from "../testkit/books.js";
import { freePort, isolatedWorld, startTestApp } from "../testkit/harness.js";
import { addSupply, CATALOG_KEY, fundedBuyerKey, simEnv } from "../testkit/market.js";
import { spawnMain, waitForExit, waitForHttp } from "../testkit/spawn.js";
import { cpuPerRequest, cpuSnapshot } from "./cpu.js";

const MODEL = "zai-org-glm-5-1";
const BODY = {
  model: MODEL,
  messages: [{ role: "user", content: "Benchmark request [[sim:tokens=16]]" }],
  max_tokens: 32,
};
/** One flat-priced image: the cheapest job the catalog has. */
const IMAGE_BODY = { model: "venice-sd35", prompt: "bench", variants: 1 };

export function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function load(
  total: number,
  concurrency: number,
  one: () => Promise<number>,
): Promise<{ lat: number[]; wallMs: number }> {
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next++;
        lat.push(await one());
      }
    }),
  );
  const wallMs = performance.now() - t0;
  lat.sort((a, b) => a - b);
  return { lat, wallMs };
}

/** A lean keep-alive HTTP client (node:http): the load generator must not be the bottleneck. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/** `Server-Timing` headers of the service's answers, while `timings` is set */
let timings: string[] | undefined;

function post(url: string, key: string, body: unknown, stream = false): Promise<number> {
  const payload = JSON.stringify(stream ? { ...(body as object), stream: true } : body);
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = performance.now();
    let ttfb = 0;
    const req = http.request(
      {
        agent,
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
        },
      },
      (res) => {
        const st = res.headers["server-timing"];
        if (timings && typeof st === "string") timings.push(st);
        let buf = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          if (stream && !ttfb) {
            buf += d;
            if (/"content":"[^"]/.test(buf)) ttfb = performance.now() - s;
          }
        });
        res.on("end", () => {
          if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
          else resolve(stream ? ttfb : performance.now() - s);
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** p50 of each `Server-Timing` phase (`name;dur=ms`) over many answers. */
function serverTimingP50(headers: string[]): Record<string, number> {
  const byName = new Map<string, number[]>();
  for (const h of headers) {
    for (const part of h.split(",")) {
      const m = /^\s*(\w+);dur=([\d.]+)/.exec(part);
      if (m?.[1] && m[2]) byName.set(m[1], [...(byName.get(m[1]) ?? []), Number(m[2])]);
    }
  }
  const out: Record<string, number> = {};
  for (const [name, xs] of byName)
    out[name] = +pct(
      xs.sort((a, b) => a - b),
      50,
    ).toFixed(3);
  return out;
}

/** ids taken by `roundTrips` itself */
let ownXids = 0;

/**
 * Postgres write transactions (transaction ids assigned so far, cluster-wide, less those this
 * function took: exact at once, where `pg_stat_database` counts a commit only once its backend
 * flushes its statistics, up to seconds later) and Redis commands (the whole server) so far.
 */
interface RoundTrips {
  xacts: number;
  redisCommands: number;
}

async function roundTrips(app: Awaited<ReturnType<typeof startTestApp>>): Promise<RoundTrips> {
  const x = await app.rt.sql.query<{ n: string }>("SELECT pg_current_xact_id()::text AS n");
  ownXids++;
  const info = await app.rt.redis.command.info("stats");
  return {
    xacts: Number(x.rows[0]?.n ?? 0) - ownXids,
    redisCommands: Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0),
  };
}

/** Round trips per request between two `roundTrips` readings. */
function roundTripsPer(a: RoundTrips, b: RoundTrips, requests: number) {
  return {
    postgresTransactions: +((b.xacts - a.xacts) / requests).toFixed(2),
    redisCommands: +((b.redisCommands - a.redisCommands) / requests).toFixed(2),
  };
}

/** The bare pass-through proxy (bench/passthrough.ts) in its own process; resolves once it listens. */
async function startPassthrough(upstreamBaseUrl: string) {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "bench/passthrough.ts"], {
    env: { PATH: process.env.PATH ?? "", PORT: String(port), UPSTREAM_BASE_URL: upstreamBaseUrl },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
    child.once("exit", (code) => reject(new Error(`passthrough exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

export async function benchRouter(emit: (f: Record<string, unknown>) => void): Promise<void> {
  const sim: UpstreamSimulator = await startUpstreamSimulator({ keys: [{ key: CATALOG_KEY, diemMicro: 0n }] });
  const world = await isolatedWorld();
  const app = await startTestApp({
    databaseUrl: world.databaseUrl,
    prefix: world.prefix,
    env: { ...simEnv(sim), KEY_MAX_IN_FLIGHT: "256", LOG_LEVEL: "silent" },
  });
  try {
    await app.rt.services.catalog.sync();
    const supply = await addSupply(
      app,
      sim,
      [40, 40, 40, 40].map((p) => ({
        priceCents: p,
        quantityMicroDiem: 900_000_000n,
        keyBalanceMicroDiem: 1_000_000_000n,
      })),
    );
    const directKey = supply.keys[0]?.secret ?? "";
    const buyer = await fundedBuyerKey(app, 900_000_000n);
    // the service under test runs in its own process, exactly as `npm start` runs it
    const port = await freePort();
    const svc = spawnMain(
      ["--role=api"],
      {
        ...simEnv(sim),
        PORT: String(port),
        DATABASE_URL: world.databaseUrl,
        REDIS_PREFIX: world.prefix,
        KEY_MAX_IN_FLIGHT: "256",
        LOG_LEVEL: "error",
        PAY_TO: "0x1111111111111111111111111111111111111111",
        SESSION_SECRET: "bench-session-secret-bench-session-secret",
        KEY_ENCRYPTION_KEY: app.rt.config.secrets.keyEncryptionKey.toString("hex"),
        CHAIN_RPC_URL: "http://127.0.0.1:9",
      },
      // e.g. BENCH_SERVICE_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the service
      (process.env.BENCH_SERVICE_NODE_ARGS ?? "").split(" ").filter(Boolean),
    );
    const svcUrl = `http://127.0.0.1:${port}`;
    try {
      await waitForHttp(`${svcUrl}/healthz`, 30_000, svc);
      const total = 2000;
      const concurrency = 32;
      // warm up both paths
      await load(200, 8, () => post(`${sim.baseUrl}/chat/completions`, directKey, BODY));
      await load(200, 8, () => post(`${svcUrl}/v1/chat/completions`, buyer.apiKey, BODY));

      const pids = { bench: process.pid, service: svc.pid };
      const c0 = cpuSnapshot(pids);
      const direct = await load(total, concurrency, () => post(`${sim.baseUrl}/chat/completions`, directKey, BODY));
      const c1 = cpuSnapshot(pids);
      const round0 = await roundTrips(app);
      timings = [];
      const via = await load(total, concurrency, () => post(`${svcUrl}/v1/chat/completions`, buyer.apiKey, BODY));
      const loadedPhases = serverTimingP50(timings);
      timings = undefined;
      const round1 = await roundTrips(app);
      const c2 = cpuSnapshot(pids);
      const directCpu = cpuPerRequest(c0, c1, total);
      // each target beside the same figure for a bare pass-through proxy measured in this run
      const figures = {
        addedP50Ms: { target: 2, service: pct(via.lat, 50) - pct(direct.lat, 50), floor: Number.NaN },
        addedP99Ms: { target: 10, service: pct(via.lat, 99) - pct(direct.lat, 99), floor: Number.NaN },
        clearsPerSecond: { target: 1000, service: (total / via.wallMs) * 1000, floor: Number.NaN },
        streamingTtfbOverheadP50Ms: { target: 2, service: Number.NaN, floor: Number.NaN },
      };
      const viaCpu = cpuPerRequest(c1, c2, total);
      emit({
        bench: "router.buffered_chat",
        requests: total,
        concurrency,
        directP50Ms: +pct(direct.lat, 50).toFixed(3),
        directP99Ms: +pct(direct.lat, 99).toFixed(3),
        serviceP50Ms: +pct(via.lat, 50).toFixed(3),
        serviceP99Ms: +pct(via.lat, 99).toFixed(3),
        addedP50Ms: +(pct(via.lat, 50) - pct(direct.lat, 50)).toFixed(3),
        addedP99Ms: +(pct(via.lat, 99) - pct(direct.lat, 99)).toFixed(3),
        clearsPerSecond: Math.round((total / via.wallMs) * 1000),
        // the service's own Server-Timing under this load: admission, upstream, settlement
        serverTimingP50Ms: loadedPhases,
        targets: { addedP50Ms: 2, addedP99Ms: 10, clearsPerSecond: 1000 },
      });
      // The load client and the simulator share the service's cores, so at c = 32 the run is CPU-bound:
      // what each part costs per request, and what latency the same CPU mix allows at best
      // (closed loop: p50 ≈ concurrency ÷ throughput, throughput ≤ cores ÷ CPU per request).
      const bound = viaCpu.cpuBoundPerSecond;
      emit({
        bench: "router.buffered_chat_cpu",
        concurrency,
        direct: directCpu,
        service: viaCpu,
        // what one clear cost the shared servers (all processes on this database and Redis)
        perClear: roundTripsPer(round0, round1, total),
        bestAddedP50MsAtThisCpu: bound ? +((concurrency / bound) * 1000 - pct(direct.lat, 50)).toFixed(3) : null,
      });

      // The floor: the same requests through a bare pass-through proxy (no auth, clearing, gates or
      // settlement), also in its own process. No proxy on this machine adds less than this.
      const proxy = await startPassthrough(sim.baseUrl);
      try {
        await load(200, 8, () => post(`${proxy.url}/v1/chat/completions`, directKey, BODY));
        const p0 = cpuSnapshot({ bench: process.pid, proxy: proxy.child.pid });
        const bare = await load(total, concurrency, () => post(`${proxy.url}/v1/chat/completions`, directKey, BODY));
        const p1 = cpuSnapshot({ bench: process.pid, proxy: proxy.child.pid });
        const bareStreams = await load(300, 8, () => post(`${proxy.url}/v1/chat/completions`, directKey, BODY, true));
        const directStreams = await load(300, 8, () => post(`${sim.baseUrl}/chat/completions`, directKey, BODY, true));
        figures.addedP50Ms.floor = pct(bare.lat, 50) - pct(direct.lat, 50);
        figures.addedP99Ms.floor = pct(bare.lat, 99) - pct(direct.lat, 99);
        figures.clearsPerSecond.floor = (total / bare.wallMs) * 1000;
        figures.streamingTtfbOverheadP50Ms.floor = pct(bareStreams.lat, 50) - pct(directStreams.lat, 50);
        emit({
          bench: "router.passthrough_floor",
          requests: total,
          concurrency,
          addedP50Ms: +(pct(bare.lat, 50) - pct(direct.lat, 50)).toFixed(3),
          addedP99Ms: +(pct(bare.lat, 99) - pct(direct.lat, 99)).toFixed(3),
          requestsPerSecond: Math.round((total / bare.wallMs) * 1000),
          cpu: cpuPerRequest(p0, p1, total),
          streamingTtfbOverheadP50Ms: +(pct(bareStreams.lat, 50) - pct(directStreams.lat, 50)).toFixed(3),
        });
      } finally {
        proxy.child.kill("SIGTERM");
      }

      timings = [];
      const serial = await load(300, 1, () => post(`${svcUrl}/v1/chat/completions`, buyer.apiKey, BODY));
      const phases = serverTimingP50(timings);
      timings = undefined;
      const serialDirect = await load(300, 1, () => post(`${sim.baseUrl}/chat/completions`, directKey, BODY));
      emit({
        bench: "router.buffered_chat_serial",
        requests: 300,
        concurrency: 1,
        directP50Ms: +pct(serialDirect.lat, 50).toFixed(3),
        serviceP50Ms: +pct(serial.lat, 50).toFixed(3),
        addedP50Ms: +(pct(serial.lat, 50) - pct(serialDirect.lat, 50)).toFixed(3),
        // the service's own Server-Timing: admission (gates + hold), upstream, settlement
        serverTimingP50Ms: phases,
      });

      // streaming time to first content, direct and through the service, under load and alone; both
      // paths warmed up first, as the buffered ones are
      await load(200, 8, () => post(`${sim.baseUrl}/chat/completions`, directKey, BODY, true));
      await load(200, 8, () => post(`${svcUrl}/v1/chat/completions`, buyer.apiKey, BODY, true));
      for (const [name, requests, concurrency] of [
        ["router.streaming_ttfb", 300, 8],
        ["router.streaming_ttfb_serial", 200, 1],
      ] as const) {
        const sd = await load(requests, concurrency, () =>
          post(`${sim.baseUrl}/chat/completions`, directKey, BODY, true),
        );
        const streamTimings: string[] = [];
        timings = streamTimings;
        const s0 = cpuSnapshot(pids);
        const rt0 = await roundTrips(app);
        const sv = await load(requests, concurrency, () =>
          post(`${svcUrl}/v1/chat/completions`, buyer.apiKey, BODY, true),
        );
        const rt1 = await roundTrips(app);
        const streamCpu = cpuPerRequest(s0, cpuSnapshot(pids), requests);
        timings = undefined;
        if (concurrency > 1) figures.streamingTtfbOverheadP50Ms.service = pct(sv.lat, 50) - pct(sd.lat, 50);
        emit({
          bench: name,
          requests,
          concurrency,
          directTtfbP50Ms: +pct(sd.lat, 50).toFixed(3),
          serviceTtfbP50Ms: +pct(sv.lat, 50).toFixed(3),
          ttfbOverheadP50Ms: +(pct(sv.lat, 50) - pct(sd.lat, 50)).toFixed(3),
          serverTimingP50Ms: serverTimingP50(streamTimings),
          // under load: CPU per stream (the whole stream, settlement included), how busy the machine
          // was, round trips per stream (a serial run is too short for /proc's CPU ticks), the target
          ...(concurrency > 1
            ? {
                cpuMsPerStream: streamCpu.cpuMsPerRequest,
                machineBusyPct: streamCpu.machineBusyPct,
                perStream: roundTripsPer(rt0, rt1, requests),
                targets: { ttfbOverheadP50Ms: 2 },
              }
            : {}),
        });
      }
      // one line to read the run by: each target, the service's figure and the floor (what the bare
      // pass-through proxy reached in this same run; a latency target below it, or a throughput
      // target above it, is out of reach for any proxy on this machine, whatever it does per request)
      const verdicts: Record<string, unknown> = {};
      for (const [name, f] of Object.entries(figures)) {
        const higherIsBetter = name === "clearsPerSecond";
        verdicts[name] = {
          target: f.target,
          service: +f.service.toFixed(3),
          passthroughFloor: +f.floor.toFixed(3),
          met: higherIsBetter ? f.service >= f.target : f.service <= f.target,
          reachableByAnyProxyHere: higherIsBetter ? f.floor >= f.target : f.floor <= f.target,
        };
      }
      emit({ bench: "router.targets", ...verdicts });

      // images: one job in flight per wallet, so the load runs one lane per buyer (wallet)
      {
        const lanes = 16;
        const perLane = 50;
        const buyers = await Promise.all(Array.from({ length: lanes }, () => fundedBuyerKey(app, 100_000_000n)));
        const direct = (i: number) =>
          post(`${sim.baseUrl}/image/generate`, directKey, { ...IMAGE_BODY, prompt: `d${i}` });
        const via = (key: string, i: number) =>
          post(`${svcUrl}/v1/image/generate`, key, { ...IMAGE_BODY, prompt: `s${i}` });
        await load(100, 8, () => direct(0));
        await Promise.all(buyers.map((b) => load(10, 1, () => via(b.apiKey, 0))));
        const d = await load(lanes * perLane, lanes, () => direct(1));
        const t0 = performance.now();
        const lat: number[] = [];
        await Promise.all(
          buyers.map(async (b) => {
            for (let i = 0; i < perLane; i++) lat.push(await via(b.apiKey, i));
          }),
        );
        const wallMs = performance.now() - t0;
        lat.sort((a, b) => a - b);
        emit({
          bench: "router.image",
          requests: lanes * perLane,
          concurrency: lanes,
          directP50Ms: +pct(d.lat, 50).toFixed(3),
          serviceP50Ms: +pct(lat, 50).toFixed(3),
          addedP50Ms: +(pct(lat, 50) - pct(d.lat, 50)).toFixed(3),
          addedP99Ms: +(pct(lat, 99) - pct(d.lat, 99)).toFixed(3),
          clearsPerSecond: Math.round(((lanes * perLane) / wallMs) * 1000),
        });
      }
    } finally {
      const out = svc.output();
      if (out.stdout.length + out.stderr.length > 10_000) {
        emit({
          bench: "router.service_output",
          stdoutBytes: out.stdout.length,
          stderrBytes: out.stderr.length,
          sample: (out.stdout || out.stderr).slice(0, 600),
        });
      }
      svc.kill("SIGTERM");
      await waitForExit(svc, 20_000).catch(() => svc.kill("SIGKILL"));
    }
    const clears = await app.rt.db.clear.count();
    let balanced = true;
    try {
      await assertBooksBalance(app.rt.db);
    } catch {
      balanced = false;
    }
    emit({ bench: "router.books", clears, balanced });
  } finally {
    await app.close();
    await world.drop();
    await sim.close();
  }
}
