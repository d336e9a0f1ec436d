// Per-process escrow (docs/decisions.md "Escrow"): requests admitted against a process's slices in
// memory still see every change that matters — a supply change, a ceiling change, a revoked key —
// made in this process at once and in another process through Redis; and two processes drawing
// on one balance never overdraw it.
import { describe, expect } from "vitest";
import type { AttemptingSession } from "../../../src/domain/inference/pipeline/session.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import type { TestApp } from "../../../testkit/harness.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import {
  addSupply,
  chat,
  confirmedOf,
  endedRequest,
  fundedBuyerKey,
  openSession,
  reservedOf,
  withdrawSupply,
} from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true, peer: true });
const world = fileWorld(test);
const MODEL = "zai-org-glm-5-1";
const MSG = (extra = "") => ({ model: MODEL, messages: [{ role: "user", content: `hello ${extra}` }] });

/** Retries `fn` until `ok` holds (changes from another process arrive through Redis), up to 5 s. */
async function eventually<T>(fn: () => Promise<T>, ok: (t: T) => boolean): Promise<T> {
  let last = await fn();
  for (let i = 0; i < 100 && !ok(last); i++) {
    await new Promise((r) => setTimeout(r, 50));
    last = await fn();
  }
  return last;
}

/** A request kept in flight (admitted, not ended): its process keeps its slices while it lasts. */
async function inFlight(app: TestApp, accountId: string): Promise<AttemptingSession> {
  return openSession(app, accountId, { stream: true });
}

describe("escrow", () => {
  test("while a request is in flight its process keeps its slices; the next requests need no top-up", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.app.rt.services.inference.invalidateBook(); // the offer above was written straight to the database
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const router = world.app.rt.services.inference;
    const long = await inFlight(world.app, buyer.accountId);
    const held = await reservedOf(world.app, buyer.accountId);
    // the slice is several requests' worth, and the balance still reads confirmed − reserved
    expect(held).toBeGreaterThan(long.plan.maxChargeMicroUsdc);
    const before = router.batchStats().escrow;
    // requests no larger than the one in flight (the slice is sized from it)
    for (let i = 0; i < 3; i++) {
      expect((await chat(world.app, buyer.apiKey, { ...MSG(), max_tokens: 20 })).status).toBe(200);
    }
    const after = router.batchStats().escrow;
    expect(after.admitted - before.admitted).toBe(3);
    expect(after.takes - before.takes).toBe(0);
    await router.abort(long, "test_done");
    // the last request to end gave everything back
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, supply);
  });

  test("a supply change made here is routed on at once, even with warm slices", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 31, quantityMicroDiem: 50_000_000n },
      { priceCents: 32, quantityMicroDiem: 50_000_000n },
    ]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    world.app.rt.services.inference.invalidateBook(); // the offers above were written straight to the database
    const long = await inFlight(world.app, buyer.accountId);
    expect(long.attempt?.offerId).toBe(supply.keys[0]?.offerId);
    const paused = await world.app.rt.services.offers.updateOffer({
      accountId: supply.supplierAccountId,
      offerId: supply.keys[0]?.offerId ?? "",
      status: "paused",
    });
    expect(paused.status).toBe("paused");
    const r = await chat(world.app, buyer.apiKey, MSG());
    expect(r.status).toBe(200);
    expect(r.headers.get("x-svc-clearing-price-cents")).toBe("32");
    await world.app.rt.services.inference.abort(long, "test_done");
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, supply);
  });

  test("another process hears a supply change, a lowered ceiling and a revoked key through Redis", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 33, quantityMicroDiem: 50_000_000n },
      { priceCents: 34, quantityMicroDiem: 50_000_000n },
      { priceCents: 70, quantityMicroDiem: 50_000_000n },
    ]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n, 80);
    world.peer.rt.services.inference.invalidateBook();
    // the peer holds warm slices of this buyer and of the cheapest offer
    const long = await inFlight(world.peer, buyer.accountId);
    expect(long.attempt?.offerId).toBe(supply.keys[0]?.offerId);
    expect((await chat(world.peer, buyer.apiKey, MSG())).headers.get("x-svc-clearing-price-cents")).toBe("33");

    // supply: paused through this process; the peer stops routing to it
    await world.app.rt.services.offers.updateOffer({
      accountId: supply.supplierAccountId,
      offerId: supply.keys[0]?.offerId ?? "",
      status: "paused",
    });
    const moved = await eventually(
      () => chat(world.peer, buyer.apiKey, MSG()),
      (r) => r.headers.get("x-svc-clearing-price-cents") === "34",
    );
    expect(moved.status).toBe(200);
    expect(moved.headers.get("x-svc-clearing-price-cents")).toBe("34");

    // ceiling: the cheaper offers withdrawn, the buyer's ceiling lowered below the last one
    await world.app.rt.services.offers.cancelOffer({
      accountId: supply.supplierAccountId,
      offerId: supply.keys[1]?.offerId ?? "",
    });
    await world.app.rt.services.accounts.setMaxPrice({ accountId: buyer.accountId, maxPriceCentsPerDollar: 60 });
    const refused = await eventually(
      () => chat(world.peer, buyer.apiKey, MSG()),
      (r) => r.status === 503,
    );
    expect(refused.status).toBe(503);
    expect((refused.body as { error: { code: string } }).error.code).toBe("no_eligible_supply");

    // revocation: through this process's API; the peer refuses the key although its cache is warm
    const keyId = (await world.app.rt.db.apiKey.findFirstOrThrow({ where: { accountId: buyer.accountId } })).id;
    await world.app.rt.services.apiKeys.revokeKey({
      actor: { accountId: buyer.accountId, credential: "session" },
      keyId,
    });
    const revoked = await eventually(
      () => chat(world.peer, buyer.apiKey, { ...MSG(), model: "no-such-model" }),
      (r) => r.status === 401,
    );
    expect(revoked.status).toBe(401);

    await world.peer.rt.services.inference.abort(long, "test_done");
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, supply);
  });

  test("a stream's support reference resolves while it runs (in_progress), then to its record", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const res = await fetch(`${world.app.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${buyer.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ ...MSG("[[sim:tokens=20]] [[sim:chunks=8]] [[sim:chunk_delay_ms=100]]"), stream: true }),
    });
    expect(res.status).toBe(200);
    const ref = res.headers.get("x-svc-support-reference") ?? "";
    const detail = (app: TestApp) =>
      call(app, {
        method: "GET",
        path: `/v1/agent/requests/${ref}`,
        headers: { authorization: `Bearer ${buyer.apiKey}` },
      });
    // from either process, while the stream runs
    for (const app of [world.app, world.peer]) {
      const live = await detail(app);
      expect(live.status).toBe(200);
      expect(live.body).toMatchObject({ supportReference: ref, status: "in_progress", costUsdc: null });
    }
    // another account cannot see it
    const stranger = await fundedBuyerKey(world.app, 1_000_000n);
    const hidden = await call(world.app, {
      method: "GET",
      path: `/v1/agent/requests/${ref}`,
      headers: { authorization: `Bearer ${stranger.apiKey}` },
    });
    expect(hidden.status).toBe(404);
    await res.text();
    const done = await eventually(
      () => detail(world.app),
      (r) => (r.body as { status?: string }).status === "succeeded",
    );
    expect(done.body).toMatchObject({ status: "succeeded" });
    expect((done.body as { costUsdc: string | null }).costUsdc).not.toBeNull();
    await expectHoldsReleased(world.app, buyer.accountId);
    await withdrawSupply(world.app, supply);
  });

  test("two processes drawing on one small balance: never overdrawn, every charge on the record", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 500_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    world.peer.rt.services.inference.invalidateBook();
    // enough for a handful of these requests at the ceiling
    const buyer = await fundedBuyerKey(world.app, 20_000n);
    const body = { ...MSG("[[sim:tokens=1500]]"), max_tokens: 4000 };
    // 40 requests, 8 at a time (the API key's in-flight limit), alternating between the processes
    const results: Awaited<ReturnType<typeof chat>>[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < 40) {
          const i = next++;
          results.push(await chat(i % 2 === 0 ? world.app : world.peer, buyer.apiKey, body));
        }
      }),
    );
    for (const r of results) expect([200, 402]).toContain(r.status);
    const ok = results.filter((r) => r.status === 200);
    expect(ok.length).toBeGreaterThan(1);
    expect(results.some((r) => r.status === 402)).toBe(true);
    const shown = ok.reduce((a, r) => a + BigInt((r.headers.get("x-svc-cost-usdc") ?? "0").replace(".", "")), 0n);
    const left = await confirmedOf(world.app, buyer.accountId);
    expect(left).toBeGreaterThanOrEqual(0n);
    expect(left).toBe(20_000n - shown);
    for (const r of results) {
      const req = await endedRequest(world.app, r.headers.get("x-svc-support-reference") ?? "");
      expect(req.status).toBe(r.status === 200 ? "succeeded" : "failed");
    }
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, supply);
  });
});
