import { QueueEvents } from "bullmq";
import { beforeAll, describe, expect } from "vitest";
import { createRedis } from "../../../src/adapters/redis/client.js";
import { type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import { movableClock } from "../../../testkit/harness.js";
import {
  myKeys,
  myOffers,
  offerStatus,
  patchOffer,
  pinToHour,
  postOffer,
  postOfferCall,
  registerKey,
  routableAt,
  sellOut,
  simKey,
} from "../../../testkit/supply.js";

/**
 * Expiry at UTC midnight (exactly once across processes) and the key balance sync. Two app
 * instances share one database and one movable clock, like two worker processes.
 */
const clock = movableClock();

// registered before the world, so the clock is pinned before the apps start
beforeAll(() => {
  pinToHour(clock, 10); // tomorrow 10:00 UTC: no midnight crossing by accident
});
test.override("appOptions", { sim: {}, catalogSyncKey: false, clock, workers: true, peer: true });
const world = fileWorld(test);

async function supplierWithKey(
  diemMicro = 100_000_000n,
): Promise<{ user: SignedInUser; keyId: string; secret: string }> {
  const user = await signIn(world.app);
  const secret = simKey(world.sim, diemMicro);
  const key = await registerKey(world.app, user, secret);
  return { user, keyId: key.id, secret };
}

async function runJob(queue: "expiry" | "sync", name: string): Promise<unknown> {
  const connection = createRedis(world.app.rt.config.redis.url, "worker");
  const events = new QueueEvents(queue, { connection, prefix: world.app.rt.keys.bullPrefix() });
  await events.waitUntilReady();
  try {
    const job = await world.app.rt.queues[queue].add(name, {});
    return await job.waitUntilFinished(events, 15_000);
  } finally {
    await events.close();
    connection.disconnect();
  }
}

function msToNextMidnight(): number {
  const now = clock.now();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime();
}

describe("expiry at UTC midnight", () => {
  test("live and depleted offers expire exactly once under concurrent runs in two processes", async () => {
    const suppliers = await Promise.all(Array.from({ length: 4 }, () => supplierWithKey()));
    const offers = await Promise.all(
      suppliers.map((s, i) => postOffer(world.app, s.user, s.keyId, 61 + i, "3.000000")),
    );
    const [, paused, depleted] = offers;
    if (!paused || !depleted) throw new Error("setup");
    await patchOffer(world.app, suppliers[1]?.user as SignedInUser, paused.id, { status: "paused" });
    await sellOut(world.app, depleted.id);
    await world.app.rt.services.offers.markDepletedIfEmpty(depleted.id);

    // before midnight nothing expires
    expect((await world.app.rt.services.offers.expireDue()).expired).toBe(0);
    for (const o of offers) expect(await offerStatus(world.app, o.id)).not.toBe("expired");

    clock.advance(msToNextMidnight() + 1_000);
    const runs = await Promise.all([
      ...Array.from({ length: 6 }, () => world.app.rt.services.offers.expireDue()),
      ...Array.from({ length: 6 }, () => world.peer.rt.services.offers.expireDue()),
    ]);
    expect(runs.reduce((a, r) => a + r.expired, 0)).toBe(offers.length);
    for (const o of offers) expect(await offerStatus(world.app, o.id)).toBe("expired");
    // the transition is final: later runs find nothing
    expect((await world.app.rt.services.offers.expireDue()).expired).toBe(0);
    for (const o of offers) expect(await routableAt(world.app, o.priceCentsPerDollar)).toBe(0n);

    const first = suppliers[0] as { user: SignedInUser; keyId: string };
    const listed = await myOffers(world.app, first.user);
    expect(listed[0]).toMatchObject({ status: "expired" });
    expect(listed[0]?.endedAt).not.toBeNull();
    // the slot is free: a new offer for the new day, expiring at the following midnight
    const fresh = await postOffer(world.app, first.user, first.keyId, 61);
    // one clock read (now + msToNextMidnight() read it twice and could straddle a millisecond)
    const now = clock.now();
    expect(new Date(fresh.expiresAt).getTime()).toBe(
      Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1),
    );
    // a depleted offer keeps the time it ended
    const d = await world.app.rt.db.offer.findUniqueOrThrow({ where: { id: depleted.id } });
    expect(d.endedAt?.getTime()).toBeLessThan(d.updatedAt.getTime());
  });

  test("the BullMQ expiry worker runs the same method", async () => {
    const s = await supplierWithKey();
    const o = await postOffer(world.app, s.user, s.keyId, 66);
    clock.advance(msToNextMidnight() + 1_000);
    const result = (await runJob("expiry", "expire-offers")) as { expired: number };
    expect(result.expired).toBeGreaterThanOrEqual(1);
    expect(await offerStatus(world.app, o.id)).toBe("expired");
    clock.advance(10 * 3_600_000); // back to mid-day
  });
});

describe("key balance sync", () => {
  test("stores the balance the upstream reports; a 0-balance key (accessPermitted false) stores 0", async () => {
    const s = await supplierWithKey(20_000_000n);
    world.sim.state.setBalance(s.secret, { diemMicro: 12_345_678n });
    const empty = await supplierWithKey(5_000_000n);
    world.sim.state.setBalance(empty.secret, { diemMicro: 0n });
    const r = await world.app.rt.services.supply.syncKeyBalances();
    expect(r.synced).toBeGreaterThanOrEqual(2);
    expect((await myKeys(world.app, s.user))[0]).toMatchObject({ status: "active", balanceDiem: "12.345678" });
    expect((await myKeys(world.app, empty.user))[0]).toMatchObject({ status: "active", balanceDiem: "0.000000" });
  });

  test("a key revoked at the upstream is marked auth_failed (out of routing) and recovers when it authenticates", async () => {
    const s = await supplierWithKey();
    const o = await postOffer(world.app, s.user, s.keyId, 67, "4.000000");
    expect(await routableAt(world.app, 67)).toBe(4_000_000n);

    world.sim.state.revokeKey(s.secret);
    const r = (await runJob("sync", "sync-key-balances")) as { authFailed: number };
    expect(r.authFailed).toBeGreaterThanOrEqual(1);
    const failed = (await myKeys(world.app, s.user))[0];
    expect(failed).toMatchObject({ status: "auth_failed" });
    expect(failed?.authFailedAt).not.toBeNull();
    expect(await routableAt(world.app, 67)).toBe(0n);
    expect((await myOffers(world.app, s.user))[0]).toMatchObject({
      id: o.id,
      status: "active",
      keyStatus: "auth_failed",
    });
    expectError(
      await postOfferCall(world.app, s.user, {
        upstreamKeyId: s.keyId,
        priceCentsPerDollar: 67,
        quantityDiem: "1.000000",
      }),
      409,
      "conflict",
    );
    // a second failing sync keeps the first failure time
    await world.app.rt.services.supply.syncKeyBalances();
    expect((await myKeys(world.app, s.user))[0]?.authFailedAt).toBe(failed?.authFailedAt);

    world.sim.state.revokeKey(s.secret, false);
    const back = await world.app.rt.services.supply.syncKeyBalances();
    expect(back.recovered).toBeGreaterThanOrEqual(1);
    expect((await myKeys(world.app, s.user))[0]).toMatchObject({ status: "active", authFailedAt: null });
    expect(await routableAt(world.app, 67)).toBe(4_000_000n);
  });

  test("upstream outages change nothing; revoked keys are not asked", async () => {
    const s = await supplierWithKey(9_000_000n);
    const gone = await supplierWithKey();
    const { deleteKey } = await import("../../../testkit/supply.js");
    await deleteKey(world.app, gone.user, gone.keyId);
    const asked = world.sim.state.listRequests({ key: gone.secret, route: "/api_keys/rate_limits" }).length;
    world.sim.state.injectFault(s.secret, { kind: "http_503", route: "/api_keys/rate_limits", count: 1 });
    const before = await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: s.keyId } });
    const r = await world.app.rt.services.supply.syncKeyBalances();
    expect(r.errors).toBeGreaterThanOrEqual(1);
    const after = await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: s.keyId } });
    expect(after).toMatchObject({ status: "active", lastBalanceMicroDiem: before.lastBalanceMicroDiem });
    expect(after.lastBalanceAt).toEqual(before.lastBalanceAt);
    expect(world.sim.state.listRequests({ key: gone.secret, route: "/api_keys/rate_limits" }).length).toBe(asked);
  });

  test("refreshKeyBalance re-reads one key (the router's call after an upstream 402)", async () => {
    const s = await supplierWithKey(10_000_000n);
    world.sim.state.setBalance(s.secret, { diemMicro: 1_500_000n });
    const r = await world.app.rt.services.supply.refreshKeyBalance(s.keyId);
    expect(r).toMatchObject({ upstreamKeyId: s.keyId, status: "active", balanceMicroDiem: 1_500_000n, outcome: "ok" });
    world.sim.state.revokeKey(s.secret);
    expect(await world.app.rt.services.supply.refreshKeyBalance(s.keyId)).toMatchObject({
      status: "auth_failed",
      outcome: "auth",
    });
  });

  test("coolDownKey keeps a key out of routing until the instant given, and never shortens a cooldown", async () => {
    const s = await supplierWithKey();
    await postOffer(world.app, s.user, s.keyId, 68, "2.000000");
    const now = clock.now().getTime();
    await world.app.rt.services.supply.coolDownKey(s.keyId, now + 60_000);
    expect(await routableAt(world.app, 68)).toBe(0n);
    await world.app.rt.services.supply.coolDownKey(s.keyId, now + 1_000);
    const row = await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: s.keyId } });
    expect(row.cooldownUntil?.getTime()).toBe(now + 60_000);
    clock.advance(61_000);
    expect(await routableAt(world.app, 68)).toBe(2_000_000n);
  });

  test("openKey returns the plaintext for the router; markKeyAuthFailed takes a key out of routing", async () => {
    const s = await supplierWithKey();
    expect(await world.app.rt.services.supply.openKey(s.keyId)).toBe(s.secret);
    await postOffer(world.app, s.user, s.keyId, 69, "2.000000");
    await world.app.rt.services.supply.markKeyAuthFailed(s.keyId);
    expect((await myKeys(world.app, s.user))[0]?.status).toBe("auth_failed");
    expect(await routableAt(world.app, 69)).toBe(0n);
  });

  test("payouts without a payout key do nothing", async () => {
    const r = await world.app.rt.services.earnings.runDailyPayouts();
    expect(r).toMatchObject({ disabled: true, paid: 0, created: 0 });
    expect(await world.app.rt.db.payout.count()).toBe(0);
  });
});
