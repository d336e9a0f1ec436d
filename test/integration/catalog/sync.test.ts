import { describe, expect } from "vitest";
import { UpstreamClient } from "../../../src/adapters/upstream/client.js";
import { textPricingOf } from "../../../src/domain/catalog/catalog-pricing.js";
import { CatalogService } from "../../../src/domain/catalog/catalog-service.js";
import { systemClock } from "../../../src/lib/clock.js";
import { burnMicroDiem } from "../../../src/lib/money.js";
import { SecretBox } from "../../../src/lib/secret-box.js";
import {
  DEFAULT_SIM_MODELS,
  type SimModel,
  startUpstreamSimulator,
  textPricingToMicro,
} from "../../../src/local/upstream-sim/index.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { getJson, type PublicRow } from "../../../testkit/catalog.js";

const SYNC_KEY = "VENICE_INFERENCE_KEY_catalog";

test.override("appOptions", { sim: {}, catalogSyncKey: SYNC_KEY });
const world = fileWorld(test);

const textModels = DEFAULT_SIM_MODELS.filter((m) => m.type === "text");
const simModel = (id: string): SimModel => {
  const m = DEFAULT_SIM_MODELS.find((x) => x.id === id);
  if (!m) throw new Error(`no sim model ${id}`);
  return m;
};

async function publicRow(id: string): Promise<PublicRow> {
  const r = await getJson<PublicRow>(world.app.baseUrl, `/v1/models/${id}`);
  expect(r.status, id).toBe(200);
  return r.body;
}

/** A catalog service reading another simulator (same database, same config otherwise). */
function serviceFor(upstreamBaseUrl: string, overrides: { catalogSyncKey?: string | undefined } = {}) {
  const config = {
    ...world.app.rt.config,
    upstream: { ...world.app.rt.config.upstream, baseUrl: upstreamBaseUrl, ...overrides },
  };
  return new CatalogService({
    db: world.app.rt.db,
    config,
    clock: systemClock,
    upstream: new UpstreamClient({ baseUrl: upstreamBaseUrl }),
    secrets: new SecretBox(world.app.rt.config.secrets.keyEncryptionKey),
  });
}

describe("catalog sync against the simulator", () => {
  test("first sync writes one row per upstream model; live vs coming_soon per row kind", async () => {
    const r = await world.app.rt.services.catalog.sync();
    expect(r).toEqual({ upserted: DEFAULT_SIM_MODELS.length, unlisted: 0, live: 16, comingSoon: 2 });

    const rows = await world.app.rt.db.catalogModel.findMany();
    expect(rows.map((x) => x.id).sort()).toEqual(DEFAULT_SIM_MODELS.map((m) => m.id).sort());
    const status = Object.fromEntries(rows.map((x) => [x.id, x.status]));
    // the text row without pricing, and the offline row, are listed but not callable
    expect(status["llama-3.2-3b"]).toBe("coming_soon");
    expect(status["deepseek-r1-671b"]).toBe("coming_soon");
    expect(rows.find((x) => x.id === "deepseek-r1-671b")?.offline).toBe(true);
    // betaModel (callable by all, unstable) is live and flagged
    expect(status["kimi-k2-5"]).toBe("live");
    expect(rows.find((x) => x.id === "kimi-k2-5")?.beta).toBe(true);
    for (const id of ["zai-org-glm-5-1", "gemini-3-1-pro-preview", "qwen3-4b", "llama-3.1-405b"]) {
      expect(status[id], id).toBe("live");
    }
    for (const id of ["venice-sd35", "nano-banana-pro", "gpt-image-2"]) expect(status[id], id).toBe("live");
    for (const m of DEFAULT_SIM_MODELS.filter((x) => x.type === "video")) expect(status[m.id], m.id).toBe("live");
  });

  test("integer rates equal the simulator's published prices exactly (diem per 1M → micro-DIEM)", async () => {
    const glm = await world.app.rt.db.catalogModel.findUniqueOrThrow({ where: { id: "zai-org-glm-5-1" } });
    expect(glm.inputMicroPerM).toBe(1_540_000n);
    expect(glm.outputMicroPerM).toBe(4_840_000n);
    expect(glm.cacheMicroPerM).toBe(286_000n);
    expect(glm.maxCompletionTokens).toBe(24_000);
    expect(glm.contextTokens).toBe(200_000);

    // every priced text row, against the simulator's own converter
    for (const m of textModels) {
      if (m.type !== "text" || !m.model_spec.pricing) continue;
      const sim = textPricingToMicro(m.model_spec.pricing);
      const row = await world.app.rt.db.catalogModel.findUniqueOrThrow({ where: { id: m.id } });
      expect(row.inputMicroPerM, m.id).toBe(sim.base.inputMicro);
      expect(row.outputMicroPerM, m.id).toBe(sim.base.outputMicro);
      expect(row.cacheMicroPerM, m.id).toBe(m.model_spec.pricing.cache_input ? sim.base.cacheInputMicro : null);
      expect(row.cacheWriteMicroPerM, m.id).toBe(m.model_spec.pricing.cache_write ? sim.base.cacheWriteMicro : null);
    }
    const sonnet = await world.app.rt.db.catalogModel.findUniqueOrThrow({ where: { id: "claude-sonnet-4-6" } });
    expect([sonnet.inputMicroPerM, sonnet.cacheWriteMicroPerM]).toEqual([3_600_000n, 4_500_000n]);
  });

  test("the extended long-context tier is stored and metered for the whole request", async () => {
    const row = await world.app.rt.services.catalog.getModel("gemini-3-1-pro-preview");
    expect(row.extendedPricing).toEqual({
      thresholdTokens: 200_000,
      inputMicroPerM: 5_000_000n,
      outputMicroPerM: 22_500_000n,
      cacheMicroPerM: 1_000_000n,
      cacheWriteMicroPerM: 1_000_000n,
    });
    const pricing = textPricingOf(row);
    expect(pricing).toEqual({
      inputMicroPerM: 2_500_000n,
      outputMicroPerM: 15_000_000n,
      cacheMicroPerM: 500_000n,
      cacheWriteMicroPerM: 500_000n,
      extended: {
        thresholdTokens: 200_000,
        inputMicroPerM: 5_000_000n,
        outputMicroPerM: 22_500_000n,
        cacheMicroPerM: 1_000_000n,
        cacheWriteMicroPerM: 1_000_000n,
      },
    });
    // at the threshold: base rates; one token above: extended rates for the whole request
    expect(burnMicroDiem(pricing, { promptTokens: 200_000, completionTokens: 1000 })).toBe(515_000n);
    expect(burnMicroDiem(pricing, { promptTokens: 200_001, completionTokens: 1000 })).toBe(1_022_505n);
    const glm = await world.app.rt.services.catalog.getModel("zai-org-glm-5-1");
    expect(glm.extendedPricing).toBeNull();
  });

  test("tier heuristic: cheap or ≤10B text models are small, the rest frontier", async () => {
    const rows = await world.app.rt.db.catalogModel.findMany({ select: { id: true, tier: true } });
    const small = rows
      .filter((r) => r.tier === "small")
      .map((r) => r.id)
      .sort();
    expect(small).toEqual(["llama-3.2-3b", "qwen3-4b"]);
  });

  test("public text pricing is integer micro-USDC per million tokens; coming_soon rows carry none", async () => {
    expect((await publicRow("zai-org-glm-5-1")).pricing).toEqual({
      input_per_million: 1_540_000,
      output_per_million: 4_840_000,
      cache_per_million: 286_000,
      cache_write_per_million: 1_540_000,
    });
    // no cache price published: cache reads and writes bill at the input rate, so that is what is shown
    expect((await publicRow("qwen3-4b")).pricing).toEqual({
      input_per_million: 50_000,
      output_per_million: 150_000,
      cache_per_million: 50_000,
      cache_write_per_million: 50_000,
    });
    expect((await publicRow("claude-sonnet-4-6")).pricing).toEqual({
      input_per_million: 3_600_000,
      output_per_million: 18_000_000,
      cache_per_million: 360_000,
      cache_write_per_million: 4_500_000,
    });
    expect((await publicRow("gemini-3-1-pro-preview")).pricing).toEqual({
      input_per_million: 2_500_000,
      output_per_million: 15_000_000,
      cache_per_million: 500_000,
      cache_write_per_million: 500_000,
      extended: {
        context_token_threshold: 200_000,
        input_per_million: 5_000_000,
        output_per_million: 22_500_000,
        cache_per_million: 1_000_000,
        cache_write_per_million: 1_000_000,
      },
    });
    const unpriced = await publicRow("llama-3.2-3b");
    expect(unpriced.status).toBe("coming_soon");
    expect("pricing" in unpriced).toBe(false);
    const offline = await publicRow("deepseek-r1-671b");
    expect(offline.status).toBe("coming_soon");
    expect("pricing" in offline).toBe(false);
    // text rows carry no constraints
    expect("constraints" in (await publicRow("zai-org-glm-5-1"))).toBe(false);
  });

  test("image rows: structured per-image pricing in micro-USDC; constraints exactly as published", async () => {
    const flat = await publicRow("venice-sd35");
    expect(flat.pricing).toEqual({ per_image: 10_000 });
    const sd35 = simModel("venice-sd35");
    expect(flat.constraints).toEqual(sd35.model_spec.constraints);
    // keys the upstream omits are absent
    expect(flat.constraints && "aspectRatios" in flat.constraints).toBe(false);
    expect(flat.constraints && "resolutions" in flat.constraints).toBe(false);

    const tiered = await publicRow("nano-banana-pro");
    expect(tiered.pricing).toEqual({
      per_image_by_resolution: { "1K": 180_000, "2K": 230_000, "4K": 350_000 },
      default_resolution: "1K",
    });
    expect(tiered.constraints).toEqual(simModel("nano-banana-pro").model_spec.constraints);
    expect(tiered.constraints && "qualities" in tiered.constraints).toBe(false);

    const quality = await publicRow("gpt-image-2");
    expect(quality.pricing).toEqual({
      per_image_by_quality: {
        "1K": { low: 20_000, medium: 70_000, high: 260_000 },
        "2K": { low: 40_000, medium: 140_000, high: 520_000 },
        "4K": { low: 70_000, medium: 230_000, high: 830_000 },
      },
      default_resolution: "1K",
      default_quality: "high",
    });
    expect(quality.constraints).toEqual(simModel("gpt-image-2").model_spec.constraints);
    expect(quality.capabilities).not.toHaveProperty("supportsWebSearch");
  });

  test("video rows: snake_case constraints passed through, model_type derived to our four values", async () => {
    const expected: Record<string, string> = {
      "wan-2.6-text-to-video": "text-to-video",
      "kling-2.6-pro-image-to-video": "image-to-video",
      "vidu-q2-reference-to-video": "reference-to-video",
      "kling-o1-video-to-video": "video-to-video",
      "grok-imagine-text-to-video-private": "text-to-video",
    };
    for (const [id, modelType] of Object.entries(expected)) {
      const row = await publicRow(id);
      expect(row.modality).toBe("video");
      expect(row.status).toBe("live");
      expect(row.pricing).toEqual({ type: "per_job_quote", quote_endpoint: "/v1/video/quote" });
      const published = simModel(id).model_spec.constraints as unknown as Record<string, unknown>;
      expect(row.constraints).toEqual({ ...published, model_type: modelType });
      expect(Object.keys(row.constraints ?? {}).sort()).toEqual(Object.keys(published).sort());
    }
    // optional keys only where published
    expect((await publicRow("vidu-q2-reference-to-video")).constraints).toHaveProperty("prompt_character_limit", 1500);
    expect((await publicRow("wan-2.6-text-to-video")).constraints).not.toHaveProperty("prompt_character_limit");
    expect((await publicRow("kling-2.6-pro-image-to-video")).constraints).toHaveProperty("aspect_ratios", []);
  });

  test("a second sync is idempotent: same rows, nothing unlisted", async () => {
    const strip = (rows: Record<string, unknown>[]) => rows.map(({ syncedAt: _s, ...rest }) => rest);
    const before = await world.app.rt.db.catalogModel.findMany({ orderBy: { id: "asc" } });
    const r = await world.app.rt.services.catalog.sync();
    expect(r).toEqual({ upserted: DEFAULT_SIM_MODELS.length, unlisted: 0, live: 16, comingSoon: 2 });
    const after = await world.app.rt.db.catalogModel.findMany({ orderBy: { id: "asc" } });
    expect(strip(after)).toEqual(strip(before));
  });

  test("models the upstream stops listing are unlisted (404), and come back when listed again", async () => {
    const gone = new Set(["zai-org-glm-5-1", "wan-2.6-text-to-video", "gpt-image-2"]);
    const smaller = await startUpstreamSimulator({
      keys: [{ key: SYNC_KEY, diemMicro: 0n }],
      models: DEFAULT_SIM_MODELS.filter((m) => !gone.has(m.id)),
    });
    try {
      // an operator's disabled flag survives syncs
      await world.app.rt.db.catalogModel.update({ where: { id: "qwen3-4b" }, data: { disabled: true } });
      const r = await serviceFor(smaller.baseUrl).sync();
      expect(r.upserted).toBe(DEFAULT_SIM_MODELS.length - gone.size);
      expect(r.unlisted).toBe(gone.size);
      for (const id of gone) {
        const res = await getJson<{ error: { code: string } }>(world.app.baseUrl, `/v1/models/${id}`);
        expect(res.status, id).toBe(404);
        expect(res.body.error.code).toBe("model_not_found");
      }
      const list = await getJson<{ data: PublicRow[] }>(world.app.baseUrl, "/v1/models");
      const ids = list.body.data.map((m) => m.id);
      for (const id of gone) expect(ids).not.toContain(id);
      expect(ids).not.toContain("qwen3-4b");
      // unlisting is idempotent too
      expect((await serviceFor(smaller.baseUrl).sync()).unlisted).toBe(0);
    } finally {
      await smaller.close();
    }
    const back = await world.app.rt.services.catalog.sync();
    expect(back.unlisted).toBe(0);
    expect((await publicRow("zai-org-glm-5-1")).status).toBe("live");
    const qwen = await world.app.rt.db.catalogModel.findUniqueOrThrow({ where: { id: "qwen3-4b" } });
    expect(qwen.disabled).toBe(true);
    await world.app.rt.db.catalogModel.update({ where: { id: "qwen3-4b" }, data: { disabled: false } });
  });

  test("a model moves from coming_soon to live when the upstream publishes its price", async () => {
    const priced = DEFAULT_SIM_MODELS.map((m) =>
      m.id === "llama-3.2-3b" && m.type === "text"
        ? {
            ...m,
            model_spec: {
              ...m.model_spec,
              pricing: { input: { usd: 0.02, diem: 0.02 }, output: { usd: 0.04, diem: 0.04 } },
            },
          }
        : m,
    );
    const other = await startUpstreamSimulator({ keys: [{ key: SYNC_KEY, diemMicro: 0n }], models: priced });
    try {
      await serviceFor(other.baseUrl).sync();
      const row = await publicRow("llama-3.2-3b");
      expect(row.status).toBe("live");
      expect(row.pricing).toEqual({
        input_per_million: 20_000,
        output_per_million: 40_000,
        cache_per_million: 20_000,
        cache_write_per_million: 20_000,
      });
    } finally {
      await other.close();
    }
    await world.app.rt.services.catalog.sync();
    expect((await publicRow("llama-3.2-3b")).status).toBe("coming_soon");
  });

  test("an unreadable upstream list writes nothing (no mass unlisting)", async () => {
    const before = await world.app.rt.db.catalogModel.count({ where: { listed: true } });
    const dead = serviceFor("http://127.0.0.1:9/api/v1");
    await expect(dead.sync()).rejects.toMatchObject({ code: "upstream_error" });
    const wrongKey = serviceFor(world.sim.baseUrl, { catalogSyncKey: "not-a-registered-key" });
    await expect(wrongKey.sync()).rejects.toMatchObject({ code: "upstream_error" });
    expect(await world.app.rt.db.catalogModel.count({ where: { listed: true } })).toBe(before);
  });
});
