import Anthropic from "@anthropic-ai/sdk";
import { beforeEach, describe, expect } from "vitest";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, confirmedOf, emptyBook, endedRequest, fundedBuyerKey } from "../../../testkit/market.js";

/**
 * Issue 40 acceptance: the official Anthropic SDK (`@anthropic-ai/sdk`) against `POST /v1/messages`
 * — a message, a stream, and a two-turn tool call (`tool_use` → `tool_result` → final text) — each
 * charge equal to the cost it was told (the header, `usage.cost`, the closing `message_delta`) and
 * to the balance change, to the micro-USDC.
 */

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

beforeEach(async () => {
  await emptyBook(world.app);
  world.sim.state.clearFaults();
});

type Json = Record<string, unknown>;
interface CostUsage {
  cost: number;
  cost_details: { cost_usdc: string; clearing_price_cents: number; upstream_burn_diem: string };
}

function client(apiKey: string, opts: { bearer?: boolean } = {}): Anthropic {
  return new Anthropic({
    baseURL: world.app.baseUrl,
    ...(opts.bearer ? { authToken: apiKey, apiKey: null } : { apiKey }),
    maxRetries: 0,
  });
}

/** The cost told in `usage` against the request's record and the balance change. */
async function expectCharge(usage: unknown, ref: string, balanceChange: bigint): Promise<void> {
  const u = usage as CostUsage;
  const row = await endedRequest(world.app, ref);
  expect(row?.route).toBe("messages");
  expect(row?.costMicroUsdc).toBe(balanceChange);
  expect(balanceChange).toBeGreaterThan(0n);
  expect(u.cost_details.cost_usdc).toBe(formatDecimal6(balanceChange));
  expect(u.cost.toFixed(6)).toBe(u.cost_details.cost_usdc);
  expect(u.cost_details.clearing_price_cents).toBe(row?.clearingPriceCents);
}

const WEATHER = {
  name: "get_weather",
  description: "The weather in a city.",
  input_schema: {
    type: "object" as const,
    properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
    required: ["city", "unit"],
  },
};

describe("the official Anthropic SDK against /v1/messages", () => {
  test("creates a message: text, end_turn, usage with its cost equal to the header and the balance change", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 45, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { data, response } = await client(buyer.apiKey)
      .messages.create({
        model: MODEL,
        max_tokens: 200,
        system: "Be brief.",
        messages: [{ role: "user", content: "hi [[sim:tokens=25]]" }],
      })
      .withResponse();
    const change = before - (await confirmedOf(world.app, buyer.accountId));
    expect(data.type).toBe("message");
    expect(data.role).toBe("assistant");
    expect(data.model).toBe(MODEL);
    expect(data.id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(data.stop_reason).toBe("end_turn");
    expect(data.content).toHaveLength(1);
    expect(data.content[0]?.type).toBe("text");
    expect(data.usage.output_tokens).toBe(25);
    expect(data.usage.input_tokens).toBeGreaterThan(0);
    expect(data.usage.cache_read_input_tokens).toBe(0);
    expect(data.usage.cache_creation_input_tokens).toBe(0);
    const usage = data.usage as unknown as CostUsage & Json;
    expect(response.headers.get("x-svc-cost-usdc")).toBe(usage.cost_details.cost_usdc);
    expect(usage.cost_details.clearing_price_cents).toBe(45);
    await expectCharge(usage, response.headers.get("x-svc-support-reference") ?? "", change);
    await assertBooksBalance(world.app.rt.db);
  });

  test("streams a message: Anthropic's events in order; the cost in message_delta before message_stop", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 50, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const stream = client(buyer.apiKey, { bearer: true }).messages.stream({
      model: MODEL,
      max_tokens: 200,
      messages: [{ role: "user", content: "stream [[sim:tokens=30]] [[sim:chunks=5]]" }],
    });
    const types: string[] = [];
    let delta: (Json & { usage: CostUsage & Json }) | undefined;
    let text = "";
    stream.on("text", (t) => {
      text += t;
    });
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "message_delta") delta = event as unknown as typeof delta;
    }
    const message = await stream.finalMessage();
    const change = before - (await confirmedOf(world.app, buyer.accountId));
    expect(types[0]).toBe("message_start");
    expect(types.slice(1, 2)).toEqual(["content_block_start"]);
    expect(types.filter((t) => t === "content_block_delta")).toHaveLength(5);
    expect(types.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"]);
    expect(message.content).toEqual([{ type: "text", text }]);
    expect(text.length).toBeGreaterThan(0);
    expect(message.stop_reason).toBe("end_turn");
    expect(message.usage.output_tokens).toBe(30);
    expect(delta?.usage.output_tokens).toBe(30);
    expect(delta?.costUsdc).toBe(delta?.usage.cost_details.cost_usdc);
    expect(delta?.clearingPriceCents).toBe(50);
    await expectCharge(delta?.usage, String(delta?.supportReference), change);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a two-turn tool call: tool_use, then tool_result, then the final text; each turn charged as told", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const anthropic = client(buyer.apiKey);
    const question: Anthropic.MessageParam = {
      role: "user",
      content: "What is the weather in Paris? [[sim:tool_call]] [[sim:tokens=12]]",
    };

    let before = await confirmedOf(world.app, buyer.accountId);
    const first = await anthropic.messages
      .create({ model: MODEL, max_tokens: 300, tools: [WEATHER], messages: [question] })
      .withResponse();
    let after = await confirmedOf(world.app, buyer.accountId);
    expect(first.data.stop_reason).toBe("tool_use");
    const call = first.data.content.find((b) => b.type === "tool_use");
    expect(call).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "sim", unit: "celsius" } });
    expect(first.response.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(before - after));
    await expectCharge(first.data.usage, first.response.headers.get("x-svc-support-reference") ?? "", before - after);

    before = after;
    const second = await anthropic.messages
      .create({
        model: MODEL,
        max_tokens: 300,
        tools: [WEATHER],
        messages: [
          question,
          { role: "assistant", content: first.data.content },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: call?.type === "tool_use" ? call.id : "", content: "18°C, sunny" },
            ],
          },
        ],
      })
      .withResponse();
    after = await confirmedOf(world.app, buyer.accountId);
    expect(second.data.stop_reason).toBe("end_turn");
    expect(second.data.content).toHaveLength(1);
    expect(second.data.content[0]?.type).toBe("text");
    expect(second.data.usage.output_tokens).toBe(12);
    expect(second.response.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(before - after));
    await expectCharge(second.data.usage, second.response.headers.get("x-svc-support-reference") ?? "", before - after);

    await assertBooksBalance(world.app.rt.db);
  });

  test("streams a tool call: a tool_use block with input_json_delta, stop_reason tool_use", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const stream = client(buyer.apiKey).messages.stream({
      model: MODEL,
      max_tokens: 300,
      tools: [WEATHER],
      tool_choice: { type: "tool", name: "get_weather" },
      messages: [{ role: "user", content: "Weather in Oslo?" }],
    });
    const deltas: string[] = [];
    let delta: (Json & { usage: CostUsage & Json }) | undefined;
    for await (const event of stream) {
      if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") {
        deltas.push(event.delta.partial_json);
      }
      if (event.type === "message_delta") delta = event as unknown as typeof delta;
    }
    const message = await stream.finalMessage();
    const change = before - (await confirmedOf(world.app, buyer.accountId));
    expect(deltas.length).toBeGreaterThan(1);
    expect(message.stop_reason).toBe("tool_use");
    expect(message.content).toEqual([
      expect.objectContaining({ type: "tool_use", name: "get_weather", input: { city: "sim", unit: "celsius" } }),
    ]);
    await expectCharge(delta?.usage, String(delta?.supportReference), change);
  });

  test("errors reach the SDK as its own classes, with the service's code; a cut stream raises with its bill", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const anthropic = client(buyer.apiKey);
    const unknown = await anthropic.messages
      .create({ model: "no-such-model", max_tokens: 10, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect(unknown).toMatchObject({ status: 404, type: "not_found_error", errorCode: "model_not_found" });

    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "truncate_stream", afterChunks: 2 });
    const before = await confirmedOf(world.app, buyer.accountId);
    const stream = anthropic.messages.stream({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: "user", content: "long [[sim:tokens=60]]" }],
    });
    let text = "";
    stream.on("text", (t) => {
      text += t;
    });
    const failed = await stream.finalMessage().catch((e: unknown) => e);
    const change = before - (await confirmedOf(world.app, buyer.accountId));
    expect(text.length).toBeGreaterThan(0);
    expect(failed).toBeInstanceOf(Anthropic.APIError);
    const body = (failed as InstanceType<typeof Anthropic.APIError>).error as Json & { error: Json };
    expect(body.error).toMatchObject({ type: "api_error", code: "stream_incomplete" });
    expect(body.costUsdc).toBe(formatDecimal6(change));
    expect(change).toBeGreaterThan(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});
