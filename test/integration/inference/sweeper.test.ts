// Escrow holders and the sweeper (svc_release_expired): the slices of a process whose lease expired
// go back exactly once, in one set-based pass, never a live or renewing holder's; a process that
// lost its lease cannot charge against slices it no longer has, and registers anew.
import pg from "pg";
import { describe, expect } from "vitest";
import { textPricer } from "../../../src/domain/inference/pipeline/admission.js";
import { Attempted } from "../../../src/domain/inference/pipeline/attempt-loop.js";
import type { AttemptingSession } from "../../../src/domain/inference/pipeline/session.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, chat, confirmedOf, fundedBuyerKey, openSession, reservedOf } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true, peer: true });
const world = fileWorld(test);
const MSG = () => ({ model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hello" }] });

const offerReserved = async (offerId: string) =>
  (await world.app.rt.db.offer.findUniqueOrThrow({ where: { id: offerId } })).reservedMicroDiem;
const escrowOf = async (holder: string | null, accountId: string) =>
  holder
    ? ((await world.app.rt.db.buyerEscrow.findUnique({ where: { accountId_holder: { accountId, holder } } }))
        ?.amountMicroUsdc ?? 0n)
    : 0n;

/** The holder's lease ran out (its process stopped renewing it). */
async function expireHolder(holder: string | null): Promise<void> {
  if (!holder) throw new Error("no holder");
  await world.app.rt.db.escrowHolder.update({
    where: { id: holder },
    data: { expiresAt: new Date(Date.now() - 1000) },
  });
}

describe("escrow holders and the sweeper", () => {
  test("a dead process's slices go back across buyers and offers in one pass; a live one's stay", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 41, quantityMicroDiem: 50_000_000n },
      { priceCents: 42, quantityMicroDiem: 50_000_000n },
    ]);
    const [a, b] = [await fundedBuyerKey(world.app, 5_000_000n), await fundedBuyerKey(world.app, 5_000_000n)];
    // the peer admits six requests, one of them moved to the second offer by a fall-forward…
    const dying: AttemptingSession[] = [];
    for (let i = 0; i < 3; i++) {
      dying.push(await openSession(world.peer, a.accountId), await openSession(world.peer, b.accountId));
    }
    const moved = dying[5] as AttemptingSession;
    // (its first attempt fails, its second is left in flight)
    await new Promise<void>((onSecond) => {
      let calls = 0;
      void world.peer.rt.services.inference
        .run(moved, async () => {
          if (calls++ === 0) return Attempted.fallForward({ kind: "retryable", status: 500, detail: "test" });
          onSecond();
          return new Promise<never>(() => {});
        })
        .catch(() => undefined);
    });
    expect(moved.trail.inFlight()?.offerId).toBe(supply.keys[1]?.offerId);
    // …while this process admits one of its own
    const live = await openSession(world.app, a.accountId);
    const liveHolder = world.app.rt.services.inference.escrow.snapshot().holder;
    const deadHolder = world.peer.rt.services.inference.escrow.snapshot().holder;
    expect(liveHolder).not.toBeNull();
    expect(deadHolder).not.toBe(liveHolder);
    const liveSlice = await escrowOf(liveHolder, a.accountId);
    expect(liveSlice).toBeGreaterThanOrEqual(live.plan.maxChargeMicroUsdc);

    // the peer stops renewing: its lease expires and the sweeper gives everything it held back
    await expireHolder(deadHolder);
    const router = world.app.rt.services.inference;
    expect((await router.escrow.releaseExpired()).released).toBe(1);
    expect(await reservedOf(world.app, a.accountId)).toBe(liveSlice);
    expect(await reservedOf(world.app, b.accountId)).toBe(0n);
    expect(await offerReserved(supply.keys[1]?.offerId ?? "")).toBe(0n);
    expect(await world.app.rt.db.buyerEscrow.count({ where: { holder: deadHolder ?? "" } })).toBe(0);
    expect(await world.app.rt.db.escrowHolder.count({ where: { id: deadHolder ?? "" } })).toBe(0);
    // a second pass finds nothing; the live request settles and its idle slices go back
    expect((await router.escrow.releaseExpired()).released).toBe(0);
    await router.settle(live, { kind: "settled", usage: { promptTokens: 30, completionTokens: 10 } });
    expect(await reservedOf(world.app, a.accountId)).toBe(0n);
    expect(await offerReserved(supply.keys[0]?.offerId ?? "")).toBe(0n);

    // the presumed-dead process was only stalled: it cannot charge what it no longer holds
    const beforeA = await confirmedOf(world.app, a.accountId);
    const late = await Promise.allSettled(
      dying.map((s) =>
        world.peer.rt.services.inference.settle(s, {
          kind: "settled",
          usage: { promptTokens: 30, completionTokens: 10 },
        }),
      ),
    );
    expect(late.map((r) => r.status)).toEqual(Array(6).fill("rejected"));
    expect((late[0] as PromiseRejectedResult).reason).toMatchObject({ code: "settle_failed" });
    expect(await confirmedOf(world.app, a.accountId)).toBe(beforeA);
    expect(await reservedOf(world.app, a.accountId)).toBe(0n);
    // each is still on the record, as failed, with no clear
    const records = await world.app.rt.db.inferenceRequest.findMany({
      where: { id: { in: dying.map((s) => s.requestId) } },
    });
    expect(records.map((r) => [r.status, r.errorCode])).toEqual(Array(6).fill(["failed", "settle_failed"]));
    expect(await world.app.rt.db.clear.count({ where: { requestId: { in: dying.map((s) => s.requestId) } } })).toBe(0);
    await assertBooksBalance(world.app.rt.db);

    // and its next request registers a new lease and clears normally
    const r = await chat(world.peer, a.apiKey, MSG());
    expect(r.status).toBe(200);
    const renewed = world.peer.rt.services.inference.escrow.snapshot().holder;
    expect(renewed).not.toBeNull();
    expect(renewed).not.toBe(deadHolder);
    expect(await reservedOf(world.app, a.accountId)).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("three sweepers at once release each dead holder exactly once", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 43, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const sql = world.app.rt.sql;
    // eight processes that each took a slice of this buyer and died
    const holders = Array.from({ length: 8 }, () => crypto.randomUUID());
    const apiKeyId = (await world.app.rt.db.apiKey.findFirstOrThrow({ where: { accountId: buyer.accountId } })).id;
    const ceiling = (await world.app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } }))
      .maxPriceCentsPerDollar;
    for (const h of holders) {
      await sql.query("INSERT INTO escrow_holders (id, expires_at) VALUES ($1, now() + interval '1 minute')", [h]);
      const r = await sql.query<{ outcome: string }>(
        "SELECT outcome FROM svc_escrow_take($1, $2, $3, $4, 100000, 100000, NULL, 0, 0, now())",
        [h, buyer.accountId, apiKeyId, ceiling],
      );
      expect(r.rows[0]?.outcome).toBe("ok");
    }
    expect(await reservedOf(world.app, buyer.accountId)).toBe(800_000n);
    await sql.query("UPDATE escrow_holders SET expires_at = now() - interval '1 second' WHERE id = ANY($1::uuid[])", [
      holders,
    ]);
    const router = world.app.rt.services.inference;
    const passes = await Promise.all([1, 2, 3].map(() => router.escrow.releaseExpired()));
    expect(passes.reduce((n, p) => n + p.released, 0)).toBe(8);
    expect(await reservedOf(world.app, buyer.accountId)).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a lease being renewed right now is skipped, and once renewed it is never released", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 44, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const router = world.app.rt.services.inference;
    const session = await openSession(world.app, buyer.accountId);
    const holder = router.escrow.snapshot().holder;
    const held = await reservedOf(world.app, buyer.accountId);
    expect(held).toBeGreaterThanOrEqual(session.plan.maxChargeMicroUsdc);
    await expireHolder(holder);
    const renewer = new pg.Client({ connectionString: world.app.rt.config.database.url });
    await renewer.connect();
    try {
      await renewer.query("BEGIN");
      await renewer.query("UPDATE escrow_holders SET expires_at = now() + interval '1 minute' WHERE id = $1", [holder]);
      // the renewal holds the row: the sweeper passes over it instead of waiting or releasing it
      expect((await router.escrow.releaseExpired()).released).toBe(0);
      await renewer.query("COMMIT");
      expect((await router.escrow.releaseExpired()).released).toBe(0);
      expect(await reservedOf(world.app, buyer.accountId)).toBe(held);
      const settled = await router.settle(session, {
        kind: "settled",
        usage: { promptTokens: 30, completionTokens: 10 },
      });
      expect(settled.costMicroUsdc).toBeGreaterThan(0n);
    } finally {
      await renewer.end();
    }
    expect(await reservedOf(world.app, buyer.accountId)).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a fold of an expired holder running now: the sweeper passes over it, and neither waits on the other", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 43, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const router = world.app.rt.services.inference;
    const session = await openSession(world.app, buyer.accountId);
    const holder = router.escrow.snapshot().holder;
    const held = await reservedOf(world.app, buyer.accountId);
    await expireHolder(holder);
    const fold = new pg.Client({ connectionString: world.app.rt.config.database.url });
    await fold.connect();
    try {
      // as svc_fold_holder does: the holder's fold lock, then (at its end) the holder's row
      await fold.query("BEGIN");
      await fold.query("SELECT pg_advisory_xact_lock(svc_fold_key($1))", [holder]);
      // the sweeper passes over the holder being folded instead of waiting for its fold lock while
      // it holds the holder's row (which the fold is about to update: a deadlock)
      expect((await router.escrow.releaseExpired()).released).toBe(0);
      await fold.query("UPDATE escrow_holders SET folded_seq = folded_seq WHERE id = $1", [holder]);
      await fold.query("COMMIT");
      expect(await reservedOf(world.app, buyer.accountId)).toBe(held);
      // the fold done, the next sweep releases it
      expect((await router.escrow.releaseExpired()).released).toBe(1);
      expect(await reservedOf(world.app, buyer.accountId)).toBe(0n);
    } finally {
      await fold.end();
    }
    expect(session.plan.maxChargeMicroUsdc).toBeGreaterThan(0n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a key budget hold follows its request to a new holder, so sweeping the lost one keeps it", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 30, quantityMicroDiem: 50_000_000n },
      { priceCents: 31, quantityMicroDiem: 50_000_000n },
    ]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const key = await world.app.rt.db.apiKey.findFirstOrThrow({ where: { accountId: buyer.accountId } });
    await world.app.rt.db.apiKey.update({
      where: { id: key.id },
      data: { limitMicroUsdc: 2_000_000n, limitReset: "daily" },
    });
    const router = world.app.rt.services.inference;
    const session = await router.open({
      accountId: buyer.accountId,
      apiKeyId: key.id,
      route: "chat",
      modality: "text",
      model: "zai-org-glm-5-1",
      stream: false,
      key: { budgeted: true, maxPriceCents: null, models: [] },
      price: (model) => textPricer(model, 40, 20),
    });
    const holdOf = async () =>
      (await world.app.rt.db.keyBudgetHold.findUnique({ where: { requestId: session.requestId } }))?.holder ?? null;
    const first = router.escrow.snapshot().holder;
    expect(await holdOf()).toBe(first);
    expect(session.attempt.offerId).toBe(supply.keys[0]?.offerId);
    // the process's lease runs out mid-request: its next top-up (the fall-forward's, on the second
    // offer) finds the holder lost and registers a new one
    await expireHolder(first);
    await new Promise<void>((onSecond) => {
      let calls = 0;
      void router
        .run(session, async () => {
          if (calls++ === 0) return Attempted.fallForward({ kind: "retryable", status: 500, detail: "test" });
          onSecond();
          return new Promise<never>(() => {});
        })
        .catch(() => undefined);
    });
    const second = router.escrow.snapshot().holder;
    expect(second).not.toBe(first);
    // the hold went with the request, so the sweeper's release of the lost holder leaves it
    expect(await holdOf()).toBe(second);
    expect((await router.escrow.releaseExpired()).released).toBeGreaterThanOrEqual(1);
    expect(await world.app.rt.db.escrowHolder.findUnique({ where: { id: first ?? "" } })).toBeNull();
    expect(await holdOf()).toBe(second);
  });

  test("the heartbeat pushes the lease ahead, so a long request's slices outlive the sweeper", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 45, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const router = world.app.rt.services.inference;
    const session = await openSession(world.app, buyer.accountId, { stream: true });
    const holder = router.escrow.snapshot().holder;
    await expireHolder(holder);
    await router.escrow.heartbeat();
    const row = await world.app.rt.db.escrowHolder.findUniqueOrThrow({ where: { id: holder ?? "" } });
    expect(row.expiresAt.getTime()).toBeGreaterThan(Date.now() + 30_000);
    expect((await router.escrow.releaseExpired()).released).toBe(0);
    await router.abort(session, "test_done");
    expect(await reservedOf(world.app, buyer.accountId)).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("closing a process gives its slices back at once", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 46, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    // slices that stay: another buyer keeps a request in flight on the peer while this one ends
    const other = await fundedBuyerKey(world.app, 5_000_000n);
    const open = await openSession(world.peer, other.accountId);
    expect((await chat(world.peer, buyer.apiKey, MSG())).status).toBe(200);
    expect(await reservedOf(world.app, other.accountId)).toBeGreaterThan(0n);
    const holder = world.peer.rt.services.inference.escrow.snapshot().holder;
    await world.peer.rt.services.inference.close();
    expect(await reservedOf(world.app, other.accountId)).toBe(0n);
    expect(await world.app.rt.db.escrowHolder.count({ where: { id: holder ?? "" } })).toBe(0);
    expect(world.peer.rt.services.inference.ended(open)).toBeUndefined();
    await assertBooksBalance(world.app.rt.db);
  });
});
