// Issue 39: the simulator answers Venice's documented refusals — a region-restricted model (403 on
// the video routes), the alpha-only /responses, a revoked key (401) — and every documented error
// status on demand (fault kinds), each with its documented body.
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { SimFaultKind } from "../../../src/local/upstream-sim/faults.js";
import type { UpstreamSimulator } from "../../../src/local/upstream-sim/index.js";
import { MSG_ALPHA_ONLY, MSG_REGION } from "../../../src/local/upstream-sim/refusals.js";
import { admin, diemOf, get, post, startSim, userMessage } from "../../../testkit/upstream-sim.js";

const START = 10_000_000n;
const KLING = "kling-2.6-pro-image-to-video";
const KLING_JOB = { model: KLING, prompt: "x", duration: "5s", image_url: "https://example.com/a.png" };
const CHAT = { model: "qwen3-4b", messages: userMessage("hello") };

let sim: UpstreamSimulator;

beforeEach(async () => {
  sim = await startSim([
    { key: "k1", diemMicro: START },
    { key: "k2", diemMicro: START, alphaAccess: false },
  ]);
});

afterEach(async () => {
  await sim.close();
});

async function errorOf(res: Response): Promise<unknown> {
  return ((await res.json()) as { error: unknown }).error;
}

describe("a region-restricted model", () => {
  test("the catalog row carries `regionRestrictions`; served in a listed region", async () => {
    const rows = (
      (await (await get(sim, "/models?type=video")).json()) as {
        data: { id: string; model_spec: { regionRestrictions?: string[] } }[];
      }
    ).data;
    expect(rows.find((m) => m.id === KLING)?.model_spec.regionRestrictions).toEqual(["US", "GB"]);
    expect(sim.state.callerRegion()).toBe("US");
    expect((await post(sim, "/video/quote", KLING_JOB)).status).toBe(200);
  });

  test("from another region: quote, queue and retrieve answer 403 with the documented text; nothing charged", async () => {
    const queued = (await (await post(sim, "/video/queue", KLING_JOB)).json()) as { queue_id: string };
    const afterQueue = diemOf(sim);
    expect(await (await admin(sim, "POST", "/region", { region: "de" })).json()).toEqual({ region: "DE" });
    for (const [path, body] of [
      ["/video/quote", KLING_JOB],
      ["/video/queue", KLING_JOB],
      ["/video/retrieve", { model: KLING, queue_id: queued.queue_id }],
    ] as const) {
      const res = await post(sim, path, body);
      expect(res.status, path).toBe(403);
      expect(await errorOf(res)).toBe(MSG_REGION);
    }
    expect(diemOf(sim)).toBe(afterQueue);
    // other models and the key itself are fine
    expect((await post(sim, "/video/quote", { model: "wan-2.6-text-to-video", duration: "5s" })).status).toBe(200);
    expect((await post(sim, "/chat/completions", CHAT)).status).toBe(200);
    expect((await get(sim, "/api_keys/rate_limits")).status).toBe(200);
    expect((await admin(sim, "POST", "/region", { region: "Germany" })).status).toBe(400);
  });
});

describe("the alpha-only /responses", () => {
  test("a key without alpha access: 401 with the alpha text; its chat and rate limits are served", async () => {
    const res = await post(sim, "/responses", { model: "qwen3-4b", input: "hi" }, "k2");
    expect(res.status).toBe(401);
    expect(await errorOf(res)).toBe(MSG_ALPHA_ONLY);
    expect(diemOf(sim, "k2")).toBe(START);
    expect((await post(sim, "/chat/completions", CHAT, "k2")).status).toBe(200);
    expect((await get(sim, "/api_keys/rate_limits", "k2")).status).toBe(200);
    expect((await post(sim, "/responses", { model: "qwen3-4b", input: "hi" }, "k1")).status).toBe(200);
  });

  test("alpha access is per key and set through the admin API", async () => {
    const set = await admin(sim, "POST", "/keys/k2/alpha", { alphaAccess: true });
    expect(await set.json()).toMatchObject({ key: "k2", alphaAccess: true });
    expect((await post(sim, "/responses", { model: "qwen3-4b", input: "hi" }, "k2")).status).toBe(200);
    expect((await admin(sim, "POST", "/keys/k2/alpha", {})).status).toBe(400);
  });
});

test("a revoked key: 401 Authentication failed on every route, its rate-limits read included", async () => {
  sim.state.revokeKey("k1");
  for (const res of [await post(sim, "/chat/completions", CHAT), await get(sim, "/api_keys/rate_limits")]) {
    expect(res.status).toBe(401);
    expect(await errorOf(res)).toBe("Authentication failed");
  }
});

describe("documented refusals on demand (fault kinds)", () => {
  test.each([
    { kind: "http_400", status: 400, error: "Invalid request parameters" },
    { kind: "http_401_auth", status: 401, error: "Authentication failed" },
    { kind: "http_401_pro_only", status: 401, error: "This model is only available to Pro users" },
    { kind: "http_401_alpha", status: 401, error: MSG_ALPHA_ONLY },
    { kind: "http_403_region", status: 403, error: MSG_REGION },
    { kind: "http_403_unauthorized", status: 403, error: "Unauthorized access" },
    { kind: "http_404", status: 404, error: "Specified model not found" },
    { kind: "http_409_consent", status: 409, error: { code: "needs_consent", message: expect.any(String) } },
    { kind: "http_413", status: 413, error: expect.stringMatching(/too large/) },
    { kind: "http_415", status: 415, error: "Invalid request content-type" },
    {
      kind: "http_422_content_policy",
      status: 422,
      error: "Your prompt violates the content policy of Venice.ai or the model provider",
    },
  ] as { kind: SimFaultKind; status: number; error: unknown }[])("$kind → $status", async ({ kind, status, error }) => {
    sim.state.injectFault("k1", { kind, count: 1 });
    const res = await post(sim, "/chat/completions", CHAT);
    expect(res.status).toBe(status);
    expect(await errorOf(res)).toEqual(error);
    expect(sim.state.listRequests()[0]).toMatchObject({ fault: kind, status, burnMicroDiem: 0n });
    expect(diemOf(sim)).toBe(START);
    expect((await post(sim, "/chat/completions", CHAT)).status).toBe(200);
  });
});
