// Issue 19 targets 1 and 2: what one request adds when it is alone. Direct (the simulator), the bare
// pass-through proxy (the floor), the service and (issue 32) Portkey's gateway are sent one request at
// a time, interleaved request by request (the order rotated every round), so machine noise hits all
// of them alike.
import { randomUUID } from "node:crypto";
import pg from "pg";
import { interleave, post, type Sample } from "./client.js";
import { CHAT_BODY, type Market, STREAM_BODY } from "./market.js";
import type { PortkeyPeer } from "./portkey.js";
import { ms, p50p99, portkeyRatioLine, serverTimingP50, targetLine } from "./stats.js";

type Emit = (f: Record<string, unknown>) => void;

function rounds(name: string, fallback: number): number {
  const n = Number(process.env[name]);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

/**
 * A second floor for target 1: one durable write, i.e. a one-row INSERT committed synchronously (as
 * the settlement commits) by node-postgres from this process: what any service that records a
 * request durably before answering pays on this machine at least once per request, on top of what
 * proxying costs.
 */
async function durableCommitFloor(m: Market): Promise<{ run: () => Promise<Sample>; close: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: m.databaseUrl });
  await client.connect();
  await client.query("CREATE TABLE IF NOT EXISTS bench_commit_floor (id uuid PRIMARY KEY, at timestamptz NOT NULL)");
  const run = async (): Promise<Sample> => {
    const t0 = performance.now();
    await client.query({
      name: "bench_commit_floor",
      text: "INSERT INTO bench_commit_floor (id, at) VALUES ($1, now())",
      values: [randomUUID()],
    });
    const t = performance.now() - t0;
    return { status: 200, totalMs: t, ttfbMs: t, lastContentMs: 0, usageMs: 0, costMs: 0 };
  };
  return { run, close: () => client.end() };
}

/**
 * Target 1: serial buffered chat, added p50 ≤ 1.5 ms and p99 ≤ 4 ms over direct; with Portkey in the
 * same rounds, `service ÷ portkey` of both (issue 32).
 */
export async function benchSerial(m: Market, emit: Emit, portkey: PortkeyPeer | null): Promise<void> {
  const n = rounds("BENCH_SERIAL_ROUNDS", 600);
  const commit = await durableCommitFloor(m);
  const base = {
    direct: () => post(`${m.sim.baseUrl}/chat/completions`, m.directKey, CHAT_BODY),
    proxy: () => post(`${m.proxyUrl}/v1/chat/completions`, m.directKey, CHAT_BODY),
    service: () => post(`${m.svcUrl}/v1/chat/completions`, m.buyer.apiKey, CHAT_BODY),
    commit: commit.run,
  };
  const targets = portkey ? { ...base, portkey: () => portkey.chat(CHAT_BODY) } : base;
  await interleave(100, targets); // warm-up: JIT, connections, the buyer's escrow
  const r: Record<keyof typeof base, Sample[]> & { portkey?: Sample[] } = await interleave(n, targets);
  await commit.close();
  const total = (s: Sample) => s.totalMs;
  const d = p50p99(r.direct, total);
  const p = p50p99(r.proxy, total);
  const s = p50p99(r.service, total);
  const c = p50p99(r.commit, total);
  const k = r.portkey ? p50p99(r.portkey, total) : null;
  // each request's own added time (service minus the direct request of the same round)
  const paired = r.service.map((x, i) => x.totalMs - (r.direct[i]?.totalMs ?? Number.NaN)).sort((a, b) => a - b);
  emit({
    bench: "serial.buffered_chat",
    rounds: n,
    directP50Ms: ms(d.p50),
    directP99Ms: ms(d.p99),
    proxyP50Ms: ms(p.p50),
    proxyP99Ms: ms(p.p99),
    serviceP50Ms: ms(s.p50),
    serviceP99Ms: ms(s.p99),
    ...(k ? { portkeyP50Ms: ms(k.p50), portkeyP99Ms: ms(k.p99) } : {}),
    pairedAddedP50Ms: ms(paired[Math.floor(paired.length / 2)] ?? Number.NaN),
    // one durable one-row commit from this process (see durableCommitFloor)
    durableCommitP50Ms: ms(c.p50),
    durableCommitP99Ms: ms(c.p99),
    // the service's own Server-Timing: admission (gates + escrow), upstream, settlement
    serverTimingP50Ms: serverTimingP50(r.service),
  });
  emit(
    targetLine("serial_added_p50", {
      target: 1.5,
      service: s.p50 - d.p50,
      floor: p.p50 - d.p50,
      // proxying plus one durable commit: what answering only after a durable record costs at least
      durableFloor: ms(p.p50 - d.p50 + c.p50),
      unit: "ms",
      method:
        "p50(service) - p50(direct), serial, interleaved; floor: the bare proxy's, same rounds; durableFloor: floor + p50 of one durable one-row commit, same rounds",
      rounds: n,
    }),
  );
  emit(
    targetLine("serial_added_p99", {
      target: 4,
      service: s.p99 - d.p99,
      floor: p.p99 - d.p99,
      durableFloor: ms(p.p99 - d.p99 + c.p99),
      unit: "ms",
      method:
        "p99(service) - p99(direct), serial, interleaved; floor: the bare proxy's, same rounds; durableFloor: floor + p99 of one durable one-row commit",
      rounds: n,
    }),
  );
  if (!k) return;
  for (const [q, name] of [
    ["p50", "serial_added_p50"],
    ["p99", "serial_added_p99"],
  ] as const) {
    emit(
      portkeyRatioLine(name, {
        service: s[q] - d[q],
        portkey: k[q] - d[q],
        unit: "ms",
        targetRatio: 1,
        floor: ms(p[q] - d[q]),
        method: `${q}(x) - ${q}(direct) for the service and for Portkey, serial buffered chat, interleaved in the same rounds; ratio = service / portkey; floor: the bare proxy's`,
        rounds: n,
      }),
    );
  }
}

/**
 * Target 2: serial streamed chat. Time to first content added over direct ≤ 1 ms; and the `svc.cost`
 * frame follows the last content chunk by ≤ 2 ms at p50 more than the upstream's usage chunk follows
 * its last content chunk (all timed in the client: a stream's last content chunk leaves the service
 * as soon as the upstream's arrives, and the upstream sends its usage chunk right after it, so the
 * difference is what the service adds between the upstream's last chunk and the cost frame).
 */
export async function benchStreaming(m: Market, emit: Emit, portkey: PortkeyPeer | null): Promise<void> {
  const n = rounds("BENCH_STREAM_ROUNDS", 400);
  const base = {
    direct: () => post(`${m.sim.baseUrl}/chat/completions`, m.directKey, STREAM_BODY, "chat"),
    proxy: () => post(`${m.proxyUrl}/v1/chat/completions`, m.directKey, STREAM_BODY, "chat"),
    service: () => post(`${m.svcUrl}/v1/chat/completions`, m.buyer.apiKey, STREAM_BODY, "chat"),
  };
  const targets = portkey ? { ...base, portkey: () => portkey.chat(STREAM_BODY, "chat") } : base;
  await interleave(100, targets);
  const r: Record<keyof typeof base, Sample[]> & { portkey?: Sample[] } = await interleave(n, targets);
  const ttfb = (s: Sample) => s.ttfbMs;
  const usageGap = (s: Sample) => s.usageMs - s.lastContentMs;
  const costGap = (s: Sample) => s.costMs - s.lastContentMs;
  const d = p50p99(r.direct, ttfb);
  const p = p50p99(r.proxy, ttfb);
  const s = p50p99(r.service, ttfb);
  const dGap = p50p99(r.direct, usageGap);
  const pGap = p50p99(r.proxy, usageGap);
  const sGap = p50p99(r.service, costGap);
  const sUsageGap = p50p99(r.service, usageGap);
  const total = (x: Sample) => x.totalMs;
  const k = r.portkey ? p50p99(r.portkey, ttfb) : null;
  const kGap = r.portkey ? p50p99(r.portkey, usageGap) : null;
  emit({
    bench: "serial.streamed_chat",
    rounds: n,
    directTtfbP50Ms: ms(d.p50),
    proxyTtfbP50Ms: ms(p.p50),
    serviceTtfbP50Ms: ms(s.p50),
    ...(k && kGap && r.portkey
      ? {
          portkeyTtfbP50Ms: ms(k.p50),
          portkeyTtfbOverheadP99Ms: ms(k.p99 - d.p99),
          portkeyUsageAfterLastContentP50Ms: ms(kGap.p50),
          portkeyAddedTotalP50Ms: ms(p50p99(r.portkey, total).p50 - p50p99(r.direct, total).p50),
        }
      : {}),
    ttfbOverheadP99Ms: ms(s.p99 - d.p99),
    // last content chunk → usage chunk (direct, proxy) / → svc.cost frame (service)
    directUsageAfterLastContentP50Ms: ms(dGap.p50),
    proxyUsageAfterLastContentP50Ms: ms(pGap.p50),
    serviceUsageAfterLastContentP50Ms: ms(sUsageGap.p50),
    serviceCostAfterLastContentP50Ms: ms(sGap.p50),
    serviceCostAfterLastContentP99Ms: ms(sGap.p99),
    addedTotalP50Ms: ms(p50p99(r.service, total).p50 - p50p99(r.direct, total).p50),
    serverTimingP50Ms: serverTimingP50(r.service),
  });
  emit(
    targetLine("streaming_ttfb_overhead", {
      target: 1,
      service: s.p50 - d.p50,
      floor: p.p50 - d.p50,
      unit: "ms",
      method: "p50 time to first content: service - direct, serial, interleaved; floor: the bare proxy's",
      rounds: n,
    }),
  );
  emit(
    targetLine("streaming_cost_after_last_chunk", {
      target: 2,
      service: sGap.p50 - dGap.p50,
      floor: pGap.p50 - dGap.p50,
      unit: "ms",
      method:
        "p50(last content -> svc.cost frame, through the service) - p50(last content -> usage chunk, direct); floor: the bare proxy's usage chunk, same way",
      rounds: n,
    }),
  );
  if (!k) return;
  emit(
    portkeyRatioLine("streaming_ttfb_added", {
      service: s.p50 - d.p50,
      portkey: k.p50 - d.p50,
      unit: "ms",
      // issue 32: at most a tenth of Portkey's, and at most 1.5 ms
      targetRatio: 0.1,
      targetMs: 1.5,
      floor: ms(p.p50 - d.p50),
      method:
        "p50 time to first content minus direct's, for the service and for Portkey, serial streamed chat, interleaved in the same rounds; ratio = service / portkey; floor: the bare proxy's",
      rounds: n,
    }),
  );
}
