import { describe, expect } from "vitest";
import { type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectError } from "../../../testkit/errors.js";
import { chat, emptyBook, fundedBuyerKey } from "../../../testkit/market.js";
import {
  type KeyBody,
  type OfferBody,
  postOffer,
  postOfferCall,
  registerKey,
  routableAt,
  simKey,
  supplySnapshot,
} from "../../../testkit/supply.js";

/**
 * Issue 18 finding 8: a `quantityDiem` without six decimals and an offer larger than the key's known
 * DIEM balance were accepted. SPEC "Supplier records": a decimal string with six decimals. An offer
 * larger than the balance is accepted (docs/decisions.md "Hostile input"), but routable depth — the
 * ladder, capacity and the router — never promises DIEM the key is not known to have.
 */

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, env: { KEY_MAX_IN_FLIGHT: "64" }, syncCatalog: true });
const world = fileWorld(test);

/** A signed-in supplier with one registered key holding `diemMicro` (prices unique per test). */
async function supplier(diemMicro: bigint): Promise<{ user: SignedInUser; key: KeyBody; secret: string }> {
  const user = await signIn(world.app);
  const secret = simKey(world.sim, diemMicro);
  const key = await registerKey(world.app, user, secret);
  return { user, key, secret };
}

describe("quantityDiem is a decimal string with exactly six decimals", () => {
  test.each([
    ["no decimals", "1"],
    ["one decimal", "12.5"],
    ["five decimals", "1.00000"],
    ["seven decimals", "1.0000000"],
    ["a trailing dot", "1."],
    ["a leading dot", ".500000"],
    ["surrounding spaces", " 1.000000 "],
    ["a sign", "+1.000000"],
  ])("%s (%j) → 400 naming quantityDiem; nothing created", async (_label, quantityDiem) => {
    const { user, key } = await supplier(100_000_000n);
    const before = await supplySnapshot(world.app.rt.db, user.accountId);
    const res = await postOfferCall(world.app, user, { upstreamKeyId: key.id, priceCentsPerDollar: 51, quantityDiem });
    expectError(res, 400, "invalid_request");
    expect((res.body as { error: { field?: string; message: string } }).error.field).toBe("quantityDiem");
    expect((res.body as { error: { message: string } }).error.message).toMatch(/six decimals/);
    expect(await supplySnapshot(world.app.rt.db, user.accountId)).toBe(before);
  });

  test.each([
    ["the smallest quantity", "0.000001"],
    ["a whole number written out", "25.000000"],
  ])("%s (%j) → 201", async (_label, quantityDiem) => {
    const { user, key } = await supplier(100_000_000n);
    const res = await postOfferCall(world.app, user, { upstreamKeyId: key.id, priceCentsPerDollar: 52, quantityDiem });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((res.body as OfferBody).quantityDiem).toBe(quantityDiem);
  });
});

describe("routable depth never promises DIEM the key does not have", () => {
  test("an offer larger than the key's balance is accepted; the ladder routes only the balance", async () => {
    const { user, key } = await supplier(2_000_000n);
    const offer = await postOffer(world.app, user, key.id, 53, "10.000000");
    expect(offer.quantityDiem).toBe("10.000000");
    expect(await routableAt(world.app, 53)).toBe(2_000_000n);
  });

  test("a key whose balance is unknown routes nothing (it used to route the whole offer)", async () => {
    // only this offer on the book
    await emptyBook(world.app);
    const { user, key, secret } = await supplier(50_000_000n);
    await postOffer(world.app, user, key.id, 54, "10.000000");
    await world.app.rt.db.upstreamKey.update({ where: { id: key.id }, data: { lastBalanceMicroDiem: null } });
    await world.app.rt.services.keyHealth.capacityChanged("test");
    expect(await routableAt(world.app, 54)).toBe(0n);
    // the router agrees: a buyer whose ceiling reaches only this offer is not served on that key
    const buyer = await fundedBuyerKey(world.app, 5_000_000n, 54);
    const sent = world.sim.state.listRequests({ key: secret }).length;
    const r = await chat(world.app, buyer.apiKey, { model: MODEL, messages: [{ role: "user", content: "hi" }] });
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(world.sim.state.listRequests({ key: secret })).toHaveLength(sent);
    await assertBooksBalance(world.app.rt.db);
  });

  test("reservations beyond a shrunken balance route zero at that price, never a negative depth", async () => {
    const a = await supplier(5_000_000n);
    const b = await supplier(5_000_000n);
    const shrunk = await postOffer(world.app, a.user, a.key.id, 55, "10.000000");
    await postOffer(world.app, b.user, b.key.id, 55, "3.000000");
    // 4 DIEM held by requests in flight, then the key's balance is re-read at 1 DIEM
    await world.app.rt.db.offer.update({ where: { id: shrunk.id }, data: { reservedMicroDiem: 4_000_000n } });
    await world.app.rt.db.upstreamKey.update({ where: { id: a.key.id }, data: { lastBalanceMicroDiem: 1_000_000n } });
    // the price level carries b's 3 DIEM, not 3 − 3 = 0
    expect(await routableAt(world.app, 55)).toBe(3_000_000n);
    await world.app.rt.db.offer.update({ where: { id: shrunk.id }, data: { reservedMicroDiem: 0n } });
  });
});
