import { QueueEvents } from "bullmq";
import { beforeAll, describe, expect } from "vitest";
import type { CapacityChangedEvent } from "../../../src/adapters/pubsub.js";
import { createRedis } from "../../../src/adapters/redis/client.js";
import { call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { movableClock, type TestApp } from "../../../testkit/harness.js";
import { chat, endedRequest, fundedBuyerKey } from "../../../testkit/market.js";
import { myOffers, type OfferBody, pinToHour, postOfferCall, registerKey, simKey } from "../../../testkit/supply.js";

/**
 * Price schedules (issue 30): a step taking effect moves the offer's effective price for the router
 * (at once, in every process), capacity and the ladder; the price-step job announces it once
 * (capacityChanged, the capacity cache dropped). Two app processes and the test share one clock.
 */
const clock = movableClock();
beforeAll(() => {
  pinToHour(clock, 17);
  clock.advance(58 * 60_000); // 17:58 UTC
});
test.override("appOptions", { sim: {}, syncCatalog: true, clock, workers: true, peer: true });
const world = fileWorld(test);
const BODY = { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hello" }], max_tokens: 20 };

type CapacityBody = {
  cheapestPostedCents: number | null;
  prices: { priceCentsPerDollar: number; routableDiem: string }[];
};

async function capacity(app: TestApp): Promise<CapacityBody> {
  const r = await call(app, { method: "GET", path: "/v1/capacity" });
  expect(r.status).toBe(200);
  return r.body as CapacityBody;
}

async function ladder(app: TestApp): Promise<number[]> {
  const r = await call(app, {
    method: "POST",
    path: "/graphql",
    body: { query: "{ market { cheapestPostedCents prices { priceCentsPerDollar } } }" },
  });
  const data = (r.body as { data: { market: { prices: { priceCentsPerDollar: number }[] } } }).data;
  return data.market.prices.map((p) => p.priceCentsPerDollar);
}

async function clearedAt(app: TestApp, apiKey: string): Promise<number> {
  const r = await chat(app, apiKey, BODY);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const price = Number(r.headers.get("x-svc-clearing-price-cents"));
  const record = await endedRequest(app, r.headers.get("x-svc-support-reference") ?? "");
  // the clear records the price it cleared at
  expect(record.clearingPriceCents).toBe(price);
  const clear = await app.rt.db.clear.findFirstOrThrow({ where: { requestId: record.id } });
  expect(clear.priceCentsPerDollar).toBe(price);
  expect(record.attempts.at(-1)?.priceCents).toBe(price);
  return price;
}

async function runJob(name: string): Promise<unknown> {
  const connection = createRedis(world.app.rt.config.redis.url, "worker");
  const events = new QueueEvents("expiry", { connection, prefix: world.app.rt.keys.bullPrefix() });
  await events.waitUntilReady();
  try {
    const job = await world.app.rt.queues.expiry.add(name, {});
    return await job.waitUntilFinished(events, 15_000);
  } finally {
    await events.close();
    connection.disconnect();
  }
}

/** Collects the capacityChanged events any process publishes from now on. */
function listen(app: TestApp): { events: CapacityChangedEvent[]; stop: () => void } {
  const events: CapacityChangedEvent[] = [];
  const it = app.rt.bus.subscribe("capacityChanged");
  void (async () => {
    for await (const e of it) events.push(e);
  })();
  return { events, stop: () => void it.return?.(undefined) };
}

async function until(check: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
}

async function supplierOffer(user: SignedInUser, body: Record<string, unknown>): Promise<OfferBody> {
  const key = await registerKey(world.app, user, simKey(world.sim, 100_000_000n));
  const res = await postOfferCall(world.app, user, { upstreamKeyId: key.id, quantityDiem: "20.000000", ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as OfferBody;
}

describe("a schedule step", () => {
  test("moves the effective price: the next clear is at the stepped price in every process, then capacity and the ladder show it", async () => {
    const supplier = await signIn(world.app);
    const scheduled = await supplierOffer(supplier, {
      priceCentsPerDollar: 60,
      schedule: [
        { fromUtc: "18:00", priceCentsPerDollar: 40 },
        { fromUtc: "23:00", priceCentsPerDollar: 20 },
      ],
    });
    expect(scheduled).toMatchObject({ priceCentsPerDollar: 60, effectivePriceCentsPerDollar: 60 });
    const other = await signIn(world.app);
    await supplierOffer(other, { priceCentsPerDollar: 50 });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    // a buyer whose ceiling (45) only the stepped price meets
    const thrifty = await fundedBuyerKey(world.app, 5_000_000n, 45);

    // 17:58: the flat 50 is the cheapest; the scheduled offer is at 60
    expect(await clearedAt(world.app, buyer.apiKey)).toBe(50);
    expect((await chat(world.app, thrifty.apiKey, BODY)).status).toBe(503);
    const before = await capacity(world.app);
    expect(before.prices.map((p) => p.priceCentsPerDollar)).toEqual([50, 60]);
    expect(await ladder(world.app)).toEqual([50, 60]);

    const heard = listen(world.peer);
    // 18:00:05: the 18:00 step took effect. No job has run: the routers read their books again at
    // the step and clear at the stepped price, the escrow top-up checks the same price in Postgres
    clock.advance(2 * 60_000 + 5_000);
    expect(await clearedAt(world.app, buyer.apiKey)).toBe(40);
    expect(await clearedAt(world.peer, buyer.apiKey)).toBe(40);
    expect(await clearedAt(world.peer, thrifty.apiKey)).toBe(40);
    expect(await ladder(world.app)).toEqual([40, 50]);
    expect((await myOffers(world.app, supplier))[0]).toMatchObject({
      priceCentsPerDollar: 60,
      effectivePriceCentsPerDollar: 40,
    });
    // capacity is cached for 30 s: the step job drops it and announces the step, once
    expect((await capacity(world.app)).prices.map((p) => p.priceCentsPerDollar)).toEqual([50, 60]);
    expect(await runJob("price-steps")).toEqual({ stepped: 1 });
    const after = await capacity(world.peer);
    expect(after.prices.map((p) => p.priceCentsPerDollar)).toEqual([40, 50]);
    expect(after.cheapestPostedCents).toBe(40);
    await until(() => heard.events.some((e) => e.reason === "price_stepped"));
    expect(heard.events.filter((e) => e.reason === "price_stepped")).toHaveLength(1);
    expect(heard.events.find((e) => e.reason === "price_stepped")?.cheapestPostedCents).toBe(40);
    expect(await world.app.rt.services.standing.announcePriceSteps()).toEqual({ stepped: 0 });

    // 23:00:30: the next step, announced once by concurrent runs in both processes
    clock.advance(5 * 3_600_000 + 25_000);
    const runs = await Promise.all([
      world.app.rt.services.standing.announcePriceSteps(),
      world.peer.rt.services.standing.announcePriceSteps(),
      world.app.rt.services.standing.announcePriceSteps(),
      world.peer.rt.services.standing.announcePriceSteps(),
    ]);
    expect(runs.reduce((a, r) => a + r.stepped, 0)).toBe(1);
    expect((await capacity(world.app)).cheapestPostedCents).toBe(20);
    expect(await clearedAt(world.app, buyer.apiKey)).toBe(20);
    await until(() => heard.events.filter((e) => e.reason === "price_stepped").length >= 2);
    expect(heard.events.filter((e) => e.reason === "price_stepped")).toHaveLength(2);
    heard.stop();
    await assertBooksBalance(world.app.rt.db);
  });

  test("a PATCH that sets or removes a schedule takes effect at once and is not announced again by the job", async () => {
    await runJob("price-steps");
    const supplier = await signIn(world.app);
    const offer = await supplierOffer(supplier, { priceCentsPerDollar: 70 });
    const now = clock.now();
    const hh = String(now.getUTCHours()).padStart(2, "0");
    const mm = String(now.getUTCMinutes()).padStart(2, "0");
    const patched = await call(world.app, {
      method: "PATCH",
      path: `/v1/supply/offers/${offer.id}`,
      headers: { cookie: supplier.cookie },
      body: { schedule: [{ fromUtc: `${hh}:${mm}`, priceCentsPerDollar: 15 }] },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ priceCentsPerDollar: 70, effectivePriceCentsPerDollar: 15 });
    expect((await world.app.rt.services.market.getLadder()).cheapestPostedCents).toBe(15);
    expect(await world.app.rt.services.standing.announcePriceSteps()).toEqual({ stepped: 0 });

    const removed = await call(world.app, {
      method: "PATCH",
      path: `/v1/supply/offers/${offer.id}`,
      headers: { cookie: supplier.cookie },
      body: { schedule: null },
    });
    expect(removed.body).toMatchObject({ schedule: null, effectivePriceCentsPerDollar: 70 });
    expect(await world.app.rt.services.standing.announcePriceSteps()).toEqual({ stepped: 0 });
  });
});
