// The definitions a text request sends beside its messages (tools, a tool choice, a response format)
// are prompt: the provider renders them into it and bills them as prompt tokens (the simulator
// counts them so, `countDefinitionTokens`). The charge is capped at the maximum the admission
// estimate allows, so an estimate over the messages alone let a large tool definition and a tiny
// max_tokens buy the supplier's burn for a fraction of it. Each route's charge here is the whole burn
// the supplier's key paid, at the clearing price, and the books balance.
import { describe, expect } from "vitest";
import { computeCharge } from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, chat, confirmedOf, endedRequest, fundedBuyerKey, responses } from "../../../testkit/market.js";

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

/** A function tool whose description is `chars` long: about chars / 4 prompt tokens upstream. */
function bigTool(chars: number) {
  return { type: "function", function: { name: "lookup", description: "d".repeat(chars), parameters: {} } };
}

/** What the last inference cost the supplier's key that served it, per the simulator's own accounting. */
function lastSimBurn(): bigint {
  const record = world.sim.state
    .listRequests({})
    .filter((x) => x.burnMicroDiem !== undefined && x.burnMicroDiem > 0n)
    .at(-1);
  expect(record?.burnMicroDiem).toBeGreaterThan(0n);
  return record?.burnMicroDiem ?? 0n;
}

/** The clearing price of the request the answer names (cents per dollar of face), from its record. */
async function priceOf(r: { headers: Headers }): Promise<number> {
  const record = await endedRequest(world.app, r.headers.get("x-svc-support-reference") ?? "");
  expect(record.clearingPriceCents).toBeGreaterThan(0);
  return record.clearingPriceCents ?? 0;
}

describe("definitions beside the messages are priced as prompt", () => {
  test("chat with a large tool and a response format: the buyer pays the whole burn", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 50, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await chat(world.app, buyer.apiKey, {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 1,
      tools: [bigTool(40_000)],
      tool_choice: "auto",
      response_format: { type: "json_schema", json_schema: { name: "s", schema: { description: "x".repeat(8_000) } } },
    });
    expect(r.status).toBe(200);
    const usage = (r.body as { usage: { prompt_tokens: number } }).usage;
    expect(usage.prompt_tokens).toBeGreaterThan(12_000); // the definitions are in the prompt
    const burn = lastSimBurn();
    const paid = before - (await confirmedOf(world.app, buyer.accountId));
    expect(paid).toBe(computeCharge(burn, await priceOf(r), 1000).grossMicroUsdc);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a streamed chat with a large tool: the buyer pays the whole burn", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 45, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await chat(world.app, buyer.apiKey, {
      model: MODEL,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 1,
      tools: [bigTool(30_000)],
    });
    expect(r.status).toBe(200);
    const burn = lastSimBurn();
    const paid = before - (await confirmedOf(world.app, buyer.accountId));
    expect(paid).toBe(computeCharge(burn, await priceOf(r), 1000).grossMicroUsdc);
    await assertBooksBalance(world.app.rt.db);
  });

  test("Responses with a large tool: the buyer pays the whole burn", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await responses(world.app, buyer.apiKey, {
      model: MODEL,
      input: "hi",
      max_output_tokens: 16,
      tools: [{ type: "function", name: "lookup", description: "d".repeat(40_000), parameters: {} }],
    });
    expect(r.status).toBe(200);
    const usage = (r.body as { usage: { input_tokens: number } }).usage;
    expect(usage.input_tokens).toBeGreaterThan(10_000);
    const burn = lastSimBurn();
    const paid = before - (await confirmedOf(world.app, buyer.accountId));
    expect(paid).toBe(computeCharge(burn, await priceOf(r), 1000).grossMicroUsdc);
    await assertBooksBalance(world.app.rt.db);
  });
});
