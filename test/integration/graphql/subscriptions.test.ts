import { createClient } from "graphql-sse";
import { describe, expect } from "vitest";
import { appTest } from "../../../testkit/app-test.js";
import { createAccount, createOffer, createUpstreamKey } from "../../../testkit/fixtures.js";
import { startWorld } from "../../../testkit/world.js";

/**
 * Two server instances share Postgres and Redis: a subscriber on A (`app`) receives what B (`peer`)
 * publishes, through the Redis event target. A third instance with another prefix must not leak into A.
 */

/** the third instance: a world of its own (another database and prefix) */
// biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
const test = appTest.extend("other", { scope: "file" }, async ({}, { onCleanup }) => {
  const other = await startWorld();
  onCleanup(() => other.close());
  return other.app;
});

test.beforeAll(async ({ app }) => {
  const supplier = await createAccount(app.rt.db);
  const key = await createUpstreamKey(app.rt.db, supplier.id);
  await createOffer(app.rt.db, {
    accountId: supplier.id,
    upstreamKeyId: key.id,
    priceCentsPerDollar: 45,
    quantityMicroDiem: 7_000_000n,
  });
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
  test.for([
    { mode: "distinct connections (/graphql)", path: "/graphql", single: false },
    { mode: "single connection (/graphql/stream)", path: "/graphql/stream", single: true },
  ])(
    "$mode: a publish on instance B reaches a subscriber on instance A",
    async ({ path, single }, { app, peer, other }) => {
      const events = await collect(`${app.baseUrl}${path}`, single, 3, async (i) => {
        await other.rt.services.market.publishCapacityChanged(`other-${i}`);
        await peer.rt.services.market.publishCapacityChanged(`from-b-${i}`);
      });
      expect(events.length).toBe(3);
      for (const e of events) {
        expect(e.capacityChanged.reason).toMatch(/^from-b-/);
        expect(e.capacityChanged.routableDiem).toBe("7000000");
        expect(e.capacityChanged.cheapestPostedCents).toBe(45);
      }
    },
  );
});
