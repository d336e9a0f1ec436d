import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  computeBurnMicroDiem,
  countPromptTokens,
  DEFAULT_SIM_MODELS,
  responsesInputToMessages,
  type SimTextPricing,
  type UpstreamSimulator,
} from "../../../src/local/upstream-sim/index.js";
import { diemOf, jsonFrames, parseSse, post, startSim } from "../../../testkit/upstream-sim.js";

const GLM = DEFAULT_SIM_MODELS.find((m) => m.id === "zai-org-glm-5-1");
const GLM_PRICING = (GLM?.type === "text" ? GLM.model_spec.pricing : undefined) as SimTextPricing;

interface ResponseBody {
  id: string;
  object: string;
  status: string;
  model: string;
  created_at: number;
  output: { type: string; role: string; content: { type: string; text: string }[] }[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  incomplete_details: { reason: string } | null;
}

let sim: UpstreamSimulator;

beforeEach(async () => {
  sim = await startSim([{ key: "k1", diemMicro: 20_000_000n }]);
});

afterEach(async () => {
  await sim.close();
});

describe("POST /responses", () => {
  test("buffered: string input, output_text message, usage, no cost, debits the burn", async () => {
    const before = diemOf(sim);
    const input = "Say something [[sim:tokens=21]]";
    const res = await post(sim, "/responses", {
      model: "zai-org-glm-5-1",
      input,
      store: true,
      previous_response_id: "x",
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as ResponseBody & { cost?: unknown };
    expect(body.id).toMatch(/^resp_/);
    expect(body.object).toBe("response");
    expect(body.status).toBe("completed");
    expect(body.created_at).toBeTypeOf("number");
    expect(body.output[0]).toMatchObject({ type: "message", role: "assistant" });
    expect(body.output[0]?.content[0]?.type).toBe("output_text");
    expect(body.output[0]?.content[0]?.text.length).toBeGreaterThan(0);
    expect(body).not.toHaveProperty("cost");
    const inputTokens = countPromptTokens([{ role: "user", content: input }]);
    expect(body.usage).toMatchObject({ input_tokens: inputTokens, output_tokens: 21, total_tokens: inputTokens + 21 });
    const burn = computeBurnMicroDiem(GLM_PRICING, { prompt_tokens: inputTokens, completion_tokens: 21 });
    expect(before - diemOf(sim)).toBe(burn);
    expect(sim.state.listRequests({ route: "/responses" })[0]?.burnMicroDiem).toBe(burn);
  });

  test("item input with instructions is counted like the equivalent chat", async () => {
    const input = [
      { type: "message", role: "user", content: [{ type: "input_text", text: "first question" }] },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "an answer" }] },
      { role: "user", content: "follow-up" },
    ];
    const res = await post(sim, "/responses", { model: "qwen3-4b", input, instructions: "be brief" });
    const body = (await res.json()) as ResponseBody;
    const expected = countPromptTokens(responsesInputToMessages(input, "be brief"));
    expect(expected).toBe(4 + 2 + (4 + 4) + (4 + 3) + (4 + 3));
    expect(body.usage.input_tokens).toBe(expected);
  });

  test("max_output_tokens cut → status incomplete", async () => {
    const res = await post(sim, "/responses", { model: "qwen3-4b", input: "x".repeat(200), max_output_tokens: 4 });
    const body = (await res.json()) as ResponseBody;
    expect(body.status).toBe("incomplete");
    expect(body.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(body.usage.output_tokens).toBe(4);
  });

  test("streaming: event sequence with sequence numbers, completed carries usage, then [DONE]", async () => {
    const before = diemOf(sim);
    const input = "stream a response [[sim:tokens=16]] [[sim:chunks=4]]";
    const res = await post(sim, "/responses", { model: "zai-org-glm-5-1", input, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = parseSse(await res.text());
    expect(frames.at(-1)?.data).toBe("[DONE]");
    const events = jsonFrames(frames) as {
      type: string;
      sequence_number: number;
      delta?: string;
      response?: ResponseBody;
    }[];
    // each data frame's type matches its event line
    expect(frames.slice(0, -1).map((f) => f.event)).toEqual(events.map((e) => e.type));
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_e, i) => i));
    const types = events.map((e) => e.type);
    const order = [
      "response.created",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_item.done",
      "response.completed",
    ];
    const positions = order.map((t) => types.indexOf(t));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    const deltas = events.filter((e) => e.type === "response.output_text.delta");
    expect(deltas).toHaveLength(4);
    const completed = events.find((e) => e.type === "response.completed")?.response;
    expect(completed?.status).toBe("completed");
    expect(completed?.output[0]?.content[0]?.text).toBe(deltas.map((d) => d.delta).join(""));
    const inputTokens = countPromptTokens([{ role: "user", content: input }]);
    expect(completed?.usage).toMatchObject({ input_tokens: inputTokens, output_tokens: 16 });
    const burn = computeBurnMicroDiem(GLM_PRICING, { prompt_tokens: inputTokens, completion_tokens: 16 });
    expect(before - diemOf(sim)).toBe(burn);
  });

  test("validation: missing model 400, missing input 400, unknown model 404, video model 400, cap 400", async () => {
    expect((await post(sim, "/responses", { input: "hi" })).status).toBe(400);
    expect((await post(sim, "/responses", { model: "qwen3-4b" })).status).toBe(400);
    const unknown = await post(sim, "/responses", { model: "nope", input: "hi" });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: "Specified model not found" });
    expect((await post(sim, "/responses", { model: "kling-2.6-pro-image-to-video", input: "hi" })).status).toBe(400);
    expect((await post(sim, "/responses", { model: "qwen3-4b", input: "hi", max_output_tokens: 100000 })).status).toBe(
      400,
    );
    // permissive: unknown fields are ignored
    expect(
      (await post(sim, "/responses", { model: "qwen3-4b", input: "hi", whatever: 1, background: true })).status,
    ).toBe(200);
    expect(diemOf(sim)).toBeLessThan(20_000_000n);
  });

  test("admission applies: empty key → 402", async () => {
    sim.state.addKey({ key: "empty", diemMicro: 0n });
    const res = await post(sim, "/responses", { model: "qwen3-4b", input: "hi" }, "empty");
    expect(res.status).toBe(402);
  });
});
