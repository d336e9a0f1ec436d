import { createClient } from "graphql-sse";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createAccount, createOffer, createUpstreamKey } from "../../../testkit/fixtures.js";
import { isolatedWorld, startTestApp, type TestApp } from "../../../testkit/harness.js";

/**
 * Two server instances share Postgres and Redis: a subscriber on A receives what B publishes,
 * through the Redis event target. A third instance with another prefix must not leak into A.
 */
let a: TestApp;
let b: TestApp;
let other: TestApp;
const drops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  const w = await isolatedWorld();
  const w2 = await isolatedWorld();
  drops.push(w.drop, w2.drop);
  a = await startTestApp({ databaseUrl: w.databaseUrl, prefix: w.prefix });
  b = await startTestApp({ databaseUrl: w.databaseUrl, prefix: w.prefix });
  other = await startTestApp({ databaseUrl: w2.databaseUrl, prefix: w2.prefix });
  const supplier = await createAccount(a.rt.db);
  const key = await createUpstreamKey(a.rt.db, supplier.id);
  await createOffer(a.rt.db, {
    accountId: supplier.id,
    upstreamKeyId: key.id,
    priceCentsPerDollar: 45,
    quantityMicroDiem: 7_000_000n,
  });
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close(), other?.close()]);
  for (const d of drops) await d();
});

type Event = { capacityChanged: { reason: string; routableDiem: string; cheapestPostedCents: number | null } };

async function collect(url: string, singleConnection: boolean, n: number, publish: (i: number) => Promise<void>) {
  const client = createClient({ url, singleConnection, retryAttempts: 0 });
  const received: Event[] = [];
  const it = client.iterate<Event>({
    query: "subscription { capacityChanged { reason routableDiem cheapestPostedCents } }",
  });
  const reader = (async () => {
    for await (const r of it) {
      if (r.data) received.push(r.data);
      if (received.length >= n) break;
    }
  })();
  // the subscription has no acknowledgement: publish until events arrive (bounded)
  for (let i = 0; i < 100 && received.length < n; i++) {
    await publish(i);
    await new Promise((r) => setTimeout(r, 50));
  }
  await Promise.race([reader, new Promise((r) => setTimeout(r, 2000))]);
  await it.return?.();
  client.dispose();
  return received;
}

describe("capacityChanged over SSE, fanned out through Redis", () => {
  test.each([
    { mode: "distinct connections (/graphql)", path: "/graphql", single: false },
    { mode: "single connection (/graphql/stream)", path: "/graphql/stream", single: true },
  ])("$mode: a publish on instance B reaches a subscriber on instance A", async ({ path, single }) => {
    const events = await collect(`${a.baseUrl}${path}`, single, 3, async (i) => {
      await other.rt.services.market.publishCapacityChanged(`other-${i}`);
      await b.rt.services.market.publishCapacityChanged(`from-b-${i}`);
    });
    expect(events.length).toBe(3);
    for (const e of events) {
      expect(e.capacityChanged.reason).toMatch(/^from-b-/);
      expect(e.capacityChanged.routableDiem).toBe("7000000");
      expect(e.capacityChanged.cheapestPostedCents).toBe(45);
    }
  });
});
