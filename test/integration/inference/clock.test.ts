// Time in routing comes from the injected clock (issue 15): a test moves it instead of sleeping.
// A key cooled down after an upstream 402 stays out of routing until the clock passes its cooldown,
// and the request clears on it the moment the clock moves past — not a millisecond of real waiting.
import { describe, expect } from "vitest";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { movableClock } from "../../../testkit/harness.js";
import { addSupply, chat, fundedBuyerKey } from "../../../testkit/market.js";

const clock = movableClock();
test.override("appOptions", { sim: {}, syncCatalog: true, clock });
const world = fileWorld(test);
const BODY = { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hello" }], max_tokens: 20 };

describe("the injected clock drives routing", () => {
  test("a cooled-down key is skipped until the clock passes its cooldown, then clears again", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const key = supply.keys[0]?.upstreamKeyId ?? "";
    const pipeline = world.app.rt.services.inference;
    pipeline.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    expect((await chat(world.app, buyer.apiKey, BODY)).status).toBe(200);

    // cooled down for a minute of the test's clock
    const until = clock.now().getTime() + 60_000;
    expect(await world.app.rt.services.keyHealth.coolDown(key, until)).toBe(true);
    const refused = await chat(world.app, buyer.apiKey, BODY);
    expect(refused.status).toBe(503);

    // a minute later on the clock, and no real time spent: the key is routable again
    clock.advance(59_000);
    expect((await chat(world.app, buyer.apiKey, BODY)).status).toBe(503);
    clock.advance(1_000);
    pipeline.invalidateBook();
    const ok = await chat(world.app, buyer.apiKey, BODY);
    expect(ok.status).toBe(200);
    await assertBooksBalance(world.app.rt.db);
  });
});
