// The Redis lease gates against a real Redis: the paired acquisition (a buyer key's slot and a
// supplier key's in one round trip) never takes the second without the first, never exceeds
// either limit under concurrency, and one call releases many leases.
import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, test } from "vitest";
import { closeRedis, createRedis } from "../../../src/adapters/redis/client.js";
import { createGate } from "../../../src/adapters/redis/gates.js";
import { REDIS_URL } from "../../support/db.js";

const redis = createRedis(REDIS_URL, "command");
const gate = createGate(redis);
afterAll(() => closeRedis(redis));

const keys = () => {
  const p = `test:gates:${randomUUID()}`;
  return { buyer: `${p}:buyer`, supplier: `${p}:supplier` };
};
const slot = (key: string, limit: number) => ({ key, leaseId: randomUUID(), limit });

describe("lease gates", () => {
  test("a pair: both taken (2); the second full (1, only the first taken); the first full (0, nothing taken)", async () => {
    const k = keys();
    expect(await gate.tryAcquirePair(slot(k.buyer, 2), slot(k.supplier, 1), 60_000)).toBe(2);
    expect(await gate.tryAcquirePair(slot(k.buyer, 2), slot(k.supplier, 1), 60_000)).toBe(1);
    expect([await gate.count(k.buyer), await gate.count(k.supplier)]).toEqual([2, 1]);
    expect(await gate.tryAcquirePair(slot(k.buyer, 2), slot(k.supplier, 5), 60_000)).toBe(0);
    expect([await gate.count(k.buyer), await gate.count(k.supplier)]).toEqual([2, 1]);
  });

  test("expired leases do not count", async () => {
    const k = keys();
    expect(await gate.tryAcquirePair(slot(k.buyer, 1), slot(k.supplier, 1), 1)).toBe(2);
    await new Promise((r) => setTimeout(r, 10));
    expect(await gate.tryAcquirePair(slot(k.buyer, 1), slot(k.supplier, 1), 60_000)).toBe(2);
  });

  test("200 concurrent pairs never exceed either limit; releaseMany frees every lease in one call", async () => {
    const k = keys();
    const tries = Array.from({ length: 200 }, () => ({ b: slot(k.buyer, 8), s: slot(k.supplier, 5) }));
    const got = await Promise.all(tries.map((t) => gate.tryAcquirePair(t.b, t.s, 60_000)));
    expect(got.filter((g) => g >= 1)).toHaveLength(8);
    expect(got.filter((g) => g === 2)).toHaveLength(5);
    expect([await gate.count(k.buyer), await gate.count(k.supplier)]).toEqual([8, 5]);
    const held = tries.flatMap((t, i) => {
      const g = got[i] ?? 0;
      return [...(g >= 1 ? [t.b] : []), ...(g === 2 ? [t.s] : [])];
    });
    await gate.releaseMany(held.map((h) => ({ key: h.key, leaseId: h.leaseId })));
    expect([await gate.count(k.buyer), await gate.count(k.supplier)]).toEqual([0, 0]);
    await gate.releaseMany([]);
  });
});
