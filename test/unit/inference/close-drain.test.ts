// A process's stop waits for its requests (InferencePipeline.close with a drain): a request whose
// buyer left still runs to its end after the HTTP server drained (a drain counts responses), and it
// must end on live slices and gate slots, not after they went back.
import { afterEach, describe, expect, test } from "vitest";
import { type MarketWorld, marketPipeline, openText, useMarketDb } from "../../../testkit/market-pipeline.js";

const marketDb = useMarketDb();
let world: MarketWorld;
afterEach(async () => {
  await world?.pipeline.close();
});

async function market() {
  world = await marketPipeline(marketDb());
  const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 60 });
  await world.market.addOffer({ priceCents: 35, quantityMicroDiem: 50_000_000n });
  return buyer;
}

/** true once `p` settled within `ms` (real time) */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let done = false;
  void p.then(() => {
    done = true;
  });
  await new Promise((r) => setTimeout(r, ms));
  return done;
}

describe("close with a drain", () => {
  test("waits for a request in progress: it ends on its own slots, then everything goes back", async () => {
    const buyer = await market();
    const session = await openText(world, buyer);
    expect(world.gates.held().length).toBeGreaterThan(0);
    const closing = world.pipeline.close(10_000);
    // still running: the gates stay open and the close waits
    expect(await settlesWithin(closing, 100)).toBe(false);
    expect(world.gates.closed).toBe(false);
    await world.pipeline.abort(session, "test_done");
    // the close goes on as soon as the request ended, long before its drain runs out
    expect(await settlesWithin(closing, 200)).toBe(true);
    expect(world.gates.closed).toBe(true);
    expect(world.gates.held()).toEqual([]);
  });

  test("a request refused at admission is not waited for", async () => {
    const buyer = await market();
    await expect(openText(world, buyer, { maxPriceCents: 10 })).rejects.toThrow();
    expect(await settlesWithin(world.pipeline.close(10_000), 50)).toBe(true);
  });

  test("a request that does not end in time: the close goes on after the drain", async () => {
    const buyer = await market();
    await openText(world, buyer);
    expect(await settlesWithin(world.pipeline.close(200), 30)).toBe(false);
    // the session never ended; the close gave up on it after 200 ms
    await new Promise((r) => setTimeout(r, 400));
    expect(world.gates.closed).toBe(true);
  });
});
