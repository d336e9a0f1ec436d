import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { DEFAULT_SIM_MODELS, type UpstreamSimulator } from "../../../src/local/upstream-sim/index.js";
import { get, post, startSim, userMessage } from "../../../testkit/upstream-sim.js";

interface ModelRow {
  id: string;
  object: string;
  owned_by: string;
  type: string;
  model_spec: Record<string, unknown> & {
    pricing?: Record<string, unknown>;
    constraints?: Record<string, unknown>;
    offline?: boolean;
    betaModel?: boolean;
  };
}

interface ModelList {
  object: string;
  type: string;
  data: ModelRow[];
}

let sim: UpstreamSimulator;
const NOW = new Date("2026-08-18T15:30:00.000Z");

beforeEach(async () => {
  sim = await startSim(
    [
      { key: "k1", diemMicro: 30_847_100n, usdMicro: 2_500_000n },
      { key: "revoked", diemMicro: 1_000_000n, revoked: true },
      { key: "capped", diemMicro: 30_000_000n, diemCapMicro: 5_000_000n },
      { key: "empty", diemMicro: 0n },
    ],
    () => NOW,
  );
});

afterEach(async () => {
  await sim.close();
});

describe("auth", () => {
  test("no Authorization → 402 x402 discovery body", async () => {
    const res = await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("hi") }, null);
    expect(res.status).toBe(402);
    const body = (await res.json()) as {
      x402Version: number;
      accepts: unknown[];
      resource: { url: string };
      authOptions: object;
    };
    expect(body.x402Version).toBe(2);
    expect(body.accepts.length).toBeGreaterThan(0);
    expect(body.resource.url).toMatch(/\/api\/v1\/chat\/completions$/);
    expect(body.authOptions).toHaveProperty("apiKey");
    expect(res.headers.get("payment-required")).toBeTruthy();
  });

  test("unknown and revoked keys → 401 Authentication failed", async () => {
    for (const key of ["nope", "revoked"]) {
      const res = await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("hi") }, key);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "Authentication failed" });
    }
    const rl = await get(sim, "/api_keys/rate_limits", "revoked");
    expect(rl.status).toBe(401);
  });

  test("admin-only routes → 401 Admin API key required for an inference key", async () => {
    for (const path of [
      "/api_keys",
      "/api_keys/abc",
      "/api_keys/rate_limits/log",
      "/billing/balance",
      "/billing/usage-history",
    ]) {
      const res = await get(sim, path);
      expect(res.status, path).toBe(401);
      expect(await res.json()).toEqual({ error: "Admin API key required" });
    }
  });

  test("unknown path → 404, wrong method → 405", async () => {
    expect((await get(sim, "/nothing-here")).status).toBe(404);
    expect((await get(sim, "/chat/completions")).status).toBe(405);
  });
});

describe("GET /models", () => {
  test("text rows: pricing per 1M tokens with diem == usd, context and completion caps", async () => {
    const res = await get(sim, "/models?type=text");
    expect(res.status).toBe(200);
    const list = (await res.json()) as ModelList;
    expect(list.object).toBe("list");
    expect(list.type).toBe("text");
    expect(list.data.every((m) => m.type === "text" && m.object === "model" && m.owned_by === "venice.ai")).toBe(true);
    const glm = list.data.find((m) => m.id === "zai-org-glm-5-1");
    expect(glm?.model_spec).toMatchObject({
      availableContextTokens: 200000,
      maxCompletionTokens: 24000,
      pricing: {
        input: { usd: 1.54, diem: 1.54 },
        cache_input: { usd: 0.286, diem: 0.286 },
        output: { usd: 4.84, diem: 4.84 },
      },
    });
    expect(glm?.model_spec.capabilities).toHaveProperty("supportsFunctionCalling", true);
    expect(glm?.model_spec.constraints).toHaveProperty("temperature");
    const extended = list.data.find((m) => m.model_spec.pricing && "extended" in m.model_spec.pricing);
    expect(extended?.id).toBe("gemini-3-1-pro-preview");
    expect(extended?.model_spec.pricing?.extended).toMatchObject({ context_token_threshold: 200000 });
    expect(list.data.some((m) => m.model_spec.offline === true)).toBe(true);
    expect(list.data.some((m) => m.model_spec.betaModel === true)).toBe(true);
    expect(list.data.some((m) => m.model_spec.pricing === undefined)).toBe(true);
  });

  test("image rows: flat, resolution-tiered and quality-matrix pricing, camelCase constraints", async () => {
    const list = (await (await get(sim, "/models?type=image")).json()) as ModelList;
    expect(list.type).toBe("image");
    const byId = new Map(list.data.map((m) => [m.id, m]));
    expect(byId.get("venice-sd35")?.model_spec.pricing).toMatchObject({ generation: { usd: 0.01, diem: 0.01 } });
    expect(byId.get("nano-banana-pro")?.model_spec.pricing).toMatchObject({ resolutions: { "2K": { usd: 0.23 } } });
    expect(byId.get("gpt-image-2")?.model_spec.pricing).toHaveProperty("quality");
    expect(byId.get("gpt-image-2")?.model_spec.constraints).toMatchObject({ qualities: ["low", "medium", "high"] });
    for (const m of list.data) {
      expect(m.model_spec.constraints).toHaveProperty("promptCharacterLimit");
      expect(m.model_spec.constraints).toHaveProperty("widthHeightDivisor");
      expect(m.model_spec.pricing).toHaveProperty("upscale");
    }
  });

  test("video rows: snake_case constraints, no pricing, upstream model_type values only", async () => {
    const list = (await (await get(sim, "/models?type=video")).json()) as ModelList;
    expect(list.data.length).toBeGreaterThanOrEqual(4);
    for (const m of list.data) {
      expect(m.model_spec).not.toHaveProperty("pricing");
      expect(m.model_spec.constraints).toHaveProperty("aspect_ratios");
      expect(["text-to-video", "image-to-video", "video"]).toContain(m.model_spec.constraints?.model_type);
    }
    const byId = new Map(list.data.map((m) => [m.id, m]));
    expect(byId.get("vidu-q2-reference-to-video")?.model_spec.constraints?.model_type).toBe("image-to-video");
    expect(byId.get("kling-o1-video-to-video")?.model_spec.constraints).toMatchObject({
      model_type: "video",
      video_input: true,
    });
    expect(byId.get("kling-2.6-pro-image-to-video")?.model_spec.constraints).toMatchObject({ aspect_ratios: [] });
  });

  test("all / code / no key / unknown type", async () => {
    const all = (await (await get(sim, "/models?type=all", null)).json()) as ModelList;
    expect(all.data).toHaveLength(DEFAULT_SIM_MODELS.length);
    const code = (await (await get(sim, "/models?type=code")).json()) as ModelList;
    expect(code.data.map((m) => m.id)).toEqual(["qwen3-coder-480b-a35b-instruct"]);
    const bad = await get(sim, "/models?type=banana");
    expect(bad.status).toBe(400);
    const body = (await bad.json()) as { error: string; issues: unknown[] };
    expect(body.error).toBe("Invalid request parameters");
    expect(body.issues).toHaveLength(1);
    expect((await get(sim, "/models?type=text", "nope")).status).toBe(401);
  });
});

describe("GET /api_keys/rate_limits", () => {
  test("describes the calling key", async () => {
    const res = await get(sim, "/api_keys/rate_limits");
    expect(res.status).toBe(200);
    const { data } = (await res.json()) as {
      data: {
        accessPermitted: boolean;
        apiTier: unknown;
        balances: { USD: number; DIEM: number };
        keyExpiration: null;
        nextEpochBegins: string;
        rateLimits: { apiModelId: string; rateLimits: { type: string; amount: number }[] }[];
      };
    };
    expect(data.accessPermitted).toBe(true);
    expect(data.apiTier).toEqual({ id: "paid", isCharged: true });
    expect(data.balances).toMatchObject({ USD: 2.5, DIEM: 30.8471 });
    expect(data.keyExpiration).toBeNull();
    expect(data.nextEpochBegins).toBe("2026-08-19T00:00:00.000Z");
    const glm = data.rateLimits.find((r) => r.apiModelId === "zai-org-glm-5-1");
    expect(glm?.rateLimits.map((r) => r.type)).toEqual(["RPM", "TPM"]);
    expect(data.rateLimits.find((r) => r.apiModelId === "wan-2.6-text-to-video")?.rateLimits).toEqual([]);
  });

  test("DIEM is clamped by the key's cap; exhausted keys are not permitted", async () => {
    const capped = (await (await get(sim, "/api_keys/rate_limits", "capped")).json()) as {
      data: { balances: { DIEM: number }; accessPermitted: boolean };
    };
    expect(capped.data.balances.DIEM).toBe(5);
    sim.state.setBalance("capped", { spentDiemEpochMicro: 5_000_000n });
    const reached = (await (await get(sim, "/api_keys/rate_limits", "capped")).json()) as typeof capped;
    expect(reached.data).toMatchObject({ balances: { DIEM: 0 }, accessPermitted: false });
    const empty = (await (await get(sim, "/api_keys/rate_limits", "empty")).json()) as typeof capped;
    expect(empty.data.accessPermitted).toBe(false);
  });
});
