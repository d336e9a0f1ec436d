import { randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { nextUtcMidnight } from "../../../src/lib/clock.js";
import { type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import {
  deleteKey,
  deleteOffer,
  type KeyBody,
  myOffers,
  type OfferBody,
  offerStatus,
  patchOffer,
  postOffer,
  postOfferCall,
  registerKey,
  routableAt,
  sellOut,
  simKey,
  supplySnapshot,
} from "../../../testkit/supply.js";

test.override("appOptions", { sim: {}, catalogSyncKey: false });
const world = fileWorld(test);

/** A signed-in supplier with one registered key. Prices are unique per test so ladder checks do not mix. */
async function supplier(diemMicro = 100_000_000n): Promise<{ user: SignedInUser; key: KeyBody }> {
  const user = await signIn(world.app);
  const key = await registerKey(world.app, user, simKey(world.sim, diemMicro));
  return { user, key };
}

async function depletedOffer(user: SignedInUser, keyId: string, price: number): Promise<OfferBody> {
  const o = await postOffer(world.app, user, keyId, price);
  await sellOut(world.app, o.id);
  expect(await world.app.rt.services.offers.markDepletedIfEmpty(o.id)).toBe(true);
  return o;
}

async function expiredOffer(user: SignedInUser, keyId: string, price: number): Promise<OfferBody> {
  const o = await postOffer(world.app, user, keyId, price);
  await world.app.rt.db.offer.update({ where: { id: o.id }, data: { expiresAt: new Date(Date.now() - 1_000) } });
  await world.app.rt.services.offers.expireDue();
  expect(await offerStatus(world.app, o.id)).toBe("expired");
  return o;
}

describe("posting", () => {
  test("201: initial state active, expiring at the next UTC midnight, on the market at its price", async () => {
    const { user, key } = await supplier();
    const before = Date.now();
    const res = await postOfferCall(world.app, user, {
      upstreamKeyId: key.id,
      priceCentsPerDollar: 41,
      quantityDiem: "12.500000",
    });
    expect(res.status).toBe(201);
    const offer = res.body as OfferBody;
    expect(offer).toMatchObject({
      upstreamKeyId: key.id,
      keyStatus: "active",
      priceCentsPerDollar: 41,
      quantityDiem: "12.500000",
      remainingDiem: "12.500000",
      status: "active",
      endedAt: null,
    });
    expect(offer.expiresAt).toBe(nextUtcMidnight(new Date(before)).toISOString());
    expect(await routableAt(world.app, 41)).toBe(12_500_000n);

    const mine = await myOffers(world.app, user);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ id: offer.id, keyStatus: "active", remainingDiem: "12.500000", status: "active" });
  });

  test("the routable depth is capped by the key's last known balance", async () => {
    const { user, key } = await supplier(3_000_000n);
    await postOffer(world.app, user, key.id, 42, "10.000000");
    expect(await routableAt(world.app, 42)).toBe(3_000_000n);
  });

  test("one live offer per key: 20 concurrent posts give exactly one 201", async () => {
    const { user, key } = await supplier();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        postOfferCall(world.app, user, {
          upstreamKeyId: key.id,
          priceCentsPerDollar: 20 + (i % 5),
          quantityDiem: "1.000000",
        }),
      ),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, "conflict");
    expect(await world.app.rt.db.offer.count({ where: { upstreamKeyId: key.id } })).toBe(1);
  });

  test("a second offer on a key with a live (active or paused) offer is 409; other keys are independent", async () => {
    const { user, key } = await supplier();
    const first = await postOffer(world.app, user, key.id, 43);
    expectError(
      await postOfferCall(world.app, user, {
        upstreamKeyId: key.id,
        priceCentsPerDollar: 44,
        quantityDiem: "1.000000",
      }),
      409,
      "conflict",
    );
    expect((await patchOffer(world.app, user, first.id, { status: "paused" })).status).toBe(200);
    expectError(
      await postOfferCall(world.app, user, {
        upstreamKeyId: key.id,
        priceCentsPerDollar: 44,
        quantityDiem: "1.000000",
      }),
      409,
      "conflict",
      "paused keeps the slot",
    );
    const second = await registerKey(world.app, user, simKey(world.sim));
    await postOffer(world.app, user, second.id, 44);
  });

  test("on a revoked key 409; on a key failing upstream auth 409; on another account's or an unknown key 404", async () => {
    const { user, key } = await supplier();
    await deleteKey(world.app, user, key.id);
    expectError(
      await postOfferCall(world.app, user, {
        upstreamKeyId: key.id,
        priceCentsPerDollar: 50,
        quantityDiem: "1.000000",
      }),
      409,
      "conflict",
    );

    const failing = await registerKey(world.app, user, simKey(world.sim));
    await world.app.rt.services.supply.markKeyAuthFailed(failing.id);
    expectError(
      await postOfferCall(world.app, user, {
        upstreamKeyId: failing.id,
        priceCentsPerDollar: 50,
        quantityDiem: "1.000000",
      }),
      409,
      "conflict",
    );

    const other = await supplier();
    expectError(
      await postOfferCall(world.app, user, {
        upstreamKeyId: other.key.id,
        priceCentsPerDollar: 50,
        quantityDiem: "1.000000",
      }),
      404,
      "not_found",
    );
    expectError(
      await postOfferCall(world.app, user, {
        upstreamKeyId: randomUUID(),
        priceCentsPerDollar: 50,
        quantityDiem: "1.000000",
      }),
      404,
      "not_found",
    );
    expect(await world.app.rt.db.offer.count({ where: { accountId: user.accountId } })).toBe(0);
  });

  test.each([
    ["price 0", { priceCentsPerDollar: 0 }, "priceCentsPerDollar"],
    ["price 81", { priceCentsPerDollar: 81 }, "priceCentsPerDollar"],
    ["fractional price", { priceCentsPerDollar: 50.5 }, "priceCentsPerDollar"],
    ["price as a string", { priceCentsPerDollar: "50" }, "priceCentsPerDollar"],
    ["missing price", { priceCentsPerDollar: undefined }, "priceCentsPerDollar"],
    ["quantity 0", { quantityDiem: "0" }, "quantityDiem"],
    ["quantity 0.000000", { quantityDiem: "0.000000" }, "quantityDiem"],
    ["negative quantity", { quantityDiem: "-1" }, "quantityDiem"],
    ["seven decimals", { quantityDiem: "1.0000001" }, "quantityDiem"],
    ["exponent", { quantityDiem: "1e3" }, "quantityDiem"],
    ["quantity as a number", { quantityDiem: 5 }, "quantityDiem"],
    ["quantity over the bound", { quantityDiem: "1000000.000001" }, "quantityDiem"],
    ["missing quantity", { quantityDiem: undefined }, "quantityDiem"],
    ["non-uuid key id", { upstreamKeyId: "key-1" }, "upstreamKeyId"],
    ["missing key id", { upstreamKeyId: undefined }, "upstreamKeyId"],
  ])("%s: 400 naming the field, nothing created", async (_label, override, field) => {
    const { user, key } = await supplier();
    const before = await supplySnapshot(world.app.rt.db, user.accountId);
    const body = { upstreamKeyId: key.id, priceCentsPerDollar: 50, quantityDiem: "1.500000", ...override };
    const res = await postOfferCall(world.app, user, body);
    expectError(res, 400, "invalid_request");
    expect((res.body as { error: { field?: string } }).error.field).toBe(field);
    expect(await supplySnapshot(world.app.rt.db, user.accountId)).toBe(before);
  });

  test("boundary values are accepted: price 1 and 80, quantity 0.000001", async () => {
    const { user, key } = await supplier();
    const a = await postOffer(world.app, user, key.id, 1, "0.000001");
    expect(a.quantityDiem).toBe("0.000001");
    await deleteOffer(world.app, user, a.id);
    const b = await postOffer(world.app, user, key.id, 80, "1000000.000000");
    expect(b.quantityDiem).toBe("1000000.000000");
  });
});

describe("the offer state table", () => {
  test("active → PATCH paused → paused: routing stops, the key's slot stays occupied", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 45, "5.000000");
    expect(await routableAt(world.app, 45)).toBe(5_000_000n);
    const res = await patchOffer(world.app, user, o.id, { status: "paused" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: o.id, status: "paused", priceCentsPerDollar: 45 });
    expect(await routableAt(world.app, 45)).toBe(0n);
    expectError(
      await postOfferCall(world.app, user, {
        upstreamKeyId: key.id,
        priceCentsPerDollar: 45,
        quantityDiem: "1.000000",
      }),
      409,
      "conflict",
    );
    // pausing again is a no-op 200
    expect((await patchOffer(world.app, user, o.id, { status: "paused" })).status).toBe(200);
  });

  test("paused → PATCH active → active: routing resumes", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 46, "5.000000");
    await patchOffer(world.app, user, o.id, { status: "paused" });
    const res = await patchOffer(world.app, user, o.id, { status: "active" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "active" });
    expect(await routableAt(world.app, 46)).toBe(5_000_000n);
  });

  test("reprice an active and a paused offer; price and status in one request", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 47, "5.000000");
    let res = await patchOffer(world.app, user, o.id, { priceCentsPerDollar: 48 });
    expect(res.body).toMatchObject({ status: "active", priceCentsPerDollar: 48 });
    expect(await routableAt(world.app, 47)).toBe(0n);
    expect(await routableAt(world.app, 48)).toBe(5_000_000n);
    res = await patchOffer(world.app, user, o.id, { priceCentsPerDollar: 49, status: "paused" });
    expect(res.body).toMatchObject({ status: "paused", priceCentsPerDollar: 49 });
    res = await patchOffer(world.app, user, o.id, { priceCentsPerDollar: 51 });
    expect(res.body).toMatchObject({ status: "paused", priceCentsPerDollar: 51 });
  });

  test("active → DELETE → cancelled: frees the slot and leaves the listing", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 52);
    const res = await deleteOffer(world.app, user, o.id);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: o.id, status: "cancelled" });
    expect((res.body as OfferBody).endedAt).not.toBeNull();
    expect(await myOffers(world.app, user)).toEqual([]);
    expect(await routableAt(world.app, 52)).toBe(0n);
    await postOffer(world.app, user, key.id, 52);
  });

  test("paused → DELETE → cancelled", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 53);
    await patchOffer(world.app, user, o.id, { status: "paused" });
    expect((await deleteOffer(world.app, user, o.id)).body).toMatchObject({ status: "cancelled" });
    await postOffer(world.app, user, key.id, 53);
  });

  test("active or paused with nothing remaining → depleted (markDepletedIfEmpty, once); frees the slot", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 54);
    expect(await world.app.rt.services.offers.markDepletedIfEmpty(o.id)).toBe(false); // still has DIEM
    await sellOut(world.app, o.id);
    const [a, b] = await Promise.all([
      world.app.rt.services.offers.markDepletedIfEmpty(o.id),
      world.app.rt.services.offers.markDepletedIfEmpty(o.id),
    ]);
    expect([a, b].filter(Boolean)).toHaveLength(1);
    expect(await offerStatus(world.app, o.id)).toBe("depleted");
    expect((await myOffers(world.app, user))[0]).toMatchObject({
      id: o.id,
      status: "depleted",
      remainingDiem: "0.000000",
    });
    await postOffer(world.app, user, key.id, 54);

    const paused = await registerKey(world.app, user, simKey(world.sim));
    const p = await postOffer(world.app, user, paused.id, 54);
    await patchOffer(world.app, user, p.id, { status: "paused" });
    await sellOut(world.app, p.id);
    expect(await world.app.rt.services.offers.markDepletedIfEmpty(p.id)).toBe(true);
    expect(await offerStatus(world.app, p.id)).toBe("depleted");
  });

  test("the expiry sweep also depletes live offers with nothing left", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 55);
    await sellOut(world.app, o.id);
    const r = await world.app.rt.services.offers.expireDue();
    expect(r.depleted).toBeGreaterThanOrEqual(1);
    expect(await offerStatus(world.app, o.id)).toBe("depleted");
  });

  test("depleted, expired and cancelled offers are not live: PATCH and DELETE are 409, nothing changes", async () => {
    const { user, key } = await supplier();
    const depleted = await depletedOffer(user, key.id, 56);
    const expired = await expiredOffer(user, key.id, 56);
    const cancelled = await postOffer(world.app, user, key.id, 56);
    await deleteOffer(world.app, user, cancelled.id);
    for (const [label, o, status] of [
      ["depleted", depleted, "depleted"],
      ["expired", expired, "expired"],
      ["cancelled", cancelled, "cancelled"],
    ] as const) {
      const before = await supplySnapshot(world.app.rt.db, user.accountId);
      expectError(await patchOffer(world.app, user, o.id, { status: "active" }), 409, "conflict", `${label} unpause`);
      expectError(await patchOffer(world.app, user, o.id, { status: "paused" }), 409, "conflict", `${label} pause`);
      expectError(
        await patchOffer(world.app, user, o.id, { priceCentsPerDollar: 30 }),
        409,
        "conflict",
        `${label} reprice`,
      );
      expectError(await deleteOffer(world.app, user, o.id), 409, "conflict", `${label} cancel`);
      expect(await offerStatus(world.app, o.id)).toBe(status);
      expect(await supplySnapshot(world.app.rt.db, user.accountId)).toBe(before);
    }
    // the listing keeps depleted and expired, drops cancelled
    const listed = (await myOffers(world.app, user)).map((o) => o.id);
    expect(listed).toContain(depleted.id);
    expect(listed).toContain(expired.id);
    expect(listed).not.toContain(cancelled.id);
  });

  test("a live offer whose DIEM already expired (before the sweep) cannot be repriced or unpaused", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 57);
    await world.app.rt.db.offer.update({ where: { id: o.id }, data: { expiresAt: new Date(Date.now() - 1_000) } });
    expectError(await patchOffer(world.app, user, o.id, { priceCentsPerDollar: 30 }), 409, "conflict");
    expect(await routableAt(world.app, 57)).toBe(0n);
  });

  test("an upstream-key revocation cancels active, paused, depleted and expired offers (see upstream-keys)", async () => {
    const { user, key } = await supplier();
    const depleted = await depletedOffer(user, key.id, 58);
    const expired = await expiredOffer(user, key.id, 58);
    const live = await postOffer(world.app, user, key.id, 58);
    const res = await deleteKey(world.app, user, key.id);
    expect(res.body).toMatchObject({ cancelledOffers: 3 });
    for (const o of [depleted, expired, live]) expect(await offerStatus(world.app, o.id)).toBe("cancelled");
    expect(await myOffers(world.app, user)).toEqual([]);
  });
});

describe("rejection", () => {
  test.each([
    ["an empty body", {}],
    ["only unknown fields", { price: 50 }],
    ["status depleted", { status: "depleted" }],
    ["status cancelled", { status: "cancelled" }],
    ["price 0", { priceCentsPerDollar: 0 }],
    ["price 81", { priceCentsPerDollar: 81 }],
    ["price as a string", { priceCentsPerDollar: "50" }],
    ["a valid status next to a bad price", { status: "paused", priceCentsPerDollar: 90 }],
  ])("PATCH with %s: 400, nothing changed", async (_label, body) => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 59);
    const before = await supplySnapshot(world.app.rt.db, user.accountId);
    expectError(await patchOffer(world.app, user, o.id, body), 400, "invalid_request");
    expect(await supplySnapshot(world.app.rt.db, user.accountId)).toBe(before);
  });

  test("non-uuid ids are 400; unknown ids are 404", async () => {
    const { user } = await supplier();
    expectError(await patchOffer(world.app, user, "nope", { status: "paused" }), 400, "invalid_request");
    expectError(await deleteOffer(world.app, user, "nope"), 400, "invalid_request");
    expectError(await patchOffer(world.app, user, randomUUID(), { status: "paused" }), 404, "not_found");
    expectError(await deleteOffer(world.app, user, randomUUID()), 404, "not_found");
  });
});

describe("standing settings and schedules (issue 30)", () => {
  const SCHEDULE = [
    { fromUtc: "18:00", priceCentsPerDollar: 40 },
    { fromUtc: "21:30", priceCentsPerDollar: 30 },
    { fromUtc: "23:00", priceCentsPerDollar: 20 },
  ];

  test("POST and PATCH take repostDaily, dailyQuantityDiem and schedule; null removes the cap or the schedule", async () => {
    const { user, key } = await supplier();
    const res = await postOfferCall(world.app, user, {
      upstreamKeyId: key.id,
      priceCentsPerDollar: 57,
      quantityDiem: "5.000000",
      repostDaily: true,
      dailyQuantityDiem: "20.000000",
      schedule: SCHEDULE,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const o = res.body as OfferBody;
    expect(o).toMatchObject({
      priceCentsPerDollar: 57,
      repostDaily: true,
      dailyQuantityDiem: "20.000000",
      schedule: SCHEDULE,
      repostedFromId: null,
    });
    expect([57, 40, 30, 20]).toContain(o.effectivePriceCentsPerDollar);
    expect((await myOffers(world.app, user))[0]).toMatchObject({ id: o.id, schedule: SCHEDULE, repostDaily: true });

    const off = await patchOffer(world.app, user, o.id, {
      repostDaily: false,
      dailyQuantityDiem: null,
      schedule: null,
    });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect(off.body).toMatchObject({
      repostDaily: false,
      dailyQuantityDiem: null,
      schedule: null,
      effectivePriceCentsPerDollar: 57,
    });
    // fields not sent are kept
    const on = await patchOffer(world.app, user, o.id, { dailyQuantityDiem: "7.250000" });
    expect(on.body).toMatchObject({ repostDaily: false, dailyQuantityDiem: "7.250000", schedule: null });

    // a plain offer: not standing, no schedule, effective price = price
    const plain = await supplier();
    const p = await postOffer(world.app, plain.user, plain.key.id, 58);
    expect(p).toMatchObject({
      repostDaily: false,
      dailyQuantityDiem: null,
      schedule: null,
      effectivePriceCentsPerDollar: 58,
    });
  });

  const steps = (...xs: unknown[]) => xs;
  test.each([
    ["schedule not a list", { schedule: "18:00=40" }, "schedule"],
    ["schedule empty", { schedule: [] }, "schedule"],
    [
      "25 steps",
      {
        schedule: Array.from({ length: 25 }, (_, i) => ({
          fromUtc: `${String(i % 24).padStart(2, "0")}:${i >= 24 ? "30" : "00"}`,
          priceCentsPerDollar: 10,
        })),
      },
      "schedule",
    ],
    [
      "a step that is not an object",
      { schedule: steps({ fromUtc: "18:00", priceCentsPerDollar: 40 }, 7) },
      "schedule.1",
    ],
    ["fromUtc missing", { schedule: steps({ priceCentsPerDollar: 40 }) }, "schedule.0.fromUtc"],
    ["fromUtc a number", { schedule: steps({ fromUtc: 1800, priceCentsPerDollar: 40 }) }, "schedule.0.fromUtc"],
    ["fromUtc 24:00", { schedule: steps({ fromUtc: "24:00", priceCentsPerDollar: 40 }) }, "schedule.0.fromUtc"],
    ["fromUtc 6:00", { schedule: steps({ fromUtc: "6:00", priceCentsPerDollar: 40 }) }, "schedule.0.fromUtc"],
    [
      "a time not after the step before",
      {
        schedule: steps(
          { fromUtc: "18:00", priceCentsPerDollar: 40 },
          { fromUtc: "19:00", priceCentsPerDollar: 35 },
          { fromUtc: "19:00", priceCentsPerDollar: 30 },
        ),
      },
      "schedule.2.fromUtc",
    ],
    [
      "a step price 0",
      { schedule: steps({ fromUtc: "18:00", priceCentsPerDollar: 0 }) },
      "schedule.0.priceCentsPerDollar",
    ],
    [
      "a step price 81",
      { schedule: steps({ fromUtc: "18:00", priceCentsPerDollar: 81 }) },
      "schedule.0.priceCentsPerDollar",
    ],
    [
      "a fractional step price",
      { schedule: steps({ fromUtc: "18:00", priceCentsPerDollar: 40.5 }) },
      "schedule.0.priceCentsPerDollar",
    ],
    [
      "a step price as a string",
      { schedule: steps({ fromUtc: "18:00", priceCentsPerDollar: "40" }) },
      "schedule.0.priceCentsPerDollar",
    ],
    ["repostDaily a string", { repostDaily: "yes" }, "repostDaily"],
    ["dailyQuantityDiem without six decimals", { dailyQuantityDiem: "20" }, "dailyQuantityDiem"],
    ["dailyQuantityDiem 0", { dailyQuantityDiem: "0.000000" }, "dailyQuantityDiem"],
    ["dailyQuantityDiem a number", { dailyQuantityDiem: 20 }, "dailyQuantityDiem"],
  ])("%s: 400 naming the field on POST and on PATCH, nothing changed", async (_label, override, field) => {
    const { user, key } = await supplier();
    const before = await supplySnapshot(world.app.rt.db, user.accountId);
    const body = { upstreamKeyId: key.id, priceCentsPerDollar: 50, quantityDiem: "1.500000", ...override };
    const res = await postOfferCall(world.app, user, body);
    expectError(res, 400, "invalid_request");
    expect((res.body as { error: { field?: string } }).error.field).toBe(field);
    expect((res.body as { error: { message: string } }).error.message.startsWith(field)).toBe(true);
    expect(await supplySnapshot(world.app.rt.db, user.accountId)).toBe(before);

    const o = await postOffer(world.app, user, key.id, 50);
    const live = await supplySnapshot(world.app.rt.db, user.accountId);
    const patched = await patchOffer(world.app, user, o.id, override);
    expectError(patched, 400, "invalid_request");
    expect((patched.body as { error: { field?: string } }).error.field).toBe(field);
    expect(await supplySnapshot(world.app.rt.db, user.accountId)).toBe(live);
  });

  test("PATCH with nothing to change is 400", async () => {
    const { user, key } = await supplier();
    const o = await postOffer(world.app, user, key.id, 50);
    const res = await patchOffer(world.app, user, o.id, {});
    expectError(res, 400, "invalid_request");
    expect((res.body as { error: { message: string } }).error.message).toContain("Nothing to change");
  });
});

describe("authorisation", () => {
  test("another account gets 404 on every offer and key id route; nothing changes", async () => {
    const owner = await supplier();
    const other = await supplier();
    const o = await postOffer(world.app, owner.user, owner.key.id, 60);
    const before = await supplySnapshot(world.app.rt.db, owner.user.accountId);
    expectError(await patchOffer(world.app, other.user, o.id, { status: "paused" }), 404, "not_found");
    expectError(await patchOffer(world.app, other.user, o.id, { priceCentsPerDollar: 10 }), 404, "not_found");
    expectError(await deleteOffer(world.app, other.user, o.id), 404, "not_found");
    expectError(await deleteKey(world.app, other.user, owner.key.id), 404, "not_found");
    expectError(
      await postOfferCall(world.app, other.user, {
        upstreamKeyId: owner.key.id,
        priceCentsPerDollar: 60,
        quantityDiem: "1.000000",
      }),
      404,
      "not_found",
    );
    expect((await myOffers(world.app, other.user)).map((x) => x.id)).not.toContain(o.id);
    expect(await supplySnapshot(world.app.rt.db, owner.user.accountId)).toBe(before);
  });
});
