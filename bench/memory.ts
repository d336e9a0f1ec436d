// Issue 19 target 4: 10,000 concurrent open streams with the service's RSS under 1 GiB, and every
// one of them settled exactly at the end. Loopback only, in a world of its own: the simulator in the
// bench process (its slow streams: a content chunk every few seconds), the service in its own
// process, the client in a third (bench/stream-load.ts), each with enough file descriptors. Bounded
// and self-stopping: the client stops itself, and a hard timeout here kills every process it started.
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { formatDecimal6 } from "../src/lib/money.js";
import { startUpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { assertBooksBalance } from "../testkit/books.js";
import { freePort, startTestApp } from "../testkit/harness.js";
import { addSupply, CATALOG_KEY, fundedBuyerKey, simEnv } from "../testkit/market.js";
import { mainCommand, waitForExit, waitForHttp } from "../testkit/spawn.js";
import { MODEL, memoryOf, pinnedWorld, serviceCommand, serviceEnv, track } from "./market.js";
import { targetLine } from "./stats.js";

type Emit = (f: Record<string, unknown>) => void;

const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** a supplier key carries at most 16 attempts at once (SUPPLIER_KEY_MAX_IN_FLIGHT): keys for all, and spare */
const STREAMS_PER_KEY = 14;
const SUPPLIERS = 10;
const BUYERS = 10;
const CHUNKS = 10;
/** issue 19 target 4 */
const TARGET_STREAMS = 10_000;

function envInt(name: string, fallback: number): number {
  const n = Number(process.env[name]);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

/** This process's soft and hard limits on open files (Linux); Infinity where unknown or unlimited. */
function openFileLimits(): { soft: number; hard: number } {
  try {
    const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    const n = (x: string | undefined) => (x && x !== "unlimited" ? Number(x) : Number.POSITIVE_INFINITY);
    return { soft: n(m?.[1]), hard: n(m?.[2]) };
  } catch {
    return { soft: Number.POSITIVE_INFINITY, hard: Number.POSITIVE_INFINITY };
  }
}

/** Descriptors a process needs besides its stream sockets (pools, Redis, stdio, epoll, modules). */
const SPARE_FILES = 400;

/**
 * `node --import tsx <script>` through `sh -c 'ulimit -n N'` (the same pid once `exec`ed), so the
 * child may hold `files` descriptors whatever this shell's soft limit is (raising the hard limit
 * needs root; below it anybody may).
 */
function spawnWithFiles(
  files: number,
  args: string[],
  env: Record<string, string>,
  stdin: "ignore" | "pipe" = "ignore",
): ChildProcess {
  const limit = Number.isFinite(files) ? String(files) : "unlimited";
  return track(
    spawn("sh", ["-c", `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
      stdio: [stdin, "pipe", "pipe"],
    }),
  );
}

interface Progress {
  t: number;
  sent: number;
  upstream: number;
  streaming: number;
  peakStreaming: number;
  peakAtMs: number;
  ended: number;
  failed: number;
  rampEndMs: number | null;
}

export async function benchMemory(emit: Emit): Promise<void> {
  const wanted = envInt("BENCH_MEMORY_STREAMS", TARGET_STREAMS);
  // Every open stream holds two sockets in the service (the buyer's and the upstream's), and no
  // process here may hold more descriptors than the hard limit (raising it needs CAP_SYS_RESOURCE):
  // where the limit is too low, the run measures as many streams as fit and says so.
  const limits = openFileLimits();
  const fit = Math.floor((limits.hard - SPARE_FILES) / 2);
  const streams = Math.min(wanted, fit);
  const limitedBy =
    streams < wanted
      ? `RLIMIT_NOFILE: hard limit ${limits.hard} descriptors per process; ${wanted} streams need ${wanted * 2 + SPARE_FILES} in the service`
      : null;
  // the ramp: as fast as the service admits (at most `window` waiting), capped at `rate` per second;
  // every stream lasts until `holdMs` after the start (spread over 10 s), so all streams opened by
  // then are open at once
  const rate = envInt("BENCH_MEMORY_RATE", 1000);
  const window = envInt("BENCH_MEMORY_WINDOW", 256);
  const holdMs = envInt("BENCH_MEMORY_HOLD_MS", 120_000);
  const hardTimeoutMs = envInt("BENCH_MEMORY_TIMEOUT_MS", holdMs + 10_000 + 90_000);
  const files = Math.min(limits.hard, streams * 2 + SPARE_FILES);
  if (limits.soft < streams + SPARE_FILES) {
    // the simulator runs in this process: one socket per stream
    emit({
      bench: "target.memory_streams",
      met: false,
      error: `this process may open ${limits.soft} files and the simulator needs ${streams + SPARE_FILES}: run with ulimit -n ${streams + SPARE_FILES} or more`,
    });
    return;
  }

  const sim = await startUpstreamSimulator({ keys: [{ key: CATALOG_KEY, diemMicro: 0n }] });
  const world = await pinnedWorld();
  const app = await startTestApp({
    databaseUrl: world.databaseUrl,
    prefix: world.prefix,
    env: { ...simEnv(sim), LOG_LEVEL: "silent" },
  });
  const children: ChildProcess[] = [];
  let sampler: NodeJS.Timeout | undefined;
  let timedOut = false;
  const hard = setTimeout(() => {
    timedOut = true;
    for (const c of children) c.kill("SIGKILL");
  }, hardTimeoutMs);
  try {
    await app.rt.services.catalog.sync();
    const keysPerSupplier = Math.ceil(streams / STREAMS_PER_KEY / SUPPLIERS);
    await Promise.all(
      Array.from({ length: SUPPLIERS }, () =>
        addSupply(
          app,
          sim,
          Array.from({ length: keysPerSupplier }, () => ({
            priceCents: 40,
            quantityMicroDiem: 100_000_000n,
            keyBalanceMicroDiem: 1_000_000_000n,
          })),
        ),
      ),
    );
    const buyers: Awaited<ReturnType<typeof fundedBuyerKey>>[] = [];
    for (let i = 0; i < BUYERS; i++) buyers.push(await fundedBuyerKey(app, 100_000_000n));
    const before = new Map<string, bigint>();
    for (const b of buyers) {
      const a = await app.rt.db.account.findUniqueOrThrow({ where: { id: b.accountId } });
      before.set(b.accountId, a.confirmedMicroUsdc);
    }

    const port = await freePort();
    const env = serviceEnv(app, sim, world, port, { KEY_MAX_IN_FLIGHT: String(Math.ceil(streams / BUYERS) * 2) });
    const c = serviceCommand();
    const svc = spawnWithFiles(files, mainCommand(c.args, c.nodeArgs, c.opts), env);
    children.push(svc);
    let svcErr = "";
    svc.stderr?.on("data", (d: Buffer) => {
      if (svcErr.length < 2000) svcErr += d.toString();
    });
    svc.stdout?.resume();
    const svcUrl = `http://127.0.0.1:${port}`;
    await waitForHttp(`${svcUrl}/healthz`, 60_000, svc);
    const idleRss = memoryOf(svc.pid, "VmRSS");

    const client = spawnWithFiles(
      Math.min(limits.hard, streams + SPARE_FILES),
      ["--import", "tsx", "bench/stream-load.ts"],
      {
        BENCH_STREAM_LOAD: JSON.stringify({
          url: `${svcUrl}/v1/chat/completions`,
          keys: buyers.map((b) => b.apiKey),
          model: MODEL,
          chunks: CHUNKS,
          streams,
          window,
          ratePerSecond: rate,
          holdUntilMs: holdMs,
          timeoutMs: hardTimeoutMs - 15_000,
        }),
      },
      "pipe",
    );
    children.push(client);
    // once the client has exited, a last count written to it fails: nothing to do about that
    client.stdin?.on("error", () => undefined);
    client.stderr?.on("data", (d: Buffer) => process.stderr.write(d));

    // every 100 ms: tell the client how many streams the upstream has open (its admission window),
    // and sample the service's memory beside the client's count of open streams
    let last: Progress = {
      t: 0,
      sent: 0,
      upstream: 0,
      streaming: 0,
      peakStreaming: 0,
      peakAtMs: 0,
      ended: 0,
      failed: 0,
      rampEndMs: null,
    };
    let peak = { rss: 0, streaming: 0, upstreamOpen: 0, atMs: 0 };
    let atMostOpen = { rss: 0, streaming: 0, upstreamOpen: 0, atMs: 0 };
    const timeline: Record<string, number>[] = [];
    const t0 = performance.now();
    let lastTimelineAt = -Infinity;
    sampler = setInterval(() => {
      const rss = memoryOf(svc.pid, "VmRSS") ?? 0;
      const upstreamOpen = sim.state.listKeys().reduce((a, k) => a + k.inFlight, 0);
      client.stdin?.write(`${JSON.stringify({ upstream: upstreamOpen })}\n`);
      const atMs = Math.round(performance.now() - t0);
      const s = { rss, streaming: last.streaming, upstreamOpen, atMs };
      if (rss > peak.rss) peak = s;
      if (s.streaming > atMostOpen.streaming || (s.streaming === atMostOpen.streaming && rss > atMostOpen.rss))
        atMostOpen = s;
      if (atMs - lastTimelineAt >= 5_000) {
        lastTimelineAt = atMs;
        timeline.push({
          t: atMs,
          sent: last.sent,
          upstreamOpen,
          streaming: last.streaming,
          ended: last.ended,
          failed: last.failed,
          rssMiB: Math.round(rss / 2 ** 20),
        });
      }
    }, 100);
    let hwm: number | null = null;
    const done = await new Promise<{ done: Progress & { timedOut: boolean; firstError: string }; streams: unknown[] }>(
      (resolve, reject) => {
        let buf = "";
        client.stdout?.setEncoding("utf8");
        client.stdout?.on("data", (d: string) => {
          buf += d;
          let nl = buf.indexOf("\n");
          while (nl >= 0) {
            const line = JSON.parse(buf.slice(0, nl)) as { progress?: Progress; done?: Progress; streams?: unknown[] };
            buf = buf.slice(nl + 1);
            nl = buf.indexOf("\n");
            if (line.progress) {
              last = line.progress;
              // the service's high-water mark, read while it still runs
              hwm = memoryOf(svc.pid, "VmHWM") ?? hwm;
            }
            if (line.done) resolve(line as never);
          }
        });
        client.once("close", (code) => reject(new Error(`stream client exited (${code}) before reporting`)));
      },
    );
    clearInterval(sampler);
    hwm = memoryOf(svc.pid, "VmHWM") ?? hwm;
    const results = done.streams as [number, string, string, number, string][];

    // a clean shutdown gives the process's escrow slices back; then the books are read
    svc.kill("SIGTERM");
    await waitForExit(svc, 30_000).catch(() => svc.kill("SIGKILL"));

    const ids = buyers.map((b) => b.accountId);
    // each record with its clear's gross (null: not charged)
    const rows = await app.rt.db.$queryRaw<{ ref: string; gross: bigint | null }[]>`
      SELECT COALESCE(r.support_reference, r.id)::text AS ref, c.gross_micro_usdc AS gross
        FROM inference_requests r LEFT JOIN clears c ON c.request_id = r.id
       WHERE r.account_id = ANY(${ids}::uuid[])`;
    const chargeByRef = new Map(rows.map((r) => [r.ref, r.gross === null ? null : BigInt(r.gross)]));
    let costMatches = 0;
    for (const [status, ref, cost] of results) {
      const gross = chargeByRef.get(ref);
      if (status === 200 && gross !== undefined && gross !== null && formatDecimal6(gross) === cost) costMatches++;
    }
    let debitsMatch = true;
    let reserved = 0n;
    for (const b of buyers) {
      const a = await app.rt.db.account.findUniqueOrThrow({ where: { id: b.accountId } });
      const cleared = await app.rt.db.clear.aggregate({
        where: { buyerAccountId: b.accountId },
        _sum: { grossMicroUsdc: true },
      });
      if ((before.get(b.accountId) ?? 0n) - a.confirmedMicroUsdc !== (cleared._sum.grossMicroUsdc ?? 0n))
        debitsMatch = false;
      reserved += a.reservedMicroUsdc;
    }
    let balanced = true;
    try {
      await assertBooksBalance(app.rt.db);
    } catch {
      balanced = false;
    }
    const clears = rows.filter((r) => r.gross !== null).length;
    const settledExactly =
      costMatches === streams && clears === streams && rows.length === streams && debitsMatch && balanced;
    const peakRss = Math.max(hwm ?? 0, peak.rss);
    emit({
      bench: "memory.streams",
      streams,
      requestedStreams: wanted,
      ...(limitedBy ? { limitedBy } : {}),
      window,
      maxRatePerSecond: rate,
      holdMs,
      supplierKeys: keysPerSupplier * SUPPLIERS,
      client: done.done,
      idleRssMiB: idleRss === null ? null : +(idleRss / 2 ** 20).toFixed(1),
      rssAtMostOpen: { ...atMostOpen, rssMiB: +(atMostOpen.rss / 2 ** 20).toFixed(1) },
      peakSampledRssMiB: +(peak.rss / 2 ** 20).toFixed(1),
      vmHwmMiB: hwm === null ? null : +(hwm / 2 ** 20).toFixed(1),
      settlement: { requests: rows.length, clears, costFramesMatchingTheirClear: costMatches, debitsMatch, balanced },
      reservedAfterShutdownMicroUsdc: reserved.toString(),
      ...(svcErr ? { serviceStderr: svcErr.slice(0, 600) } : {}),
      ...(timedOut ? { timedOut: true } : {}),
      // every 5 s: streams sent, open at the upstream, streaming to the client, ended, failed; RSS
      timeline,
    });
    // what each open stream costs, and what the target's count would then cost (linear)
    const perStream = idleRss === null ? null : (peakRss - idleRss) / streams;
    const projected = perStream === null || idleRss === null ? null : idleRss + perStream * TARGET_STREAMS;
    const allOpen = done.done.peakStreaming === streams;
    emit(
      targetLine("memory_streams", {
        target: 1024,
        service: peakRss / 2 ** 20,
        floor: null,
        unit: "MiB",
        streams,
        targetStreams: TARGET_STREAMS,
        peakConcurrentStreams: done.done.peakStreaming,
        allOpenAtOnce: allOpen,
        settledExactly,
        rssPerStreamKiB: perStream === null ? null : +(perStream / 1024).toFixed(1),
        ...(limitedBy
          ? {
              limitedBy,
              metAtMeasuredCount: peakRss < 2 ** 30 && allOpen && settledExactly,
              projectedRssAtTargetMiB: projected === null ? null : +(projected / 2 ** 20).toFixed(1),
            }
          : {}),
        // met only if the target's count of streams was open at once, the RSS stayed under 1 GiB
        // and every stream settled exactly
        requires: streams >= TARGET_STREAMS && allOpen && settledExactly,
        method:
          "service VmHWM (peak RSS) over the run; the client counts streams that have content and have not ended; every cost frame checked against its clear, buyers' debits against their clears, books balanced",
      }),
    );
  } catch (e) {
    emit({ bench: "target.memory_streams", met: false, error: String(e).slice(0, 500), timedOut });
  } finally {
    clearTimeout(hard);
    clearInterval(sampler);
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    await app.close();
    await world.drop();
    await sim.close();
  }
}
