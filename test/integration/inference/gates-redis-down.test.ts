// Gate leases while Redis is unreachable (found by the soak, issue 18): the request that needed a
// slot fails, and so do the requests waiting on the same grow, but nothing else. Before the fix the
// grow's shared promise (`growing`, which only waiting requests await) rejected with nobody
// listening, and Node ended the API process on that unhandled rejection: a Redis restart took
// down every API process that was taking a slot at that moment.

import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { GateLeases } from "../../../src/adapters/redis/gate-leases.js";
import { freePort } from "../../../testkit/harness.js";

const unhandled: unknown[] = [];
const onUnhandled = (e: unknown) => unhandled.push(e);
let redis: Redis;

beforeEach(async () => {
  unhandled.length = 0;
  process.on("unhandledRejection", onUnhandled);
  // a Redis nobody listens on: every command fails once the connection attempt does
  redis = new Redis(`redis://127.0.0.1:${await freePort()}`, {
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    lazyConnect: true,
  });
  redis.on("error", () => undefined);
});
afterEach(() => {
  process.off("unhandledRejection", onUnhandled);
  redis.disconnect();
});

describe("gate leases with Redis down", () => {
  test("one request: acquire rejects with the Redis error, and nothing is left rejecting unobserved", async () => {
    const gates = new GateLeases(redis, { holdersKey: "test:down:holders" });
    await expect(gates.acquire("test:down:gate:a", 8)).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 50));
    expect(unhandled).toEqual([]);
  });

  test("requests waiting on the same grow fail with it, and nothing is left rejecting unobserved", async () => {
    const gates = new GateLeases(redis, { holdersKey: "test:down:holders" });
    const all = await Promise.allSettled(Array.from({ length: 4 }, () => gates.acquire("test:down:gate:b", 8)));
    expect(all.map((r) => r.status)).toEqual(["rejected", "rejected", "rejected", "rejected"]);
    await new Promise((r) => setTimeout(r, 50));
    expect(unhandled).toEqual([]);
  });
});
