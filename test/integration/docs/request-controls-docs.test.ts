import { beforeAll, describe, expect } from "vitest";
import { maxPriceCeilingCents } from "../../../src/domain/inference/pipeline/request-controls.js";
import { exactDecimal } from "../../../src/lib/decimal.js";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { says } from "../../../testkit/doc-examples.js";
import { addSupply, chat, confirmedOf, fundedBuyerKey, requestByReference } from "../../../testkit/market.js";

/**
 * What the served documents say about OpenRouter's request controls ("OpenRouter-style fallbacks and
 * price caps" in SKILL.md and llms.txt, "A price cap in USD per million tokens" in pricing.md), each
 * statement checked against the running service: the document must say it, the service must do it.
 */

const GLM = "zai-org-glm-5-1";
const SONNET = "claude-sonnet-4-6";
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
const docs: Record<string, string> = {};

beforeAll(async () => {
  await addSupply(world.app, world.sim, [
    { priceCents: 40, quantityMicroDiem: 200_000_000n },
    { priceCents: 55, quantityMicroDiem: 100_000_000n },
    { priceCents: 70, quantityMicroDiem: 100_000_000n },
  ]);
  world.app.rt.services.inference.invalidateBook();
  for (const path of ["/SKILL.md", "/llms.txt", "/pricing.md"]) {
    docs[path] = await (await fetch(`${world.app.baseUrl}${path}`)).text();
  }
});

const MESSAGES = [{ role: "user", content: "Say hi" }];
const CAP = { prompt: 0.7, completion: 2.42 };
type ErrorBody = { error: Record<string, unknown> & { code: string } };

describe("OpenRouter-style fallbacks and price caps", () => {
  test("every document has the section", () => {
    says(docs, "/SKILL.md", "## 11. OpenRouter-style fallbacks and price caps");
    says(docs, "/llms.txt", "## OpenRouter-style fallbacks and price caps");
    says(docs, "/pricing.md", "## A price cap in USD per million tokens");
  });

  test("the worked example: the catalog's rates, the mapping, the ceiling the request is cleared and recorded at", async () => {
    says(
      docs,
      "/SKILL.md",
      '`zai-org-glm-5-1` has the rates 1.54 (input) and 4.84 (output) USD per million tokens. With `"max_price": {"prompt": 0.70, "completion": 2.42}`, the prompt bound gives 100 × 0.70 / 1.54 = 45.45… → 45 and the completion bound 100 × 2.42 / 4.84 = 50, so the ceiling is 45 cents per dollar.',
    );
    says(docs, "/SKILL.md", "On an offer at 40 you pay 1.54 × 0.40 = 0.616 USD per million prompt tokens");
    says(docs, "/llms.txt", '`{"prompt": 0.70, "completion": 2.42}` is a ceiling of 45 cents');
    says(docs, "/pricing.md", '`{"prompt": 0.70, "completion": 2.42}` maps to min(45, 50) = 45 cents');
    says(
      docs,
      "/pricing.md",
      "`ceiling = min(floor(100 × prompt ÷ input rate), floor(100 × completion ÷ output rate))`",
    );
    // the rates the documents quote are the catalog's (micro-USDC per 1M tokens at face value)
    for (const [id, input, output] of [
      [GLM, 1_540_000, 4_840_000],
      [SONNET, 3_600_000, 18_000_000],
    ] as const) {
      const row = (await call(world.app, { method: "GET", path: `/v1/models/${id}` })).body as {
        pricing: { input_per_million: number; output_per_million: number };
      };
      expect([row.pricing.input_per_million, row.pricing.output_per_million]).toEqual([input, output]);
    }
    const glm = { inputMicroPerM: 1_540_000n, outputMicroPerM: 4_840_000n };
    const price = (p: number, c: number) => ({ prompt: exactDecimal(p) ?? null, completion: exactDecimal(c) ?? null });
    expect(maxPriceCeilingCents(price(0.7, 2.42), glm)).toBe(45);

    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await chat(world.app, buyer.apiKey, { model: GLM, provider: { max_price: CAP }, messages: MESSAGES });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-svc-clearing-price-cents")).toBe("40");
    const record = await requestByReference(world.app, r.headers.get("x-svc-support-reference") ?? "");
    expect(record.maxPriceCents).toBe(45);
  });

  test("the fallback example: claude-sonnet-4-6 maps to 13, below every offer; zai-org-glm-5-1 answers", async () => {
    says(
      docs,
      "/SKILL.md",
      "Here `claude-sonnet-4-6` (3.6 and 18 USD per million tokens) maps to a ceiling of 13 cents (100 × 2.42 / 18 = 13.4…), below every offer, so `zai-org-glm-5-1` answers at 45 or less.",
    );
    says(docs, "/SKILL.md", "The answer's `model` names the model that answered, and you pay at its rates.");
    says(docs, "/SKILL.md", '`usage: {"include": true}` is accepted (usage, with its cost, is always sent)');
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await chat(world.app, buyer.apiKey, {
      model: SONNET,
      models: [GLM],
      provider: { max_price: CAP, sort: "price" },
      usage: { include: true },
      messages: MESSAGES,
    });
    expect(r.status).toBe(200);
    const body = r.body as { model: string; usage: { cost: number } };
    expect(body.model).toBe(GLM);
    expect(body.usage.cost.toFixed(6)).toBe(r.headers.get("x-svc-cost-usdc"));
    expect(formatDecimal6(before - (await confirmedOf(world.app, buyer.accountId)))).toBe(
      r.headers.get("x-svc-cost-usdc"),
    );
    const records = await world.app.rt.db.inferenceRequest.findMany({
      where: { accountId: buyer.accountId },
      orderBy: { startedAt: "asc" },
    });
    expect(records.map((q) => [q.model, q.errorCode, q.maxPriceCents])).toEqual([
      [SONNET, "no_eligible_supply", 13],
      [GLM, null, 45],
    ]);
  });

  test("below every offer for every model: 503 no_eligible_supply with maxPriceCeilingCents; the last model's error names those passed over", async () => {
    says(
      docs,
      "/SKILL.md",
      "the answer is 503 `no_eligible_supply` with `maxPriceCeilingCents` (what `max_price` mapped to), `buyerMaxCents`, `cheapestPostedCents` and `model`, and a message saying which `max_price` would clear",
    );
    says(
      docs,
      "/SKILL.md",
      "When no model answers, the error is the last model's, with `fallbacks` listing the models passed over",
    );
    says(docs, "/llms.txt", "Below every offer: 503 `no_eligible_supply` with `maxPriceCeilingCents`.");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await chat(world.app, buyer.apiKey, {
      models: [SONNET, GLM],
      provider: { max_price: { prompt: "0.5", completion: "1.5" } },
      messages: MESSAGES,
    });
    expect(r.status).toBe(503);
    const error = (r.body as ErrorBody).error;
    // GLM: min(floor(100 × 0.5 / 1.54), floor(100 × 1.5 / 4.84)) = min(32, 30) = 30
    expect(error).toMatchObject({
      code: "no_eligible_supply",
      model: GLM,
      maxPriceCeilingCents: 30,
      buyerMaxCents: 30,
      cheapestPostedCents: 40,
    });
    expect(error.message).toContain("provider.max_price");
    expect(error.fallbacks).toEqual([
      { model: SONNET, code: "no_eligible_supply", supportReference: expect.any(String) },
    ]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
  });

  test("the bounds and the provider fields the router cannot honour: 400 naming the field, nothing happens", async () => {
    says(docs, "/SKILL.md", "at most 5 distinct models in all (400 `invalid_request` naming `models` beyond)");
    says(
      docs,
      "/SKILL.md",
      "is 400 `invalid_request` naming the field (`error.field`, e.g. `provider.order`), and nothing happens.",
    );
    says(docs, "/llms.txt", "is 400 `invalid_request` naming it (`error.field`, e.g. `provider.order`)");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    for (const [extra, field] of [
      [{ provider: { order: ["openai"] } }, "provider.order"],
      [{ provider: { sort: "throughput" } }, "provider.sort"],
      [{ models: ["a", "b", "c", "d", "e"] }, "models"],
    ] as const) {
      const r = await chat(world.app, buyer.apiKey, { model: GLM, messages: MESSAGES, ...extra });
      expect(r.status).toBe(400);
      expect((r.body as ErrorBody).error).toMatchObject({ code: "invalid_request", field });
    }
    // accepted with the value that asks for what the router does anyway
    says(docs, "/SKILL.md", '`allow_fallbacks: true`, `require_parameters: false`, `data_collection: "allow"`');
    const ok = await chat(world.app, buyer.apiKey, {
      model: GLM,
      provider: { allow_fallbacks: true, require_parameters: false, data_collection: "allow", order: [] },
      route: "fallback",
      messages: MESSAGES,
    });
    expect(ok.status).toBe(200);
    expect(await world.app.rt.db.inferenceRequest.count({ where: { accountId: buyer.accountId } })).toBe(1);
    expect(await confirmedOf(world.app, buyer.accountId)).toBeLessThan(before);
  });
});
