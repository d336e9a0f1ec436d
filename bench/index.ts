// `npm run bench`: one JSON line per figure. Speed is measured here, never asserted in tests.
// Issue 19's targets print as `target.<name>` lines: the service's figure beside its floor, measured
// in the same run, and whether it is met. Sections can be run alone, for alternated A/B runs:
//   npm run bench -- --only=serial,streaming      (or BENCH_ONLY=serial,streaming npm run bench)
// Sections: micro, serial, streaming, saturation, modalities, tracing, memory (docs/performance.md).
// `capacity` (docs/scale.md: 1, 2 and 4 API processes on one Postgres) runs only when named:
//   npm run bench -- --only=capacity
// `append-shape` (the append's WAL as two rows or one, and its ids at scale; docs/performance.md) runs only when named too.
// Issue 32's Portkey gateway runs as a fourth peer in serial, streaming and saturation
// (`--only=portkey` names those three; BENCH_PORTKEY=off leaves it out).
import { execFileSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { computeCharge } from "../src/lib/money.js";
import { createAccount, createOffer, createUpstreamKey } from "../testkit/fixtures.js";
import { startTestApp } from "../testkit/harness.js";
import { migrateTemplate } from "../testkit/template.js";
import { benchAppendShape } from "./append-shape.js";
import { benchCapacity } from "./capacity.js";
import { type Market, pinnedWorld, serviceBuild, startMarket } from "./market.js";
import { benchMemory } from "./memory.js";
import { benchModalities } from "./modalities.js";
import { type PortkeyPeer, portkeyDisabled, startPortkey } from "./portkey.js";
import { benchSaturation } from "./saturation.js";
import { benchSerial, benchStreaming } from "./serial.js";
import { pct } from "./stats.js";
import { benchTracing } from "./tracing.js";

export const SECTIONS = [
  "micro",
  "serial",
  "streaming",
  "saturation",
  "modalities",
  "tracing",
  "memory",
  "capacity",
  "append-shape",
] as const;
type Section = (typeof SECTIONS)[number];
/** sections a bare `npm run bench` leaves out: they run only when named in `--only` */
const ON_REQUEST: readonly Section[] = ["capacity", "append-shape"];
/** the sections Portkey runs in, as a peer beside direct, the proxy and the service */
const PORTKEY_SECTIONS: readonly Section[] = ["serial", "streaming", "saturation"];
/** names `--only` accepts for a group of sections: `portkey`, the sections Portkey is measured in */
const GROUPS: Record<string, readonly Section[]> = { portkey: PORTKEY_SECTIONS };

const targets: Record<string, unknown>[] = [];

function emit(figure: Record<string, unknown>): void {
  if (typeof figure.bench === "string" && figure.bench.startsWith("target.")) targets.push(figure);
  console.log(JSON.stringify(figure));
}

function selected(): Section[] {
  const arg = process.argv.find((a) => a.startsWith("--only="))?.slice("--only=".length) ?? process.env.BENCH_ONLY;
  if (!arg) return SECTIONS.filter((s) => !ON_REQUEST.includes(s));
  const names = arg.split(",").flatMap((s): readonly string[] => GROUPS[s.trim()] ?? [s.trim()]);
  const unknown = names.filter((n) => !(SECTIONS as readonly string[]).includes(n));
  if (unknown.length > 0) {
    const expected = [...SECTIONS, ...Object.keys(GROUPS)].join(", ");
    console.error(`unknown bench section(s): ${unknown.join(", ")}; expected some of ${expected}`);
    process.exit(2);
  }
  return SECTIONS.filter((s) => names.includes(s));
}

async function benchCharge(): Promise<void> {
  const n = 1_000_000;
  let sink = 0n;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) sink += computeCharge(BigInt(i) * 7n, 30 + (i % 51), 1000).supplierMicroUsdc;
  const ms = performance.now() - t0;
  emit({ bench: "money.computeCharge", ops: n, opsPerSec: Math.round((n / ms) * 1000), checksum: sink.toString() });
}

async function benchHttp(): Promise<void> {
  const world = await pinnedWorld();
  const app = await startTestApp({ databaseUrl: world.databaseUrl, prefix: world.prefix });
  try {
    const supplier = await createAccount(app.rt.db);
    for (const price of [35, 45, 60]) {
      const key = await createUpstreamKey(app.rt.db, supplier.id);
      await createOffer(app.rt.db, {
        accountId: supplier.id,
        upstreamKeyId: key.id,
        priceCentsPerDollar: price,
        quantityMicroDiem: 10_000_000n,
      });
    }
    const cases = [
      { name: "http.healthz", init: undefined as RequestInit | undefined, path: "/healthz" },
      {
        name: "graphql.market",
        path: "/graphql",
        init: {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            query: "{ market { cheapestPostedCents routableDiem prices { priceCentsPerDollar routableDiem } } }",
          }),
        },
      },
    ];
    for (const c of cases) {
      const total = 2000;
      const concurrency = 16;
      const lat: number[] = [];
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < total) {
            next++;
            const s = performance.now();
            const res = await fetch(`${app.baseUrl}${c.path}`, c.init);
            await res.arrayBuffer();
            if (res.status !== 200) throw new Error(`${c.name}: status ${res.status}`);
            lat.push(performance.now() - s);
          }
        }),
      );
      const wall = performance.now() - t0;
      lat.sort((a, b) => a - b);
      emit({
        bench: c.name,
        requests: total,
        concurrency,
        p50Ms: +pct(lat, 50).toFixed(3),
        p99Ms: +pct(lat, 99).toFixed(3),
        rps: Math.round((total / wall) * 1000),
      });
    }
  } finally {
    await app.close();
    await world.drop();
  }
}

function commit(): string | null {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return null;
  }
}

const sections = selected();
const t0 = performance.now();
// how busy the machine already is: every figure here shares its two cores with whatever else runs
const withPortkey = !portkeyDisabled() && sections.some((s) => PORTKEY_SECTIONS.includes(s));
emit({
  bench: "run",
  sections,
  portkey: withPortkey,
  commit: commit(),
  // the production build as `npm run start:api` runs it, or src/main.ts through tsx (BENCH_SERVICE_BUILD)
  service: serviceBuild(),
  // every peer runs on this Node (the service, the proxy, Portkey): the image ships Node 24
  node: process.version,
  cpus: cpus().length,
  loadavg: loadavg().map((x) => +x.toFixed(2)),
});
await migrateTemplate();
if (sections.includes("micro")) {
  await benchCharge();
  await benchHttp();
}
const marketSections = sections.filter((s) =>
  ["serial", "streaming", "saturation", "modalities", "tracing"].includes(s),
);
if (marketSections.length > 0) {
  const market: Market = await startMarket();
  let portkey: PortkeyPeer | null = null;
  try {
    // checked against the simulator before anything is measured: throws if it answers otherwise
    if (withPortkey) portkey = await startPortkey(market, emit);
    if (sections.includes("serial")) await benchSerial(market, emit, portkey);
    if (sections.includes("streaming")) await benchStreaming(market, emit, portkey);
    if (sections.includes("saturation")) await benchSaturation(market, emit, portkey);
    if (sections.includes("modalities")) await benchModalities(market, emit);
    if (sections.includes("tracing")) await benchTracing(market, emit);
  } finally {
    await portkey?.close(emit);
    await market.close(emit);
  }
}
if (sections.includes("memory")) await benchMemory(emit);
if (sections.includes("capacity")) await benchCapacity(emit);
if (sections.includes("append-shape")) await benchAppendShape(emit);
emit({
  bench: "targets",
  met: targets.filter((t) => t.met === true).length,
  of: targets.length,
  notMet: targets.filter((t) => t.met !== true).map((t) => t.bench),
  seconds: Math.round((performance.now() - t0) / 1000),
  loadavg: loadavg().map((x) => +x.toFixed(2)),
});
