import OpenAI from "openai";
import { beforeEach, describe, expect } from "vitest";
import { burnMicroDiem, computeCharge, formatDecimal6 } from "../../../src/lib/money.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, confirmedOf, emptyBook, endedRequest, fundedBuyerKey } from "../../../testkit/market.js";

/**
 * Issue 39 item 3: cache writes priced. The upstream bills `cache_creation_input_tokens` at the
 * model's `pricing.cache_write` (claude-sonnet-4-6: 4.5 DIEM per 1M against 3.6 for input). A request
 * with cache reads and writes is debited exactly the supplier key's burn (what the simulator took
 * from the key) at the clearing price, to the micro-USDC; the tokens show in `usage.cost_details`,
 * the request record and the support-reference view; the books balance.
 */

const MODEL = "claude-sonnet-4-6";
const FEE_BPS = 1000;
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

beforeEach(async () => {
  await emptyBook(world.app);
});

interface CostUsage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number; cache_creation_input_tokens: number };
  cost_details: {
    cost_usdc: string;
    clearing_price_cents: number;
    upstream_burn_diem: string;
    cached_tokens: number;
    cache_write_tokens: number;
  };
}

const PROMPT = `${"a long shared system prompt. ".repeat(120)} [[sim:cached_tokens=300]] [[sim:cache_write=500]] [[sim:tokens=40]]`;

async function expectExact(o: {
  usage: CostUsage;
  ref: string;
  secret: string;
  keyBefore: bigint;
  buyerBefore: bigint;
  accountId: string;
  apiKey: string;
  price: number;
}): Promise<void> {
  const keyAfter = world.sim.state.getKey(o.secret)?.diemMicro ?? -1n;
  const simBurn = o.keyBefore - keyAfter;
  const [record] = world.sim.state.listRequests({ key: o.secret });
  expect(record?.usage).toMatchObject({ cachedTokens: 300, cacheWriteTokens: 500 });
  expect(simBurn).toBe(record?.burnMicroDiem);
  const debit = o.buyerBefore - (await confirmedOf(world.app, o.accountId));
  // the buyer's debit is the key's burn at the clearing price, to the micro-USDC
  expect(debit).toBe(computeCharge(simBurn, o.price, FEE_BPS).grossMicroUsdc);
  expect(o.usage.prompt_tokens_details).toEqual({ cached_tokens: 300, cache_creation_input_tokens: 500 });
  expect(o.usage.cost_details).toEqual({
    cost_usdc: formatDecimal6(debit),
    clearing_price_cents: o.price,
    upstream_burn_diem: formatDecimal6(simBurn),
    cached_tokens: 300,
    cache_write_tokens: 500,
  });
  const row = await endedRequest(world.app, o.ref);
  expect(row).toMatchObject({
    promptTokens: o.usage.prompt_tokens,
    completionTokens: 40,
    cachedTokens: 300,
    cacheWriteTokens: 500,
    burnMicroDiem: simBurn,
    costMicroUsdc: debit,
  });
  const detail = await call(world.app, {
    method: "GET",
    path: `/v1/agent/requests/${o.ref}`,
    headers: { authorization: `Bearer ${o.apiKey}` },
  });
  expect(detail.body).toMatchObject({
    burnDiem: formatDecimal6(simBurn),
    costUsdc: formatDecimal6(debit),
    usage: { promptTokens: o.usage.prompt_tokens, completionTokens: 40, cachedTokens: 300, cacheWriteTokens: 500 },
  });
  await assertBooksBalance(world.app.rt.db);
}

describe("a request with cache reads and writes", () => {
  test("buffered: the debit is the key's burn at the clearing price, cache writes at cache_write", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 45, quantityMicroDiem: 50_000_000n }]);
    const key = supply.keys[0];
    if (!key) throw new Error("one key");
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = new OpenAI({ baseURL: `${world.app.baseUrl}/v1`, apiKey: buyer.apiKey, maxRetries: 0 });
    const keyBefore = world.sim.state.getKey(key.secret)?.diemMicro ?? -1n;
    const buyerBefore = await confirmedOf(world.app, buyer.accountId);
    const { data, response } = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: "user", content: PROMPT }] })
      .withResponse();
    const usage = data.usage as unknown as CostUsage;
    // the cache writes cost more than uncached input would have: 500 × (4.5 − 3.6) = 450 micro-DIEM
    const simBurn = keyBefore - (world.sim.state.getKey(key.secret)?.diemMicro ?? -1n);
    const sonnet = { inputMicroPerM: 3_600_000n, outputMicroPerM: 18_000_000n, cacheMicroPerM: 360_000n };
    const tokens = { promptTokens: usage.prompt_tokens, completionTokens: 40, cachedTokens: 300 };
    const atInput = burnMicroDiem(sonnet, tokens);
    expect(simBurn - atInput).toBe(450n);
    expect(simBurn).toBe(
      burnMicroDiem({ ...sonnet, cacheWriteMicroPerM: 4_500_000n }, { ...tokens, cacheWriteTokens: 500 }),
    );
    await expectExact({
      usage,
      ref: response.headers.get("x-svc-support-reference") ?? "",
      secret: key.secret,
      keyBefore,
      buyerBefore,
      accountId: buyer.accountId,
      apiKey: buyer.apiKey,
      price: 45,
    });
  });

  test("streamed: the usage chunk, the record and the debit agree with the key's burn", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 52, quantityMicroDiem: 50_000_000n }]);
    const key = supply.keys[0];
    if (!key) throw new Error("one key");
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = new OpenAI({ baseURL: `${world.app.baseUrl}/v1`, apiKey: buyer.apiKey, maxRetries: 0 });
    const keyBefore = world.sim.state.getKey(key.secret)?.diemMicro ?? -1n;
    const buyerBefore = await confirmedOf(world.app, buyer.accountId);
    const { data: stream, response } = await client.chat.completions
      .create({
        model: MODEL,
        messages: [{ role: "user", content: PROMPT }],
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    let usage: CostUsage | undefined;
    for await (const chunk of stream) if (chunk.usage) usage = chunk.usage as unknown as CostUsage;
    if (!usage) throw new Error("the usage chunk");
    await expectExact({
      usage,
      ref: response.headers.get("x-svc-support-reference") ?? "",
      secret: key.secret,
      keyBefore,
      buyerBefore,
      accountId: buyer.accountId,
      apiKey: buyer.apiKey,
      price: 52,
    });
  });
});
