// Escrow pressure (issue 18 finding 5, across processes; found by the soak): a router process that
// holds a buyer's balance idle in its slice gives it back when another process is refused for want
// of it, so a buyer whose confirmed balance covers a request is not refused 402 because another API
// process happened to take a large slice first.
import { describe, expect } from "vitest";
import { parseDecimal6 } from "../../../src/lib/money.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import { addSupply, confirmedOf, fundedBuyerKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true, peer: true });
const world = fileWorld(test);

describe("escrow pressure across API processes", () => {
  test("a slow video job on one process holds the buyer's whole balance; an image on the other still clears", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 100_000_000n }]);
    const key = supply.keys[0];
    if (!key) throw new Error("no key");
    world.app.rt.services.inference.invalidateBook();
    world.peer.rt.services.inference.invalidateBook();
    world.sim.state.setVideoConfig({ processingPolls: 5, renderMs: 0, defaultOutcome: "mp4" });
    // the queue call takes 1.5 s: meanwhile the first process's slice holds the buyer's balance
    world.sim.state.injectFault(key.secret, { kind: "latency", ms: 1_500, route: "/video/queue", count: 1 });
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const auth = { authorization: `Bearer ${buyer.apiKey}` };
    const video = call(world.app, {
      method: "POST",
      path: "/v1/video/queue",
      headers: auth,
      body: { model: "wan-2.6-text-to-video", prompt: "a fox", duration: "5s", resolution: "720p" },
    });
    // wait until the first process holds the whole balance in its slice
    await expect
      .poll(
        async () =>
          (await world.app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } })).reservedMicroUsdc,
      )
      .toBe(1_000_000n);
    const image = await call(world.peer, {
      method: "POST",
      path: "/v1/image/generate",
      headers: auth,
      body: { model: "venice-sd35", prompt: "a red fox" },
    });
    expect(image.status, JSON.stringify(image.body)).toBe(200);
    const v = await video;
    expect(v.status, JSON.stringify(v.body)).toBe(200);
    const spent =
      (parseDecimal6((v.body as { svc: { cost_usdc: string } }).svc.cost_usdc) ?? 0n) +
      (parseDecimal6(image.headers.get("x-svc-cost-usdc") ?? "") ?? 0n);
    expect(spent).toBeGreaterThan(0n);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n - spent);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});
