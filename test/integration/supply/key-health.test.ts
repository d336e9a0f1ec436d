// Key health (src/domain/supply/key-health.ts) is THE key-marking path: an upstream 401 seen by the
// router during a completion and one seen by the balance sync move the key the same way and
// publish the same events (offerUpdated to the owner, capacityChanged to the market); a key that
// authenticates again is reopened by the sync; a cooldown only ever extends.
import { describe, expect } from "vitest";
import type { CapacityChangedEvent, SupplyChangeEvent } from "../../../src/adapters/pubsub.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, chat, fundedBuyerKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
const BODY = { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hello" }], max_tokens: 20 };

/** Collects a topic's events from now on (through Redis, as every process hears them). */
function listen<T>(iterable: AsyncIterable<T>): { events: T[]; stop: () => void } {
  const events: T[] = [];
  const it = iterable[Symbol.asyncIterator]();
  let stopped = false;
  void (async () => {
    while (!stopped) {
      const r = await it.next();
      if (r.done) return;
      events.push(r.value);
    }
  })();
  return {
    events,
    stop: () => {
      stopped = true;
      void it.return?.();
    },
  };
}

async function until(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
}

const statusOf = async (id: string) => (await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id } })).status;

describe("key health", () => {
  test("router and sync mark a key auth_failed with the same events; the sync reopens it", async () => {
    const { rt } = world.app;
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 40, quantityMicroDiem: 50_000_000n },
      { priceCents: 45, quantityMicroDiem: 50_000_000n },
    ]);
    const [k1, k2] = supply.keys;
    if (!k1 || !k2) throw new Error("two keys");
    rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const owner = listen<SupplyChangeEvent>(rt.bus.subscribe("offerUpdated", supply.supplierAccountId));
    const market = listen<CapacityChangedEvent>(rt.bus.subscribe("capacityChanged"));
    await new Promise((r) => setTimeout(r, 100)); // the Redis subscriptions are in place

    // the router: key 1 answers 401 → marked, the request falls forward to key 2
    world.sim.state.revokeKey(k1.secret);
    const r = await chat(world.app, buyer.apiKey, BODY);
    expect(r.status).toBe(200);
    expect(await statusOf(k1.upstreamKeyId)).toBe("auth_failed");
    const byRouter = { kind: "key", id: k1.upstreamKeyId, status: "auth_failed" };
    await until(() => owner.events.some((e) => e.id === byRouter.id && e.status === byRouter.status));
    expect(owner.events.map(({ kind, id, status }) => ({ kind, id, status }))).toEqual([byRouter]);
    await until(() => market.events.some((e) => e.reason === "key_status_changed"));
    expect(market.events.map((e) => e.reason)).toContain("key_status_changed");

    // the sync: key 2 answers 401 → marked the same way, with the same events
    world.sim.state.revokeKey(k2.secret);
    owner.events.length = 0;
    market.events.length = 0;
    const sync1 = await rt.services.supply.syncKeyBalances();
    expect(sync1.authFailed).toBeGreaterThanOrEqual(2); // key 1 is still refused too (already marked)
    expect(await statusOf(k2.upstreamKeyId)).toBe("auth_failed");
    const bySync = { kind: "key", id: k2.upstreamKeyId, status: "auth_failed" };
    await until(() => owner.events.some((e) => e.id === bySync.id && e.status === bySync.status));
    expect(owner.events.map(({ kind, id, status }) => ({ kind, id, status }))).toEqual([bySync]);
    await until(() => market.events.some((e) => e.reason === "key_status_changed"));
    expect(market.events.map((e) => e.reason)).toEqual(["key_status_changed"]);

    // key 1 authenticates again: the sync reopens it (and only it)
    world.sim.state.revokeKey(k1.secret, false);
    owner.events.length = 0;
    const sync2 = await rt.services.supply.syncKeyBalances();
    expect(sync2.recovered).toBe(1);
    expect(await statusOf(k1.upstreamKeyId)).toBe("active");
    expect(await statusOf(k2.upstreamKeyId)).toBe("auth_failed");
    const reopened = { kind: "key", id: k1.upstreamKeyId, status: "active" };
    await until(() => owner.events.some((e) => e.id === reopened.id && e.status === reopened.status));
    expect(owner.events.map(({ kind, id, status }) => ({ kind, id, status }))).toEqual([reopened]);

    // and routes again
    expect((await chat(world.app, buyer.apiKey, BODY)).status).toBe(200);
    owner.stop();
    market.stop();
    await assertBooksBalance(rt.db);
  });

  test("a cooldown only extends: an earlier end never shortens it", async () => {
    const { rt } = world.app;
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 50, quantityMicroDiem: 1_000_000n }]);
    const id = supply.keys[0]?.upstreamKeyId ?? "";
    const t = rt.clock.now().getTime();
    expect(await rt.services.keyHealth.coolDown(id, t + 60_000)).toBe(true);
    expect(await rt.services.keyHealth.coolDown(id, t + 30_000)).toBe(false);
    expect(await rt.services.keyHealth.coolDown(id, t + 60_000)).toBe(false);
    const row = await rt.db.upstreamKey.findUniqueOrThrow({ where: { id } });
    expect(row.cooldownUntil?.getTime()).toBe(t + 60_000);
    expect(await rt.services.keyHealth.coolDown(id, t + 90_000)).toBe(true);
    expect((await rt.db.upstreamKey.findUniqueOrThrow({ where: { id } })).cooldownUntil?.getTime()).toBe(t + 90_000);
  });
});
