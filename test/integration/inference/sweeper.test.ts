// The sweeper (svc_release_expired): the holds of requests whose process died are released exactly
// once, in one set-based pass, and never a hold that is alive or being renewed.
import pg from "pg";
import { describe, expect, test } from "vitest";
import type { RoutingSession } from "../../../src/domain/routing/router-service.js";
import { assertBooksBalance } from "../../support/books.js";
import { addSupply, fundedBuyerKey, openSession } from "../../support/market.js";
import { useMarketWorld } from "../../support/market-world.js";

const world = useMarketWorld({ syncCatalog: true });

const open = (accountId: string) => openSession(world.app, accountId);

async function expire(sessions: RoutingSession[]): Promise<void> {
  await world.app.rt.db.reservation.updateMany({
    where: { id: { in: sessions.map((s) => s.requestId) } },
    data: { expiresAt: new Date(Date.now() - 1000) },
  });
}

const reservedOf = async (accountId: string) =>
  (await world.app.rt.db.account.findUniqueOrThrow({ where: { id: accountId } })).reservedMicroUsdc;
const offerReserved = async (offerId: string) =>
  (await world.app.rt.db.offer.findUniqueOrThrow({ where: { id: offerId } })).reservedMicroDiem;

describe("the sweeper", () => {
  test("releases many dead requests across buyers and offers in one pass, and leaves live ones alone", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 41, quantityMicroDiem: 50_000_000n },
      { priceCents: 42, quantityMicroDiem: 50_000_000n },
    ]);
    const [a, b] = [await fundedBuyerKey(world.app, 5_000_000n), await fundedBuyerKey(world.app, 5_000_000n)];
    const dead: RoutingSession[] = [];
    for (let i = 0; i < 3; i++) dead.push(await open(a.accountId), await open(b.accountId));
    // a request on the second offer (the first is excluded by a fall-forward)
    const router = world.app.rt.services.router;
    const moved = dead[5] as RoutingSession;
    await router.fallForward(moved, { kind: "retryable", status: 500, detail: "test" });
    expect(moved.attempt?.offerId).toBe(supply.keys[1]?.offerId);
    const live = await open(a.accountId);
    const liveCharge = live.plan.maxChargeMicroUsdc;
    const liveBurn = live.plan.maxBurnMicroDiem;

    await expire(dead);
    expect((await router.releaseExpiredHolds()).released).toBe(6);
    // only the live request's holds remain, to the micro-unit
    expect(await reservedOf(a.accountId)).toBe(liveCharge);
    expect(await reservedOf(b.accountId)).toBe(0n);
    expect(await offerReserved(supply.keys[0]?.offerId ?? "")).toBe(liveBurn);
    expect(await offerReserved(supply.keys[1]?.offerId ?? "")).toBe(0n);
    const requests = await world.app.rt.db.inferenceRequest.findMany({
      where: { id: { in: dead.map((s) => s.requestId) } },
    });
    expect(requests.map((r) => [r.status, r.errorCode])).toEqual(Array(6).fill(["failed", "aborted"]));
    const inFlight = await world.app.rt.db.inferenceAttempt.count({
      where: { requestId: { in: dead.map((s) => s.requestId) }, outcome: "in_progress" },
    });
    expect(inFlight).toBe(0);
    // a second pass finds nothing; the live request settles normally
    expect((await router.releaseExpiredHolds()).released).toBe(0);
    await router.settle(live, { promptTokens: 30, completionTokens: 10 });
    expect(await reservedOf(a.accountId)).toBe(0n);
    for (const s of dead) await router.abort(s, "test_done"); // idempotent: nothing left to release
    expect(await reservedOf(a.accountId)).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("two sweepers at once release each hold exactly once", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 43, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const dead: RoutingSession[] = [];
    for (let i = 0; i < 8; i++) dead.push(await open(buyer.accountId));
    await expire(dead);
    const router = world.app.rt.services.router;
    const passes = await Promise.all([1, 2, 3].map(() => router.releaseExpiredHolds()));
    expect(passes.reduce((n, p) => n + p.released, 0)).toBe(8);
    expect(await reservedOf(buyer.accountId)).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a hold being renewed right now is skipped, and once renewed it is never released", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 44, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const session = await open(buyer.accountId);
    await expire([session]);
    const renewer = new pg.Client({ connectionString: world.app.rt.config.database.url });
    await renewer.connect();
    const router = world.app.rt.services.router;
    try {
      await renewer.query("BEGIN");
      await renewer.query("UPDATE reservations SET expires_at = now() + interval '15 minutes' WHERE id = $1", [
        session.requestId,
      ]);
      // the renewal holds the row: the sweeper passes over it instead of waiting or releasing it
      expect((await router.releaseExpiredHolds()).released).toBe(0);
      await renewer.query("COMMIT");
      expect((await router.releaseExpiredHolds()).released).toBe(0);
      expect(await reservedOf(buyer.accountId)).toBe(session.plan.maxChargeMicroUsdc);
      const settled = await router.settle(session, { promptTokens: 30, completionTokens: 10 });
      expect(settled.costMicroUsdc).toBeGreaterThan(0n);
    } finally {
      await renewer.end();
    }
    expect(await reservedOf(buyer.accountId)).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});
