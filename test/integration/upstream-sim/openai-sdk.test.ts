import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  computeBurnMicroDiem,
  countPromptTokens,
  DEFAULT_SIM_MODELS,
  type SimTextPricing,
  type UpstreamSimulator,
} from "../../../src/local/upstream-sim/index.js";
import { diemOf, startSim } from "../../../testkit/upstream-sim.js";

const GLM = DEFAULT_SIM_MODELS.find((m) => m.id === "zai-org-glm-5-1");
const GLM_PRICING = (GLM?.type === "text" ? GLM.model_spec.pricing : undefined) as SimTextPricing;

let sim: UpstreamSimulator;
let client: OpenAI;

beforeAll(async () => {
  sim = await startSim([{ key: "sdk-key", diemMicro: 10_000_000n }]);
  client = new OpenAI({ apiKey: "sdk-key", baseURL: sim.baseUrl, maxRetries: 0 });
});

afterAll(async () => {
  await sim.close();
});

describe("official openai SDK against the simulator", () => {
  test("buffered chat completion", async () => {
    const messages = [{ role: "user" as const, content: "Hello from the SDK [[sim:tokens=12]]" }];
    const before = diemOf(sim, "sdk-key");
    const completion = await client.chat.completions.create({ model: "zai-org-glm-5-1", messages, user: "u-1" });
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(completion.usage).toMatchObject({ prompt_tokens: countPromptTokens(messages), completion_tokens: 12 });
    const burn = computeBurnMicroDiem(GLM_PRICING, {
      prompt_tokens: countPromptTokens(messages),
      completion_tokens: 12,
    });
    expect(before - diemOf(sim, "sdk-key")).toBe(burn);
  });

  test("streaming chat completion: chunks iterate, usage arrives on the final chunk", async () => {
    const stream = await client.chat.completions.create({
      model: "zai-org-glm-5-1",
      messages: [{ role: "user", content: "Stream from the SDK [[sim:tokens=18]]" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(finish).toBe("stop");
    expect(usage?.completion_tokens).toBe(18);
  });

  test("stream helper accumulates a final completion", async () => {
    const runner = client.chat.completions.stream({
      model: "qwen3-4b",
      messages: [{ role: "user", content: "helper [[sim:tokens=9]]" }],
    });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]?.message.role).toBe("assistant");
    expect(final.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(final.usage?.completion_tokens).toBe(9);
  });

  test("responses API buffered and streamed", async () => {
    const response = await client.responses.create({ model: "qwen3-4b", input: "hi [[sim:tokens=7]]" });
    expect(response.output_text.length).toBeGreaterThan(0);
    expect(response.usage?.output_tokens).toBe(7);

    const stream = await client.responses.create({ model: "qwen3-4b", input: "hi [[sim:tokens=7]]", stream: true });
    const types: string[] = [];
    let completedTokens: number | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.completed") completedTokens = event.response.usage?.output_tokens;
    }
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    expect(completedTokens).toBe(7);
  });

  test("errors surface as APIError with the upstream status", async () => {
    await expect(
      client.chat.completions.create({ model: "not-a-model", messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 404 });
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toContain("zai-org-glm-5-1");
    const bad = new OpenAI({ apiKey: "wrong", baseURL: sim.baseUrl, maxRetries: 0 });
    await expect(
      bad.chat.completions.create({ model: "qwen3-4b", messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 401 });
  });
});
