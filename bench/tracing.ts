// Issue 31: what tracing costs. Two fresh service processes on the market's world, started alike
// but for OTEL_EXPORTER_OTLP_ENDPOINT (`on`: pointed at an in-process OTLP/HTTP sink that accepts
// and discards; `off`: unset), are measured A/B in the same rounds: serial buffered and streamed
// chat interleaved request by request (the order rotated every round), then closed-loop blocks
// alternated off, on, on, off (a drift in the machine cancels), with each process's CPU per request.
import { freePort } from "../testkit/harness.js";
import { startOtlpReceiver } from "../testkit/otlp.js";
import { waitForExit, waitForHttp } from "../testkit/spawn.js";
import { interleave, load, post, type Sample } from "./client.js";
import { cpuPerRequest, cpuSnapshot } from "./cpu.js";
import { CHAT_BODY, type Market, STREAM_BODY, serviceEnv, spawnService, track } from "./market.js";
import { ms, p50p99 } from "./stats.js";

type Emit = (f: Record<string, unknown>) => void;

function knob(name: string, fallback: number): number {
  const n = Number(process.env[name]);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

/** p50 and p99 of `pick` for both sides, and on − off. */
function sides(off: Sample[], on: Sample[], pick: (s: Sample) => number, what: string) {
  const a = p50p99(off, pick);
  const b = p50p99(on, pick);
  return {
    [`off${what}P50Ms`]: ms(a.p50),
    [`on${what}P50Ms`]: ms(b.p50),
    [`added${what}P50Ms`]: ms(b.p50 - a.p50),
    [`off${what}P99Ms`]: ms(a.p99),
    [`on${what}P99Ms`]: ms(b.p99),
    [`added${what}P99Ms`]: ms(b.p99 - a.p99),
  };
}

/** the median of each round's own difference (on − off, same round) */
function pairedP50(off: Sample[], on: Sample[], pick: (s: Sample) => number): number {
  const d = on.map((x, i) => pick(x) - pick(off[i] ?? x)).sort((x, y) => x - y);
  return ms(d[Math.floor(d.length / 2)] ?? Number.NaN);
}

export async function benchTracing(m: Market, emit: Emit): Promise<void> {
  const rounds = knob("BENCH_TRACING_ROUNDS", 400);
  const blockRequests = knob("BENCH_TRACING_BLOCK", 1000);
  const concurrency = knob("BENCH_TRACING_CONCURRENCY", 16);
  const sink = await startOtlpReceiver({ keep: false });
  const world = { databaseUrl: m.databaseUrl, prefix: m.app.rt.config.redis.prefix };
  const start = async (extra: Record<string, string>) => {
    const port = await freePort();
    const child = track(spawnService(serviceEnv(m.app, m.sim, world, port, extra)));
    return { child, url: `http://127.0.0.1:${port}` };
  };
  const untraced = await start({});
  const traced = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: sink.url });
  const offUrl = untraced.url;
  const onUrl = traced.url;
  try {
    await waitForHttp(`${offUrl}/healthz`, 60_000, untraced.child);
    await waitForHttp(`${onUrl}/healthz`, 60_000, traced.child);
    const chat = (url: string, body: unknown, stream?: "chat") => () =>
      post(`${url}/v1/chat/completions`, m.buyer.apiKey, body, stream);
    const buffered = { off: chat(offUrl, CHAT_BODY), on: chat(onUrl, CHAT_BODY) };
    const streamed = { off: chat(offUrl, STREAM_BODY, "chat"), on: chat(onUrl, STREAM_BODY, "chat") };
    await interleave(100, buffered); // warm-up: JIT, connections, the buyer's escrow in both
    await interleave(50, streamed);
    const sent0 = { ...sink.counts };

    const b = await interleave(rounds, buffered);
    const total = (s: Sample) => s.totalMs;
    emit({
      bench: "tracing.serial_buffered_chat",
      rounds,
      ...sides(b.off, b.on, total, ""),
      pairedAddedP50Ms: pairedP50(b.off, b.on, total),
    });
    const s = await interleave(rounds, streamed);
    const ttfb = (x: Sample) => x.ttfbMs;
    emit({
      bench: "tracing.serial_streamed_chat",
      rounds,
      ...sides(s.off, s.on, ttfb, "Ttfb"),
      ...sides(s.off, s.on, total, "Total"),
      pairedAddedTtfbP50Ms: pairedP50(s.off, s.on, ttfb),
    });

    // closed loop, blocks in ABBA order: throughput and each process's CPU per request
    const pids = { off: untraced.child.pid, on: traced.child.pid };
    const perSide = {
      off: { requests: 0, wallMs: 0, cpuMs: 0, errors: 0 },
      on: { requests: 0, wallMs: 0, cpuMs: 0, errors: 0 },
    };
    for (const side of ["off", "on", "on", "off"] as const) {
      const c0 = cpuSnapshot(pids);
      const r = await load(blockRequests, concurrency, buffered[side]);
      const c1 = cpuSnapshot(pids);
      const cpu = cpuPerRequest(c0, c1, blockRequests).cpuMsPerRequest as Record<string, number> | null;
      perSide[side].requests += r.samples.length;
      perSide[side].errors += r.errors;
      perSide[side].wallMs += r.wallMs;
      perSide[side].cpuMs += (cpu?.[side] ?? Number.NaN) * blockRequests;
    }
    const rate = (x: { requests: number; wallMs: number }) => Math.round((x.requests / x.wallMs) * 1000);
    const cpuPer = (x: { requests: number; cpuMs: number }) => ms(x.cpuMs / x.requests);
    await new Promise((r) => setTimeout(r, 6000)); // the last batch (OTEL_BSP_SCHEDULE_DELAY, 5 s)
    // traced requests since the warm-up: every `on` round and block
    const requests = 2 * rounds + 2 * blockRequests;
    emit({
      bench: "tracing.throughput",
      concurrency,
      requestsPerSide: perSide.off.requests,
      // failed requests of each side (client.ts `load`: fatal past 1%)
      errors: { off: perSide.off.errors, on: perSide.on.errors },
      offPerSecond: rate(perSide.off),
      onPerSecond: rate(perSide.on),
      offServiceCpuMsPerRequest: cpuPer(perSide.off),
      onServiceCpuMsPerRequest: cpuPer(perSide.on),
      addedServiceCpuMsPerRequest: ms(cpuPer(perSide.on) - cpuPer(perSide.off)),
      // what the traced process sent the sink (every traced request after the warm-up)
      spansPerRequest: +((sink.counts.spans - sent0.spans) / requests).toFixed(2),
      exportRequests: sink.counts.requests - sent0.requests,
      exportBytesPerRequest: Math.round((sink.counts.bytes - sent0.bytes) / requests),
    });
  } finally {
    for (const { child } of [untraced, traced]) {
      child.kill("SIGTERM");
      await waitForExit(child, 20_000).catch(() => child.kill("SIGKILL"));
    }
    await sink.close();
  }
}
