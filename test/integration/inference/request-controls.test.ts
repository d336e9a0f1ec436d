import { beforeEach, describe, expect } from "vitest";
import { supportReferenceOf } from "../../../src/domain/accounts/history-reads.js";
import {
  burnMicroDiem,
  formatDecimal6,
  grossMicroUsdc,
  parseDecimal6,
  type TextPricing,
} from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import {
  addSupply,
  chat,
  confirmedOf,
  emptyBook,
  fundedBuyerKey,
  requestByReference,
  responses,
} from "../../../testkit/market.js";
import { frames } from "../../../testkit/sse.js";

/**
 * OpenRouter's request controls through the HTTP routes (docs/decisions.md "OpenRouter request
 * controls"): `models` fallbacks (buffered and streamed, chat and Responses) and `provider.max_price`
 * mapped per model to a ceiling, with the books exact: the cost header is the balance change, at the
 * answering model's rates, and nothing stays held.
 */

const GLM = "zai-org-glm-5-1";
const SONNET = "claude-sonnet-4-6";
/** the simulator's catalog rates (micro-DIEM per 1M tokens) */
const GLM_PRICING: TextPricing = { inputMicroPerM: 1_540_000n, outputMicroPerM: 4_840_000n, cacheMicroPerM: 286_000n };
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

beforeEach(async () => {
  await emptyBook(world.app);
  world.sim.state.clearFaults();
});

const MESSAGES = [{ role: "user", content: "hello [[sim:tokens=40]]" }];
/**
 * max_price that maps SONNET (3.6 / 18 DIEM per 1M) to floor(100 × 1 / 3.6) = 27 and
 * floor(100 × 4 / 18) = 22 → 22 cents, and GLM (1.54 / 4.84) to min(64, 82) = 64 cents.
 */
const SONNET_OUT_GLM_IN = { max_price: { prompt: 1, completion: 4 } };

type ErrorBody = { error: Record<string, unknown> & { code: string } };

/** The account's records, oldest first, each with its support reference (its id: none is stored). */
async function chatRecords(accountId: string) {
  const rows = await world.app.rt.db.inferenceRequest.findMany({ where: { accountId }, orderBy: { startedAt: "asc" } });
  return rows.map((r) => ({ ...r, supportReference: supportReferenceOf(r) }));
}

async function postStream(apiKey: string, path: string, body: Record<string, unknown>) {
  const res = await fetch(`${world.app.baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  return { res, text: await res.text() };
}

/** The charge at GLM's rates for what the simulator metered, at `price`: what the buyer must have paid. */
function glmCharge(usage: { prompt_tokens: number; completion_tokens: number }, priceCents: number): bigint {
  const burn = burnMicroDiem(GLM_PRICING, {
    promptTokens: usage.prompt_tokens,
    completionTokens: usage.completion_tokens,
  });
  return grossMicroUsdc(burn, priceCents);
}

describe("models: fallbacks", () => {
  test("[no-supply-model, served-model]: answers from the second at its price; the first's holds were released", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await chat(world.app, buyer.apiKey, {
      model: SONNET,
      models: [GLM],
      provider: SONNET_OUT_GLM_IN,
      messages: MESSAGES,
    });
    expect(r.status).toBe(200);
    const body = r.body as { model: string; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(body.model).toBe(GLM);
    const cost = parseDecimal6(r.headers.get("x-svc-cost-usdc") ?? "") ?? -1n;
    expect(cost).toBe(glmCharge(body.usage, 40));
    expect(cost).toBeGreaterThan(0n);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before - cost);
    // two requests: the first refused (nothing charged, ceiling 22 recorded), the second settled on GLM
    const [first, second] = await chatRecords(buyer.accountId);
    expect([first?.model, first?.status, first?.errorCode, first?.maxPriceCents, first?.costMicroUsdc]).toEqual([
      SONNET,
      "failed",
      "no_eligible_supply",
      22,
      null,
    ]);
    expect([second?.model, second?.status, second?.maxPriceCents, second?.costMicroUsdc]).toEqual([
      GLM,
      "succeeded",
      64,
      cost,
    ]);
    // the answer names the answering request; the simulator was only asked for GLM (controls not forwarded)
    expect(r.headers.get("x-svc-request-id")).toBe(second?.id);
    expect(r.headers.get("x-svc-support-reference")).toBe(second?.supportReference);
    const calls = world.sim.state
      .listRequests({ route: "/chat/completions" })
      .filter((c) => c.startedAt >= (first?.startedAt ?? new Date()));
    expect(calls.map((c) => [c.model, c.status])).toEqual([[GLM, 200]]);
    expect(calls[0]?.burnMicroDiem).toBe(second?.burnMicroDiem);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("every key failing before the first byte on the first model: the second answers; an unknown first model is skipped", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 40, quantityMicroDiem: 50_000_000n },
      { priceCents: 45, quantityMicroDiem: 50_000_000n },
    ]);
    world.sim.state.injectFault("*", { kind: "http_503", model: SONNET });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await chat(world.app, buyer.apiKey, { models: [SONNET, GLM], messages: MESSAGES });
    expect(r.status).toBe(200);
    expect((r.body as { model: string }).model).toBe(GLM);
    const cost = parseDecimal6(r.headers.get("x-svc-cost-usdc") ?? "") ?? -1n;
    expect(r.headers.get("x-svc-clearing-price-cents")).toBe("40");
    expect(cost).toBe(glmCharge((r.body as { usage: { prompt_tokens: number; completion_tokens: number } }).usage, 40));
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before - cost);
    const [first, second] = await chatRecords(buyer.accountId);
    expect([first?.model, first?.errorCode, first?.costMicroUsdc]).toEqual([SONNET, "upstream_error", null]);
    const firstAttempts = (await requestByReference(world.app, first?.supportReference ?? "")).attempts;
    expect(firstAttempts.map((a) => [a.priceCents, a.outcome])).toEqual([
      [40, "retryable_failure"],
      [45, "retryable_failure"],
    ]);
    // the second model is a fresh request: it may use the keys the first one tried
    const secondAttempts = (await requestByReference(world.app, second?.supportReference ?? "")).attempts;
    expect(secondAttempts.map((a) => [a.upstreamKeyId, a.outcome])).toEqual([
      [supply.keys[0]?.upstreamKeyId, "succeeded"],
    ]);
    await expectHoldsReleased(world.app, buyer.accountId);

    // an id the catalog does not know opens nothing: the next model answers under the transport's id
    const u = await chat(world.app, buyer.apiKey, { model: "no-such-model", models: [GLM], messages: MESSAGES });
    expect(u.status).toBe(200);
    expect((u.body as { model: string }).model).toBe(GLM);
    await assertBooksBalance(world.app.rt.db);
  });

  test("streamed: the fallback happens before anything reached the buyer; one stream, the second model's cost", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.sim.state.injectFault("*", { kind: "close_before_content", model: SONNET });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { res, text } = await postStream(buyer.apiKey, "/v1/chat/completions", {
      model: SONNET,
      models: [GLM],
      messages: MESSAGES,
    });
    expect(res.status).toBe(200);
    const data = frames(text);
    expect(data.at(-1)).toBe("[DONE]");
    const chunks = data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(chunks.some((c) => c.error !== undefined)).toBe(false);
    expect(new Set(chunks.map((c) => c.model))).toEqual(new Set([GLM]));
    const cost = chunks.find((c) => c.object === "svc.cost") as { costUsdc: string; clearingPriceCents: number };
    expect(cost.clearingPriceCents).toBe(40);
    expect(cost.costUsdc).toBe(formatDecimal6(before - (await confirmedOf(world.app, buyer.accountId))));
    const [first, second] = await chatRecords(buyer.accountId);
    expect([first?.model, first?.errorCode, second?.model, second?.status]).toEqual([
      SONNET,
      "upstream_error",
      GLM,
      "succeeded",
    ]);
    expect(res.headers.get("x-svc-request-id")).toBe(second?.id);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("Responses: the same fallbacks, buffered and streamed", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await responses(world.app, buyer.apiKey, {
      model: SONNET,
      models: [GLM],
      provider: SONNET_OUT_GLM_IN,
      input: "hello",
    });
    expect(r.status).toBe(200);
    expect((r.body as { model: string }).model).toBe(GLM);
    const cost = parseDecimal6(r.headers.get("x-svc-cost-usdc") ?? "") ?? -1n;
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before - cost);
    const mid = await confirmedOf(world.app, buyer.accountId);
    const { res, text } = await postStream(buyer.apiKey, "/v1/responses", {
      models: [SONNET, GLM],
      provider: SONNET_OUT_GLM_IN,
      input: "hello",
    });
    expect(res.status).toBe(200);
    const completed = frames(text)
      .map((d) => JSON.parse(d) as { type: string; response?: { model: string }; costUsdc?: string })
      .find((e) => e.type === "response.completed");
    expect(completed?.response?.model).toBe(GLM);
    expect(completed?.costUsdc).toBe(formatDecimal6(mid - (await confirmedOf(world.app, buyer.accountId))));
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("Messages (Anthropic's API): the same fallbacks and price cap", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const res = await fetch(`${world.app.baseUrl}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": buyer.apiKey, "anthropic-version": "2023-06-01", "content-type": "application/json" },
      body: JSON.stringify({
        model: SONNET,
        models: [GLM],
        provider: SONNET_OUT_GLM_IN,
        max_tokens: 64,
        messages: [{ role: "user", content: "hello [[sim:tokens=40]]" }],
      }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { model: string }).model).toBe(GLM);
    const cost = parseDecimal6(res.headers.get("x-svc-cost-usdc") ?? "") ?? -1n;
    expect(cost).toBeGreaterThan(0n);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before - cost);
    const [first, second] = await chatRecords(buyer.accountId);
    expect([first?.model, first?.errorCode, first?.maxPriceCents]).toEqual([SONNET, "no_eligible_supply", 22]);
    expect([second?.model, second?.route, second?.maxPriceCents, second?.costMicroUsdc]).toEqual([
      GLM,
      "messages",
      64,
      cost,
    ]);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("no fall-through: after the first byte, on the buyer's own 4xx, or on a balance refusal", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);

    // content reached the buyer, then the upstream failed: an in-band error, billed on the estimate, no second model
    world.sim.state.injectFault("*", { kind: "midstream_error", model: SONNET, afterChunks: 2 });
    const mid = await postStream(buyer.apiKey, "/v1/chat/completions", {
      model: SONNET,
      models: [GLM],
      messages: MESSAGES,
    });
    expect(mid.res.status).toBe(200);
    expect(frames(mid.text).at(-1)).toContain('"stream_incomplete"');
    expect(frames(mid.text).some((f) => f.includes(`"model":"${GLM}"`))).toBe(false);
    world.sim.state.clearFaults();

    // GLM does not take logprobs: the upstream's 400 is the buyer's, relayed, and qwen3-4b (which would) is not tried
    const bad = await chat(world.app, buyer.apiKey, {
      model: GLM,
      models: ["qwen3-4b"],
      logprobs: true,
      messages: MESSAGES,
    });
    expect(bad.status).toBe(400);
    expect((bad.body as ErrorBody).error.fallbacks).toBeUndefined();
    expect((await chatRecords(buyer.accountId)).map((q) => q.model)).toEqual([SONNET, GLM]);

    // a balance that cannot pay: 402, the next model not tried
    const poor = await fundedBuyerKey(world.app, 0n);
    const broke = await chat(world.app, poor.apiKey, { model: GLM, models: ["qwen3-4b"], messages: MESSAGES });
    expect(broke.status).toBe(402);
    expect((await chatRecords(poor.accountId)).map((q) => q.model)).toEqual([GLM]);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("the last model's error, naming the models passed over", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await chat(world.app, buyer.apiKey, {
      model: "no-such-model",
      models: [SONNET],
      provider: { max_price: { prompt: 0.5 } },
      messages: MESSAGES,
    });
    expect(r.status).toBe(503);
    const error = (r.body as ErrorBody).error;
    expect(error.code).toBe("no_eligible_supply");
    expect(error.model).toBe(SONNET);
    expect(error.fallbacks).toEqual([{ model: "no-such-model", code: "model_not_found" }]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    await expectHoldsReleased(world.app, buyer.accountId);
  });
});

describe("provider.max_price: a ceiling per model", () => {
  test("below every offer: 503 no_eligible_supply with the mapped ceiling in the body; nothing charged, nothing held", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const upstreamCalls = world.sim.state.listRequests({ route: "/chat/completions" }).length;
    // GLM: floor(100 × 0.50 / 1.54) = 32 and floor(100 × 1.5 / 4.84) = 30 → 30, below the offer at 40
    const body = { model: GLM, provider: { max_price: { prompt: 0.5, completion: "1.5" } }, messages: MESSAGES };
    for (const r of [
      await chat(world.app, buyer.apiKey, body),
      await chat(world.app, buyer.apiKey, { ...body, stream: true }),
    ]) {
      expect(r.status).toBe(503);
      expect(r.headers.get("x-svc-error-code")).toBe("no_eligible_supply");
      const error = (r.body as ErrorBody).error;
      expect(error).toMatchObject({
        code: "no_eligible_supply",
        maxPriceCeilingCents: 30,
        buyerMaxCents: 30,
        cheapestPostedCents: 40,
        model: GLM,
      });
      // what would clear at 40: 1.54 × 0.40 and 4.84 × 0.40 USD per 1M tokens
      expect(error.message).toContain('{"prompt": 0.616000, "completion": 1.936000}');
      expect(typeof error.supportReference).toBe("string");
    }
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    expect(world.sim.state.listRequests({ route: "/chat/completions" }).length).toBe(upstreamCalls);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("between two offers: clears at the cheaper only (the dearer is never tried)", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 35, quantityMicroDiem: 50_000_000n },
      { priceCents: 50, quantityMicroDiem: 50_000_000n },
    ]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    // floor(100 × 0.693 / 1.54) = 45: between 35 and 50
    const capped = { model: GLM, provider: { max_price: { prompt: "0.693" }, sort: "price" }, messages: MESSAGES };
    const ok = await chat(world.app, buyer.apiKey, capped);
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-svc-clearing-price-cents")).toBe("35");
    const okRecord = await requestByReference(world.app, ok.headers.get("x-svc-support-reference") ?? "");
    expect(okRecord.maxPriceCents).toBe(45);

    // the cheaper fails: the request may not fall forward to the offer at 50, above its ceiling
    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "http_500" });
    const before = await confirmedOf(world.app, buyer.accountId);
    const callsAt50 = world.sim.state.listRequests({ key: supply.keys[1]?.secret }).length;
    const failed = await chat(world.app, buyer.apiKey, capped);
    expect(failed.status).toBe(502);
    expect((failed.body as ErrorBody).error.code).toBe("upstream_error");
    expect(world.sim.state.listRequests({ key: supply.keys[1]?.secret }).length).toBe(callsAt50);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);

    // without the cap the same request falls forward to 50
    const uncapped = await chat(world.app, buyer.apiKey, { model: GLM, messages: MESSAGES });
    expect(uncapped.headers.get("x-svc-clearing-price-cents")).toBe("50");
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("the lowest ceiling wins: the account's, the key's, svc.maxPriceCentsPerDollar and max_price", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 35, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n, 60);
    // max_price maps GLM to 100 (no bound), svc lowers to 50: recorded 50
    const r = await chat(world.app, buyer.apiKey, {
      model: GLM,
      provider: { max_price: { prompt: 100, completion: 100 } },
      svc: { maxPriceCentsPerDollar: 50 },
      messages: MESSAGES,
    });
    expect(r.status).toBe(200);
    expect((await requestByReference(world.app, r.headers.get("x-svc-support-reference") ?? "")).maxPriceCents).toBe(
      50,
    );
    // max_price maps to 45, below the account's 60: recorded 45
    const s = await chat(world.app, buyer.apiKey, {
      model: GLM,
      provider: { max_price: { prompt: "0.693" } },
      messages: MESSAGES,
    });
    expect((await requestByReference(world.app, s.headers.get("x-svc-support-reference") ?? "")).maxPriceCents).toBe(
      45,
    );
  });
});

describe("provider fields the service cannot honour", () => {
  test.each([
    ["provider.order", { provider: { order: ["openai"] } }],
    ["provider.allow_fallbacks", { provider: { allow_fallbacks: false } }],
    ["provider.sort", { provider: { sort: "throughput" } }],
    ["provider.data_collection", { provider: { data_collection: "deny" } }],
    ["provider.preferred_max_latency", { provider: { preferred_max_latency: 1 } }],
    ["provider.max_price.prompt", { provider: { max_price: { prompt: "cheap" } } }],
  ])("%s: 400 naming it, nothing opened, nothing sent upstream", async (field, extra) => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const upstreamCalls = world.sim.state.listRequests({ route: "/chat/completions" }).length;
    for (const r of [
      await chat(world.app, buyer.apiKey, { model: GLM, messages: MESSAGES, ...extra }),
      await chat(world.app, buyer.apiKey, { model: GLM, messages: MESSAGES, stream: true, ...extra }),
      await responses(world.app, buyer.apiKey, { model: GLM, input: "hello", ...extra }),
    ]) {
      expect(r.status).toBe(400);
      const error = (r.body as ErrorBody).error;
      expect(error.code).toBe("invalid_request");
      expect(error.field).toBe(field);
      expect(String(error.message).startsWith(field)).toBe(true);
    }
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    expect(await chatRecords(buyer.accountId)).toEqual([]);
    expect(world.sim.state.listRequests({ route: "/chat/completions" }).length).toBe(upstreamCalls);
    await expectHoldsReleased(world.app, buyer.accountId);
  });
});
