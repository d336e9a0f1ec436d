import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";
import OpenAI from "openai";
import { beforeEach, describe, expect } from "vitest";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, confirmedOf, emptyBook, endedRequest, fundedBuyerKey } from "../../../testkit/market.js";

/**
 * Issue 28 deliverable 5: the charged amount where OpenAI-compatible tooling reads it
 * (OpenRouter's `usage.cost`), equal to `X-Svc-Cost-Usdc` and to the balance change, to the
 * micro-USDC, for buffered and streamed chat and Responses; read by the official OpenAI SDK and by
 * the Vercel AI SDK.
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

/** `usage.cost` and `usage.cost_details` against the request's record, the balance change and each other. */
async function expectCost(usage: unknown, ref: string, balanceChange: bigint): Promise<void> {
  const u = usage as CostUsage;
  const row = await endedRequest(world.app, ref);
  expect(row?.costMicroUsdc).toBe(balanceChange);
  expect(balanceChange).toBeGreaterThan(0n);
  expect(u.cost_details.cost_usdc).toBe(formatDecimal6(balanceChange));
  // the number is the same amount: printed at six decimals it is the exact string
  expect(typeof u.cost).toBe("number");
  expect(u.cost.toFixed(6)).toBe(u.cost_details.cost_usdc);
  expect(u.cost_details.clearing_price_cents).toBe(row?.clearingPriceCents);
  expect(u.cost_details.upstream_burn_diem).toBe(formatDecimal6(row?.burnMicroDiem ?? -1n));
}

describe("usage.cost with the official OpenAI SDK", () => {
  test("buffered chat: usage.cost equals X-Svc-Cost-Usdc and the balance change", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 45, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = new OpenAI({ baseURL: `${world.app.baseUrl}/v1`, apiKey: buyer.apiKey, maxRetries: 0 });
    const before = await confirmedOf(world.app, buyer.accountId);
    const { data, response } = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: "user", content: "hi [[sim:tokens=25]]" }] })
      .withResponse();
    const change = before - (await confirmedOf(world.app, buyer.accountId));
    const usage = data.usage as unknown as CostUsage & Json;
    expect(usage.completion_tokens).toBe(25);
    expect(response.headers.get("x-svc-cost-usdc")).toBe(usage.cost_details.cost_usdc);
    expect(String(usage.cost_details.clearing_price_cents)).toBe(response.headers.get("x-svc-clearing-price-cents"));
    expect(usage.cost_details.clearing_price_cents).toBe(45);
    await expectCost(usage, response.headers.get("x-svc-support-reference") ?? "", change);
    await assertBooksBalance(world.app.rt.db);
  });

  test("streamed chat: the final usage chunk carries usage.cost; svc.cost frame stays and agrees", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 50, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = new OpenAI({ baseURL: `${world.app.baseUrl}/v1`, apiKey: buyer.apiKey, maxRetries: 0 });
    const before = await confirmedOf(world.app, buyer.accountId);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "stream [[sim:tokens=30]]" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: (CostUsage & Json) | undefined;
    let costFrame: Json | undefined;
    for await (const chunk of stream) {
      const c = chunk as unknown as Json;
      if (c.object === "svc.cost") costFrame = c;
      else if (chunk.usage) usage = chunk.usage as unknown as CostUsage & Json;
    }
    const change = before - (await confirmedOf(world.app, buyer.accountId));
    expect(usage?.completion_tokens).toBe(30);
    expect(costFrame?.costUsdc).toBe(usage?.cost_details.cost_usdc);
    expect(costFrame?.clearingPriceCents).toBe(50);
    await expectCost(usage, String(costFrame?.supportReference), change);
    await assertBooksBalance(world.app.rt.db);
  });

  test("buffered and streamed Responses: usage.cost in the body and in response.completed", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = new OpenAI({ baseURL: `${world.app.baseUrl}/v1`, apiKey: buyer.apiKey, maxRetries: 0 });

    let before = await confirmedOf(world.app, buyer.accountId);
    const { data, response } = await client.responses
      .create({ model: MODEL, input: "hi [[sim:tokens=20]]" })
      .withResponse();
    let after = await confirmedOf(world.app, buyer.accountId);
    const usage = data.usage as unknown as CostUsage & Json;
    expect(usage.output_tokens).toBe(20);
    expect(response.headers.get("x-svc-cost-usdc")).toBe(usage.cost_details.cost_usdc);
    await expectCost(usage, response.headers.get("x-svc-support-reference") ?? "", before - after);

    before = after;
    const stream = await client.responses.create({ model: MODEL, input: "more [[sim:tokens=30]]", stream: true });
    let completed: (Json & { response: { usage: CostUsage & Json } }) | undefined;
    for await (const event of stream) {
      if (event.type === "response.completed") completed = event as unknown as typeof completed;
    }
    after = await confirmedOf(world.app, buyer.accountId);
    expect(completed?.response.usage.output_tokens).toBe(30);
    // the flat cost fields stay beside it and agree
    expect(completed?.costUsdc).toBe(completed?.response.usage.cost_details.cost_usdc);
    await expectCost(completed?.response.usage, String(completed?.supportReference), before - after);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("usage.cost with the Vercel AI SDK", () => {
  /** The openai-compatible provider with a metadata extractor reading `usage.cost`, as OpenRouter users do. */
  function provider(apiKey: string) {
    const costOf = (body: unknown): number | undefined => {
      const usage = (body as { usage?: { cost?: unknown } } | null)?.usage;
      return typeof usage?.cost === "number" ? usage.cost : undefined;
    };
    return createOpenAICompatible({
      name: "svc",
      baseURL: `${world.app.baseUrl}/v1`,
      apiKey,
      includeUsage: true,
      metadataExtractor: {
        extractMetadata: async ({ parsedBody }) => {
          const cost = costOf(parsedBody);
          return cost === undefined ? undefined : { svc: { cost } };
        },
        createStreamExtractor: () => {
          let cost: number | undefined;
          return {
            processChunk: (chunk) => {
              cost = costOf(chunk) ?? cost;
            },
            buildMetadata: () => (cost === undefined ? undefined : { svc: { cost } }),
          };
        },
      },
    });
  }

  test("generateText and streamText read usage.cost equal to the balance change", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 55, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const svc = provider(buyer.apiKey);

    let before = await confirmedOf(world.app, buyer.accountId);
    const generated = await generateText({ model: svc(MODEL), prompt: "hi [[sim:tokens=15]]", maxRetries: 0 });
    let after = await confirmedOf(world.app, buyer.accountId);
    expect(generated.text.length).toBeGreaterThan(0);
    expect(generated.usage.outputTokens).toBe(15);
    const bufferedCost = generated.providerMetadata?.svc?.cost;
    expect(typeof bufferedCost).toBe("number");
    expect((bufferedCost as number).toFixed(6)).toBe(formatDecimal6(before - after));
    expect(generated.response.headers?.["x-svc-cost-usdc"]).toBe(formatDecimal6(before - after));

    before = after;
    const streamed = streamText({ model: svc(MODEL), prompt: "stream [[sim:tokens=35]]", maxRetries: 0 });
    let text = "";
    for await (const part of streamed.textStream) text += part;
    const metadata = await streamed.providerMetadata;
    after = await confirmedOf(world.app, buyer.accountId);
    expect(text.length).toBeGreaterThan(0);
    expect((await streamed.usage).outputTokens).toBe(35);
    const streamedCost = metadata?.svc?.cost;
    expect(typeof streamedCost).toBe("number");
    expect((streamedCost as number).toFixed(6)).toBe(formatDecimal6(before - after));
    expect(before - after).toBeGreaterThan(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});
