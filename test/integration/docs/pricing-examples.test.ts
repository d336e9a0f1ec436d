import { beforeAll, describe, expect } from "vitest";
import { loadConfig } from "../../../src/config.js";
import {
  burnMicroDiem,
  computeCharge,
  formatDecimal6,
  type TextPricing,
  type TokenRates,
  videoJobMicroDiem,
} from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { workedExamples } from "../../../testkit/doc-examples.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";

/**
 * pricing.md's worked examples (the ```json blocks after `<!-- worked-example -->`) recomputed with
 * the money module, and, where they name a model of the local catalog at the world's clearing price,
 * compared with what the service really charges for that request.
 */

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
const CLEARING_CENTS = 40;
let apiKey = "";
let examples: { line: number; example: Record<string, unknown> }[] = [];

beforeAll(async () => {
  // the cheapest offer clears every request here: 40 cents
  await addSupply(world.app, world.sim, [
    { priceCents: CLEARING_CENTS, quantityMicroDiem: 100_000_000n },
    { priceCents: 60, quantityMicroDiem: 100_000_000n },
  ]);
  apiKey = (await fundedBuyerKey(world.app, 20_000_000n)).apiKey;
  const doc = await fetch(`${world.app.baseUrl}/pricing.md`);
  examples = workedExamples(await doc.text());
});

const defaults = loadConfig({}, { mode: "local" });
if (!defaults.ok) throw new Error(defaults.errors.join("\n"));
const { platformFeeBps, videoMarkupBps } = defaults.config.fees;

type CatalogRates = {
  input_per_million: number;
  cache_per_million?: number;
  cache_write_per_million?: number;
  output_per_million: number;
};
type TextUsage = {
  prompt_tokens: number;
  cached_tokens: number;
  cache_write_tokens?: number;
  completion_tokens: number;
};
type CatalogTextPricing = CatalogRates & { extended?: CatalogRates & { context_token_threshold: number } };

function rates(p: CatalogRates): TokenRates {
  return {
    inputMicroPerM: BigInt(p.input_per_million),
    cacheMicroPerM: p.cache_per_million === undefined ? null : BigInt(p.cache_per_million),
    cacheWriteMicroPerM: p.cache_write_per_million === undefined ? null : BigInt(p.cache_write_per_million),
    outputMicroPerM: BigInt(p.output_per_million),
  };
}

function textPricing(p: CatalogTextPricing): TextPricing {
  return {
    ...rates(p),
    extended: p.extended ? { ...rates(p.extended), thresholdTokens: p.extended.context_token_threshold } : null,
  };
}

function imageUnit(p: Record<string, unknown>, req: { resolution?: string; quality?: string }): bigint {
  if (typeof p.per_image === "number") return BigInt(p.per_image);
  const resolution = req.resolution ?? String(p.default_resolution);
  if (p.per_image_by_resolution) return BigInt((p.per_image_by_resolution as Record<string, number>)[resolution] ?? -1);
  const byQuality = p.per_image_by_quality as Record<string, Record<string, number>>;
  return BigInt(byQuality[resolution]?.[String(req.quality)] ?? -1);
}

const int = (v: unknown) => BigInt(v as number);

/** A user message whose prompt the simulator counts as `promptTokens`, asking for `completionTokens`. */
function exactPrompt(u: TextUsage): string {
  // simulator: prompt_tokens = 4 + ceil(chars / 4) for one message (src/local/upstream-sim/README.md)
  const directives = `[[sim:tokens=${u.completion_tokens}]][[sim:cached_tokens=${u.cached_tokens}]][[sim:cache_write=${u.cache_write_tokens ?? 0}]]`;
  const promptTokens = u.prompt_tokens;
  return directives.padEnd(4 * (promptTokens - 4), "x");
}

async function post(path: string, body: unknown) {
  const res = await fetch(`${world.app.baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

async function catalogPricing(model: string): Promise<unknown> {
  const row = (await (await fetch(`${world.app.baseUrl}/v1/models/${model}`)).json()) as { pricing?: unknown };
  return row.pricing;
}

describe("pricing.md worked examples", () => {
  test("there are text, image and video examples, and the stated defaults are the configured ones", async () => {
    expect(examples.length).toBeGreaterThanOrEqual(6);
    expect(new Set(examples.map((e) => e.example.example))).toEqual(new Set(["text", "image", "video"]));
    const doc = await (await fetch(`${world.app.baseUrl}/pricing.md`)).text();
    expect(videoMarkupBps).toBe(500);
    expect(doc).toContain(`\`VIDEO_MARKUP_BPS\` (default **${videoMarkupBps}** = ${videoMarkupBps / 100}%)`);
    expect(doc).toContain(`fee = floor(charge × 1 000 / 10 000)\` (${platformFeeBps / 100}%)`);
  });

  test("each example's numbers follow from the money module (burn, charge, fee, supplier share)", () => {
    for (const { line, example: e } of examples) {
      const where = `pricing.md:${line}`;
      let burn: bigint;
      if (e.example === "text") {
        const u = e.usage as TextUsage;
        burn = burnMicroDiem(textPricing(e.pricing as CatalogTextPricing), {
          promptTokens: u.prompt_tokens,
          cachedTokens: u.cached_tokens,
          cacheWriteTokens: u.cache_write_tokens ?? 0,
          completionTokens: u.completion_tokens,
        });
      } else if (e.example === "image") {
        const req = e.request as { resolution?: string; quality?: string; variants: number };
        burn = imageUnit(e.pricing as Record<string, unknown>, req) * BigInt(req.variants);
      } else {
        expect(e.markup_bps, where).toBe(videoMarkupBps);
        burn = videoJobMicroDiem(int(e.upstream_quote_micro_diem), Number(e.markup_bps));
        expect(burn, `${where} quote_micro_diem`).toBe(int(e.quote_micro_diem));
      }
      if (e.example !== "video") expect(burn, `${where} burn_micro_diem`).toBe(int(e.burn_micro_diem));
      const split = computeCharge(burn, Number(e.clearing_price_cents), platformFeeBps);
      expect(split.grossMicroUsdc, `${where} charge_micro_usdc`).toBe(int(e.charge_micro_usdc));
      expect(split.feeMicroUsdc, `${where} fee_micro_usdc`).toBe(int(e.fee_micro_usdc));
      expect(split.supplierMicroUsdc, `${where} supplier_micro_usdc`).toBe(int(e.supplier_micro_usdc));
    }
  });

  test("the rates quoted are the catalog's", async () => {
    const quoting = examples.filter((x) => typeof x.example.model === "string" && x.example.pricing !== undefined);
    expect(quoting.length).toBeGreaterThanOrEqual(3);
    for (const { line, example: e } of quoting) {
      expect(await catalogPricing(String(e.model)), `pricing.md:${line}`).toEqual(e.pricing);
    }
  });

  test("a request with an example's usage costs what the example says", async () => {
    const live = examples.filter((x) => typeof x.example.model === "string" && x.example.clearing_price_cents === 40);
    expect(live.length).toBeGreaterThanOrEqual(4);
    for (const { line, example: e } of live) {
      const where = `pricing.md:${line}`;
      const charge = formatDecimal6(int(e.charge_micro_usdc));
      if (e.example === "text") {
        const u = e.usage as TextUsage;
        const content = exactPrompt(u);
        const r = await post("/v1/chat/completions", { model: e.model, messages: [{ role: "user", content }] });
        expect(r.status, where).toBe(200);
        expect(r.body.usage, where).toMatchObject({
          prompt_tokens: u.prompt_tokens,
          completion_tokens: u.completion_tokens,
          prompt_tokens_details: {
            cached_tokens: u.cached_tokens,
            cache_creation_input_tokens: u.cache_write_tokens ?? 0,
          },
        });
        expect(r.headers.get("x-svc-cost-usdc"), where).toBe(charge);
        expect(r.headers.get("x-svc-clearing-price-cents"), where).toBe(String(CLEARING_CENTS));
        const ref = r.headers.get("x-svc-support-reference") ?? "";
        const lookup = await fetch(`${world.app.baseUrl}/v1/agent/requests/${ref}`, {
          headers: { authorization: `Bearer ${apiKey}` },
        });
        expect(await lookup.json(), where).toMatchObject({
          burnDiem: formatDecimal6(int(e.burn_micro_diem)),
          costUsdc: charge,
        });
      } else if (e.example === "image") {
        const req = e.request as Record<string, unknown>;
        const r = await post("/v1/image/generate", { model: e.model, prompt: "a harbour at dawn", ...req });
        expect(r.status, where).toBe(200);
        expect(r.headers.get("x-svc-cost-usdc"), where).toBe(charge);
      } else {
        const req = e.request as Record<string, unknown>;
        const r = await post("/v1/video/quote", { model: e.model, prompt: "a fox in the snow", ...req });
        expect(r.status, where).toBe(200);
        expect(r.body, where).toMatchObject({
          quote_diem: formatDecimal6(int(e.quote_micro_diem)),
          estimated_usdc: charge,
          svc: {
            upstream_quote_diem: formatDecimal6(int(e.upstream_quote_micro_diem)),
            markup_bps: e.markup_bps,
            clearing_price_cents: CLEARING_CENTS,
          },
        });
      }
    }
  });
});
