import { describe, expect } from "vitest";
import { sqlRunner } from "../../../src/adapters/sql.js";
import { eligibleOffers } from "../../../src/domain/inference/routing/clearing.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { createAccount, createInferenceRequest, createOffer, createUpstreamKey } from "../../../testkit/fixtures.js";
import type { TestApp } from "../../../testkit/harness.js";
import { MARKET_ADD_IDS } from "../../../testkit/market-totals.js";

/** two app instances on one database and Redis prefix */
test.override("appOptions", { peer: true });
const world = fileWorld(test);

type CapacityBody = {
  generatedAt: string;
  routableDiem: string;
  usdcToBuyAll: string;
  cheapestPostedCents: number | null;
  prices: { priceCentsPerDollar: number; routableDiem: string; usdcToBuyAll: string }[];
  modalities: Record<"text" | "image" | "video", { available: boolean; liveModels: number }>;
};

async function capacity(app: TestApp, q = ""): Promise<{ status: number; body: CapacityBody }> {
  const r = await call(app, { method: "GET", path: `/v1/capacity${q}` });
  return { status: r.status, body: r.body as CapacityBody };
}

async function clearCache(app: TestApp) {
  const keys = await app.rt.redis.command.keys(`${app.rt.keys.prefix}:capacity:*`);
  if (keys.length) await app.rt.redis.command.del(...keys);
}

describe("GET /v1/capacity", () => {
  test("nothing eligible: the empty shape with status 200", async () => {
    const r = await capacity(world.app);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      routableDiem: "0.000000",
      usdcToBuyAll: "0.000000",
      cheapestPostedCents: null,
      prices: [],
    });
    expect(r.body.modalities).toEqual({
      text: { available: false, liveModels: 0 },
      image: { available: false, liveModels: 0 },
      video: { available: false, liveModels: 0 },
    });
    expect(Object.keys(r.body).sort()).toEqual([
      "cheapestPostedCents",
      "generatedAt",
      "modalities",
      "prices",
      "routableDiem",
      "usdcToBuyAll",
    ]);
  });

  test.each(["29", "81", "abc", "50.5", "-40", ""])("maxPriceCents=%s is 400, nothing clamped", async (v) => {
    const r = await capacity(world.app, `?maxPriceCents=${v}`);
    expect(r.status).toBe(400);
    expect((r.body as unknown as { error: { code: string } }).error.code).toBe("invalid_request");
  });

  test("the ladder: cheapest first, eligibility rule applied, filter narrows and restates the totals", async () => {
    await clearCache(world.app);
    const db = world.app.rt.db;
    const s = await createAccount(db);
    const mk = async (
      price: number,
      qty: bigint,
      opts: { balance?: bigint | null; status?: "active" | "paused"; reserved?: bigint } = {},
    ) => {
      const k = await createUpstreamKey(db, s.id, {
        lastBalanceMicroDiem: opts.balance === undefined ? 100_000_000n : opts.balance,
      });
      const o = await createOffer(db, {
        accountId: s.id,
        upstreamKeyId: k.id,
        priceCentsPerDollar: price,
        quantityMicroDiem: qty,
        status: opts.status,
      });
      if (opts.reserved) await db.offer.update({ where: { id: o.id }, data: { reservedMicroDiem: opts.reserved } });
      return { k, o };
    };
    await mk(20, 1_000_000n); // below the corridor: eligible for every buyer
    await mk(40, 5_000_000n, { balance: 2_000_000n }); // capped by the key's balance
    await mk(40, 3_000_000n, { reserved: 1_000_000n }); // minus in-flight reservations
    await mk(60, 7_000_001n);
    await mk(35, 9_000_000n, { status: "paused" }); // not routable
    const cool = await mk(45, 9_000_000n);
    await db.upstreamKey.update({ where: { id: cool.k.id }, data: { cooldownUntil: new Date(Date.now() + 60_000) } });
    const failed = await mk(46, 9_000_000n);
    await db.upstreamKey.update({ where: { id: failed.k.id }, data: { status: "auth_failed" } });
    const expired = await mk(47, 9_000_000n);
    await db.offer.update({ where: { id: expired.o.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await mk(50, 9_000_000n, { balance: 0n }); // an empty key

    const full = await capacity(world.app);
    expect(full.body.prices).toEqual([
      { priceCentsPerDollar: 20, routableDiem: "1.000000", usdcToBuyAll: "0.200000" },
      { priceCentsPerDollar: 40, routableDiem: "4.000000", usdcToBuyAll: "1.600000" },
      { priceCentsPerDollar: 60, routableDiem: "7.000001", usdcToBuyAll: "4.200000" },
    ]);
    expect(full.body).toMatchObject({ routableDiem: "12.000001", usdcToBuyAll: "6.000000", cheapestPostedCents: 20 });

    const narrowed = await capacity(world.app, "?maxPriceCents=50");
    expect(narrowed.body.prices.map((p) => p.priceCentsPerDollar)).toEqual([20, 40]);
    expect(narrowed.body).toMatchObject({
      routableDiem: "5.000000",
      usdcToBuyAll: "1.800000",
      cheapestPostedCents: 20,
    });

    // capacity is the router's own function: the same offers, the same depth
    const offers = await eligibleOffers(sqlRunner(world.app.rt.sql), { now: new Date(), maxPriceCents: 50 });
    expect(offers.reduce((x, o) => x + o.routableMicroDiem, 0n)).toBe(5_000_000n);
    expect(offers.map((o) => o.priceCentsPerDollar)).toEqual([20, 40, 40]);
  });

  test("the 30 s cache is shared by two processes", async () => {
    await clearCache(world.app);
    const first = await capacity(world.app, "?maxPriceCents=70");
    const s = await createAccount(world.app.rt.db);
    const k = await createUpstreamKey(world.app.rt.db, s.id);
    await createOffer(world.app.rt.db, {
      accountId: s.id,
      upstreamKeyId: k.id,
      priceCentsPerDollar: 30,
      quantityMicroDiem: 50_000_000n,
    });
    // process B answers from the cache process A filled: same snapshot, new offer not visible yet
    const fromB = await capacity(world.peer, "?maxPriceCents=70");
    expect(fromB.body).toEqual(first.body);
    const ttl = await world.app.rt.redis.command.ttl(world.app.rt.keys.capacityCache(70));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(30);
    // once the entry expires, the new depth shows
    await clearCache(world.app);
    const fresh = await capacity(world.peer, "?maxPriceCents=70");
    expect(BigInt(fresh.body.routableDiem.replace(".", ""))).toBe(
      BigInt(first.body.routableDiem.replace(".", "")) + 50_000_000n,
    );
    expect(fresh.body.generatedAt).not.toBe(first.body.generatedAt);
  });

  test("modalities count live, listed, enabled catalog rows", async () => {
    await clearCache(world.app);
    const row = (id: string, modality: "text" | "image" | "video", status: "live" | "coming_soon", extra = {}) =>
      world.app.rt.db.catalogModel.create({ data: { id, modality, status, name: id, upstreamRow: {}, ...extra } });
    await row("t1", "text", "live");
    await row("t2", "text", "live");
    await row("t3", "text", "coming_soon");
    await row("t4", "text", "live", { disabled: true });
    await row("i1", "image", "live", { listed: false });
    await row("v1", "video", "live");
    const r = await capacity(world.app);
    expect(r.body.modalities).toEqual({
      text: { available: true, liveModels: 2 },
      image: { available: false, liveModels: 0 },
      video: { available: true, liveModels: 1 },
    });
  });
});

describe("pool summary and market stats", () => {
  test("pool summary: prices only, no identities", async () => {
    const r = await call(world.app, { method: "GET", path: "/v1/supply/pool/summary" });
    expect(r.status).toBe(200);
    const body = r.body as { prices: Record<string, unknown>[] };
    expect(body.prices.length).toBeGreaterThan(0);
    for (const p of body.prices)
      expect(Object.keys(p).sort()).toEqual(["priceCentsPerDollar", "routableDiem", "usdcToBuyAll"]);
  });

  test("market stats: corridor, savings and today's clears from the books", async () => {
    const db = world.app.rt.db;
    const buyer = await createAccount(db);
    const supplier = await createAccount(db);
    const k = await createUpstreamKey(db, supplier.id);
    const o = await createOffer(db, {
      accountId: supplier.id,
      upstreamKeyId: k.id,
      priceCentsPerDollar: 40,
      quantityMicroDiem: 10_000_000n,
    });
    const clear = async (burn: bigint, price: number) => {
      const req = await createInferenceRequest(db, buyer.id);
      const gross = (burn * BigInt(price)) / 100n;
      const fee = gross / 10n;
      const made = await db.clear.create({
        data: {
          requestId: req.id,
          buyerAccountId: buyer.id,
          supplierAccountId: supplier.id,
          offerId: o.id,
          upstreamKeyId: k.id,
          model: "m",
          modality: "text",
          priceCentsPerDollar: price,
          ceilingCents: 80,
          burnMicroDiem: burn,
          grossMicroUsdc: gross,
          feeMicroUsdc: fee,
          supplierMicroUsdc: gross - fee,
        },
      });
      await db.$executeRawUnsafe(MARKET_ADD_IDS, [made.id]);
    };
    await clear(1_000_000n, 40);
    await clear(3_000_000n, 60);
    const r = await call(world.app, { method: "GET", path: "/v1/market/stats" });
    expect(r.status).toBe(200);
    const body = r.body as Record<string, Record<string, unknown>>;
    expect(body.savings).toEqual({
      clears: 2,
      faceValueUsdc: "4.000000",
      paidUsdc: "2.200000",
      savedUsdc: "1.800000",
      paidOfFaceBps: 5500,
    });
    expect(body.today).toMatchObject({
      clears: 2,
      burnDiem: "4.000000",
      grossUsdc: "2.200000",
      averageClearingPriceCents: 55,
    });
    expect(body.corridor).toMatchObject({ minCents: 30, maxCents: 80 });
    const text = JSON.stringify(r.body);
    for (const id of [buyer.id, supplier.id, buyer.walletAddress, supplier.walletAddress, k.id, o.id])
      expect(text).not.toContain(id);
  });

  test("GraphQL capacity and marketStats use the same services", async () => {
    const r = await call(world.app, {
      method: "POST",
      path: "/graphql",
      body: {
        query:
          "{ capacity(maxPriceCents: 50) { routableDiem cheapestPostedCents text { liveModels } } marketStats { clears paidOfFaceBps } }",
      },
    });
    const rest = await capacity(world.app, "?maxPriceCents=50");
    const data = (
      r.body as {
        data: { capacity: { routableDiem: string; cheapestPostedCents: number }; marketStats: { clears: number } };
      }
    ).data;
    expect(data.capacity.routableDiem).toBe(rest.body.routableDiem.replace(".", "").replace(/^0+(?=\d)/, ""));
    expect(data.capacity.cheapestPostedCents).toBe(rest.body.cheapestPostedCents);
    expect(data.marketStats.clears).toBe(2);
  });
});
