import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  computeBurnMicroDiem,
  countPromptTokens,
  DEFAULT_SIM_MODELS,
  type SimTextPricing,
  type UpstreamSimulator,
} from "../../../src/local/upstream-sim/index.js";
import {
  diemOf,
  get,
  jsonFrames,
  parseSse,
  post,
  readAllowingTruncation,
  startSim,
  userMessage,
} from "../../../testkit/upstream-sim.js";

const QWEN = DEFAULT_SIM_MODELS.find((m) => m.id === "qwen3-4b");
const QWEN_PRICING = (QWEN?.type === "text" ? QWEN.model_spec.pricing : undefined) as SimTextPricing;
const START_DIEM = 10_000_000n;

let sim: UpstreamSimulator;

beforeEach(async () => {
  sim = await startSim([
    { key: "k1", diemMicro: START_DIEM },
    { key: "k2", diemMicro: START_DIEM },
  ]);
});

afterEach(async () => {
  await sim.close();
});

const chat = (key = "k1", extra: Record<string, unknown> = {}) =>
  post(
    sim,
    "/chat/completions",
    { model: "qwen3-4b", messages: userMessage("hello [[sim:tokens=16]]"), ...extra },
    key,
  );

async function waitFor(check: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("HTTP error faults", () => {
  test.each([
    { kind: "http_429", status: 429, error: "Rate limit exceeded" },
    { kind: "http_429_overloaded", status: 429, error: "The model is currently overloaded. Please try again later." },
    { kind: "http_500", status: 500, error: "Inference processing failed" },
    { kind: "http_503", status: 503, error: "The model is at capacity. Please try again later." },
    { kind: "http_504", status: 504, error: /streaming API/ },
    {
      kind: "http_402_balance",
      status: 402,
      error:
        "Insufficient USD or Diem balance to complete request. Visit https://venice.ai/settings/api to add credits.",
    },
    { kind: "http_402_spend_limit", status: 402, error: /^API key DIEM spend limit exceeded\./ },
  ] as const)("$kind → $status, recorded with burn 0, then cleared by count", async ({ kind, status, error }) => {
    sim.state.injectFault("k1", { kind, count: 1 });
    const res = await chat();
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: string };
    if (typeof error === "string") expect(body.error).toBe(error);
    else expect(body.error).toMatch(error);
    if (kind === "http_429") {
      expect(res.headers.get("x-ratelimit-remaining-requests")).toBe("0");
      expect(res.headers.get("x-ratelimit-reset-requests")).toMatch(/^\d{13}$/);
    }
    if (kind === "http_429_overloaded") expect(res.headers.get("retry-after")).toBe("30");
    expect(diemOf(sim)).toBe(START_DIEM);
    expect(sim.state.listRequests()[0]).toMatchObject({ fault: kind, status, burnMicroDiem: 0n });
    // count: 1 → the next request is served normally
    expect((await chat()).status).toBe(200);
    expect(sim.state.listFaults()).toHaveLength(0);
  });
});

describe("connection faults", () => {
  test("timeout: never answers; the client gives up; in-flight drops back to 0", async () => {
    sim.state.injectFault("k1", { kind: "timeout" });
    await expect(
      fetch(`${sim.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer k1", "content-type": "application/json" },
        body: JSON.stringify({ model: "qwen3-4b", messages: userMessage("hi") }),
        signal: AbortSignal.timeout(250),
      }),
    ).rejects.toThrow();
    await waitFor(() => sim.state.getKey("k1")?.inFlight === 0);
    const [record] = sim.state.listRequests();
    expect(record).toMatchObject({ fault: "timeout", status: 0, aborted: true, burnMicroDiem: 0n });
    expect(record?.endedAt).not.toBeNull();
  });

  test("drop: socket destroyed before headers", async () => {
    sim.state.injectFault("*", { kind: "drop", count: 1 });
    await expect(chat()).rejects.toThrow();
    await waitFor(() => sim.state.listRequests()[0]?.endedAt != null);
    expect(sim.state.listRequests()[0]).toMatchObject({ fault: "drop", status: 0, aborted: false });
    expect(diemOf(sim)).toBe(START_DIEM);
    expect((await chat()).status).toBe(200);
  });

  test("latency: delays the first byte, then answers normally", async () => {
    sim.state.injectFault("k1", { kind: "latency", ms: 300, count: 1 });
    const started = Date.now();
    const res = await chat();
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(sim.state.listFaults()).toHaveLength(0);
    const again = Date.now();
    expect((await chat()).status).toBe(200);
    expect(Date.now() - again).toBeLessThan(250);
  });
});

describe("stream faults", () => {
  test("truncate_stream: some content then EOF, no usage, no [DONE]; bills what was produced", async () => {
    sim.state.injectFault("k1", { kind: "truncate_stream" });
    const messages = userMessage("truncate me [[sim:tokens=16]] [[sim:chunks=8]]");
    const res = await post(sim, "/chat/completions", { model: "qwen3-4b", messages, stream: true });
    expect(res.status).toBe(200);
    const { text } = await readAllowingTruncation(res);
    const frames = parseSse(text);
    expect(frames.some((f) => f.data === "[DONE]")).toBe(false);
    const chunks = jsonFrames(frames);
    expect(chunks.some((c) => "usage" in c)).toBe(false);
    const content = chunks.filter((c) => {
      const choices = c.choices as { delta: { content?: string } }[];
      return (choices[0]?.delta.content ?? "") !== "";
    });
    expect(content).toHaveLength(2); // default afterChunks = 2 → 2 chunks × 2 tokens
    const burn = computeBurnMicroDiem(QWEN_PRICING, {
      prompt_tokens: countPromptTokens(messages),
      completion_tokens: 4,
    });
    expect(START_DIEM - diemOf(sim)).toBe(burn);
    expect(sim.state.listRequests()[0]).toMatchObject({ fault: "truncate_stream", burnMicroDiem: burn });
    expect(sim.state.listRequests()[0]?.usage?.completionTokens).toBe(4);
  });

  test("close_before_content: 200 headers then an empty body; nothing billed", async () => {
    sim.state.injectFault("k1", { kind: "close_before_content", count: 1 });
    const res = await chat("k1", { stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(await res.text()).toBe("");
    expect(diemOf(sim)).toBe(START_DIEM);
    expect(sim.state.listRequests()[0]).toMatchObject({ fault: "close_before_content", burnMicroDiem: 0n });
  });

  test("midstream_error: in-band model_overloaded error then [DONE], no usage; nothing billed", async () => {
    sim.state.injectFault("k1", { kind: "midstream_error", count: 1 });
    const res = await chat("k1", { stream: true });
    expect(res.status).toBe(200);
    const frames = parseSse(await res.text());
    expect(frames).toHaveLength(2);
    expect(frames[1]?.data).toBe("[DONE]");
    const first = JSON.parse(frames[0]?.data ?? "{}") as { error: { code: string; type: string; message: string } };
    expect(first.error).toMatchObject({ code: "model_overloaded", type: "server_error" });
    expect(diemOf(sim)).toBe(START_DIEM);
  });

  test("midstream_error after content on /responses ends with response.failed then [DONE]", async () => {
    sim.state.injectFault("k1", { kind: "midstream_error", afterChunks: 1, route: "/responses" });
    const res = await post(sim, "/responses", { model: "qwen3-4b", input: "hi [[sim:tokens=8]]", stream: true });
    const frames = parseSse(await res.text());
    expect(frames.at(-1)?.data).toBe("[DONE]");
    const failed = frames.at(-2);
    expect(failed?.event).toBe("response.failed");
    const payload = JSON.parse(failed?.data ?? "{}") as { response: { status: string; error: { code: string } } };
    expect(payload.response).toMatchObject({ status: "failed", error: { code: "model_overloaded" } });
    expect(frames.filter((f) => f.event === "response.output_text.delta")).toHaveLength(1);
    expect(diemOf(sim)).toBeLessThan(START_DIEM); // one content chunk was produced and billed
  });

  test("stream-only faults do not match (and are not consumed by) buffered requests", async () => {
    sim.state.injectFault("k1", { kind: "truncate_stream", count: 1 });
    expect((await chat()).status).toBe(200);
    expect(sim.state.listFaults()).toHaveLength(1);
    const frames = parseSse(await (await chat("k1", { stream: true })).text());
    expect(frames.some((f) => f.data === "[DONE]")).toBe(false);
    expect(sim.state.listFaults()).toHaveLength(0);
  });
});

describe("fault targeting", () => {
  test("a key's fault does not touch other keys; '*' touches all", async () => {
    sim.state.injectFault("k2", { kind: "http_500" });
    expect((await chat("k1")).status).toBe(200);
    expect((await chat("k2")).status).toBe(500);
    sim.state.clearFaults("k2");
    sim.state.injectFault("*", { kind: "http_503", count: 2 });
    expect((await chat("k1")).status).toBe(503);
    expect((await chat("k2")).status).toBe(503);
    expect((await chat("k1")).status).toBe(200);
  });

  test("model and route filters; route-less faults skip non-inference routes", async () => {
    sim.state.injectFault("*", { kind: "http_500", model: "zai-org-glm-5-1" });
    expect((await chat()).status).toBe(200);
    const glm = await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages: userMessage("hi") });
    expect(glm.status).toBe(500);
    // GET /models and rate_limits are not inference routes: unaffected by route-less faults
    sim.state.injectFault("*", { kind: "http_503" });
    expect((await get(sim, "/models?type=text")).status).toBe(200);
    expect((await get(sim, "/api_keys/rate_limits")).status).toBe(200);
    sim.state.clearFaults();
    sim.state.injectFault("k1", { kind: "http_500", route: "/api_keys/rate_limits", count: 1 });
    expect((await chat()).status).toBe(200);
    expect((await get(sim, "/api_keys/rate_limits")).status).toBe(500);
    expect((await get(sim, "/api_keys/rate_limits")).status).toBe(200);
  });

  test("latency stacks with another fault", async () => {
    sim.state.injectFault("k1", { kind: "latency", ms: 120, count: 1 });
    sim.state.injectFault("k1", { kind: "http_503", count: 1 });
    const started = Date.now();
    expect((await chat()).status).toBe(503);
    expect(Date.now() - started).toBeGreaterThanOrEqual(110);
  });

  test("clearFaults removes by id", async () => {
    const id = sim.state.injectFault("k1", { kind: "http_500" });
    expect(sim.state.clearFaults(id)).toBe(1);
    expect((await chat()).status).toBe(200);
    expect(() => sim.state.injectFault("k1", { kind: "http_500", count: 0 })).toThrow();
  });
});

describe("lifecycle", () => {
  test("close() returns promptly with a stalled (timeout) request and a slow stream open", async () => {
    sim.state.injectFault("k2", { kind: "timeout" });
    const stalled = chat("k2").catch((error: unknown) => error);
    const slow = post(sim, "/chat/completions", {
      model: "qwen3-4b",
      messages: userMessage("[[sim:tokens=20]] [[sim:chunks=20]] [[sim:chunk_delay_ms=500]]"),
      stream: true,
    });
    const slowRes = await slow;
    expect(slowRes.status).toBe(200);
    const slowBody = readAllowingTruncation(slowRes);
    await waitFor(() => sim.state.getKey("k2")?.inFlight === 1);
    const started = Date.now();
    await sim.close();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(await stalled).toBeInstanceOf(Error);
    const { text } = await slowBody;
    expect(parseSse(text).some((f) => f.data === "[DONE]")).toBe(false);
  });

  test("in-flight counts concurrent requests per key", async () => {
    const slow = () =>
      post(sim, "/chat/completions", {
        model: "qwen3-4b",
        messages: userMessage("[[sim:tokens=2]] [[sim:chunks=2]] [[sim:chunk_delay_ms=100]]"),
      });
    const pending = [slow(), slow(), slow()];
    await waitFor(() => sim.state.getKey("k1")?.inFlight === 3);
    expect(sim.state.getKey("k2")?.inFlight).toBe(0);
    const statuses = (await Promise.all(pending)).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 200]);
    expect(sim.state.getKey("k1")).toMatchObject({ inFlight: 0, peakInFlight: 3 });
  });
});
