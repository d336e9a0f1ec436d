// `npm run bench`: one JSON line per figure. Speed is measured here, never asserted in tests.
// Later issues add the router figures (added latency vs the simulator, clears/s, streaming TTFB).
import { performance } from "node:perf_hooks";
import { computeCharge } from "../src/lib/money.js";
import { createAccount, createOffer, createUpstreamKey } from "../testkit/fixtures.js";
import { isolatedWorld, startTestApp } from "../testkit/harness.js";
import { migrateTemplate } from "../testkit/template.js";
import { benchRouter, pct } from "./router.js";

function emit(figure: Record<string, unknown>): void {
  console.log(JSON.stringify(figure));
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
  const world = await isolatedWorld();
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

await migrateTemplate();
await benchCharge();
await benchHttp();
await benchRouter(emit);
