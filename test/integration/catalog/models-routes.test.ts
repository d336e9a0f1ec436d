import { describe, expect } from "vitest";
import { DEFAULT_SIM_MODELS } from "../../../src/local/upstream-sim/index.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { getJson, gql, type PublicRow } from "../../../testkit/catalog.js";

const SYNC_KEY = "VENICE_INFERENCE_KEY_catalog";

const ROW_KEYS = new Set([
  "id",
  "object",
  "status",
  "modality",
  "capabilities",
  "pricing",
  "constraints",
  "name",
  "tier",
  "created",
  "regionRestrictions",
]);

test.override("appOptions", { sim: {}, catalogSyncKey: SYNC_KEY, syncCatalog: true });
const world = fileWorld(test);

describe("GET /v1/models (public)", () => {
  test("lists every listed row, live and coming_soon, in the public row shape", async () => {
    const r = await getJson<{ object: string; data: PublicRow[] }>(world.app.baseUrl, "/v1/models");
    expect(r.status).toBe(200);
    expect(r.body.object).toBe("list");
    expect(r.body.data.map((m) => m.id).sort()).toEqual(DEFAULT_SIM_MODELS.map((m) => m.id).sort());
    for (const row of r.body.data) {
      expect(row.object).toBe("model");
      for (const k of Object.keys(row)) expect(ROW_KEYS.has(k), `${row.id}.${k}`).toBe(true);
      expect(["live", "coming_soon"]).toContain(row.status);
      expect(["frontier", "small"]).toContain(row.tier);
      expect("pricing" in row).toBe(row.status === "live");
      if (row.modality === "text") expect("constraints" in row).toBe(false);
      if (row.modality === "video") expect(row.constraints).toHaveProperty("durations");
    }
    // text first, then image, then video
    const modalities = r.body.data.map((m) => m.modality);
    expect(modalities).toEqual(
      [...modalities].sort((a, b) => ["text", "image", "video"].indexOf(a) - ["text", "image", "video"].indexOf(b)),
    );
  });

  test("needs no credential and refuses nothing for anonymous callers", async () => {
    const res = await fetch(`${world.app.baseUrl}/v1/models`, { headers: { authorization: "Bearer svc_garbage" } });
    expect(res.status).toBe(200);
  });
});

describe("regionRestrictions (issue 39)", () => {
  test("a row the upstream restricts to some regions says which, on REST and GraphQL; others carry none", async () => {
    const published = new Map(
      DEFAULT_SIM_MODELS.map((m) => [m.id, (m.model_spec as { regionRestrictions?: string[] }).regionRestrictions]),
    );
    expect(published.get("kling-2.6-pro-image-to-video")).toEqual(["US", "GB"]);
    const rest = await getJson<{ data: PublicRow[] }>(world.app.baseUrl, "/v1/models");
    for (const row of rest.body.data) expect(row.regionRestrictions, row.id).toEqual(published.get(row.id));
    const one = await getJson<PublicRow>(world.app.baseUrl, "/v1/models/kling-2.6-pro-image-to-video");
    expect(one.body).toMatchObject({ status: "live", regionRestrictions: ["US", "GB"] });
    const g = await gql<{ models: { id: string; regionRestrictions: string[] | null }[] }>(
      world.app.baseUrl,
      "{ models { id regionRestrictions } }",
    );
    for (const m of g.data?.models ?? []) expect(m.regionRestrictions, m.id).toEqual(published.get(m.id) ?? null);
  });
});

describe("GET /v1/models/{id}", () => {
  test("a bare slug returns the same object as the list", async () => {
    const list = await getJson<{ data: PublicRow[] }>(world.app.baseUrl, "/v1/models");
    const one = await getJson<PublicRow>(world.app.baseUrl, "/v1/models/zai-org-glm-5-1");
    expect(one.status).toBe(200);
    expect(one.body).toEqual(list.body.data.find((m) => m.id === "zai-org-glm-5-1"));
    expect(one.body).toMatchObject({
      id: "zai-org-glm-5-1",
      object: "model",
      status: "live",
      modality: "text",
      name: "GLM 5.1",
      tier: "frontier",
      created: 1775520000,
    });
    expect(one.body.capabilities).toMatchObject({ supportsReasoning: true, quantization: "fp8" });
  });

  test("an svc/-prefixed id (as a path or percent-encoded) answers with the bare id", async () => {
    for (const path of ["/v1/models/svc/zai-org-glm-5-1", "/v1/models/svc%2Fzai-org-glm-5-1"]) {
      const r = await getJson<PublicRow>(world.app.baseUrl, path);
      expect(r.status, path).toBe(200);
      expect(r.body.id).toBe("zai-org-glm-5-1");
    }
    const dotted = await getJson<PublicRow>(world.app.baseUrl, "/v1/models/svc/wan-2.6-text-to-video");
    expect(dotted.status).toBe(200);
    expect(dotted.body.id).toBe("wan-2.6-text-to-video");
  });

  test("a coming_soon row is 200 without pricing", async () => {
    const r = await getJson<PublicRow>(world.app.baseUrl, "/v1/models/llama-3.2-3b");
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("coming_soon");
    expect(r.body).not.toHaveProperty("pricing");
  });

  test("unknown, disabled and unlisted ids are 404 model_not_found", async () => {
    await world.app.rt.db.catalogModel.update({ where: { id: "claude-sonnet-4-6" }, data: { disabled: true } });
    await world.app.rt.db.catalogModel.update({ where: { id: "llama-3.1-405b" }, data: { listed: false } });
    try {
      for (const id of [
        "no-such-model",
        "svc/no-such-model",
        "claude-sonnet-4-6",
        "svc/claude-sonnet-4-6",
        "llama-3.1-405b",
        "svc",
      ]) {
        const r = await getJson<{ error: { code: string } }>(world.app.baseUrl, `/v1/models/${id}`);
        expect(r.status, id).toBe(404);
        expect(r.body.error.code, id).toBe("model_not_found");
        expect(r.headers.get("x-svc-error-code")).toBe("model_not_found");
      }
      const list = await getJson<{ data: PublicRow[] }>(world.app.baseUrl, "/v1/models");
      const ids = list.body.data.map((m) => m.id);
      expect(ids).not.toContain("claude-sonnet-4-6");
      expect(ids).not.toContain("llama-3.1-405b");
      await expect(world.app.rt.services.catalog.getModel("svc/claude-sonnet-4-6")).rejects.toMatchObject({
        code: "model_not_found",
      });
    } finally {
      await world.app.rt.db.catalogModel.update({ where: { id: "claude-sonnet-4-6" }, data: { disabled: false } });
      await world.app.rt.db.catalogModel.update({ where: { id: "llama-3.1-405b" }, data: { listed: true } });
    }
  });

  test("`stats` is never captured as a model id", async () => {
    const r = await getJson<{ hasSufficientVolume: boolean }>(world.app.baseUrl, "/v1/models/stats");
    expect(r.status).toBe(200);
    expect(r.body).toHaveProperty("hasSufficientVolume");
  });
});

describe("service reads for the router", () => {
  test("requireLiveModel: live row of the route's modality, else model_not_live / unsupported_modality", async () => {
    const svc = world.app.rt.services.catalog;
    expect((await svc.requireLiveModel("svc/zai-org-glm-5-1", "text")).id).toBe("zai-org-glm-5-1");
    await expect(svc.requireLiveModel("llama-3.2-3b", "text")).rejects.toMatchObject({ code: "model_not_live" });
    await expect(svc.requireLiveModel("venice-sd35", "text")).rejects.toMatchObject({ code: "unsupported_modality" });
    await expect(svc.requireLiveModel("nope", "text")).rejects.toMatchObject({ code: "model_not_found" });
  });
});

describe("GraphQL catalog", () => {
  test("models and model(id) return the same rows as REST", async () => {
    const r = await gql<{ models: { id: string; status: string; pricing: unknown; constraints: unknown }[] }>(
      world.app.baseUrl,
      "{ models { id status modality tier name pricing constraints capabilities created } }",
    );
    expect(r.errors).toBeUndefined();
    const rest = await getJson<{ data: PublicRow[] }>(world.app.baseUrl, "/v1/models");
    expect(r.data?.models.map((m) => m.id)).toEqual(rest.body.data.map((m) => m.id));
    const glm = r.data?.models.find((m) => m.id === "zai-org-glm-5-1");
    expect(glm?.status).toBe("LIVE");
    expect(glm?.pricing).toEqual(rest.body.data.find((m) => m.id === "zai-org-glm-5-1")?.pricing);
    expect(glm?.constraints).toBeNull();
    const soon = r.data?.models.find((m) => m.id === "llama-3.2-3b");
    expect(soon?.status).toBe("COMING_SOON");
    expect(soon?.pricing).toBeNull();

    const one = await gql<{ model: { id: string; constraints: Record<string, unknown> } }>(
      world.app.baseUrl,
      `query($id: String!) { model(id: $id) { id constraints } }`,
      { id: "svc/vidu-q2-reference-to-video" },
    );
    expect(one.data?.model.id).toBe("vidu-q2-reference-to-video");
    expect(one.data?.model.constraints.model_type).toBe("reference-to-video");

    const missing = await gql(world.app.baseUrl, `{ model(id: "nope") { id } }`);
    expect(missing.errors?.[0]?.extensions?.code).toBe("model_not_found");
  });
});
