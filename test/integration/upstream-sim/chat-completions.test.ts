import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  computeBurnMicroDiem,
  countPromptTokens,
  DEFAULT_SIM_MODELS,
  formatMicro,
  type SimTextPricing,
  type UpstreamSimulator,
  WEB_SEARCH_FEE_MICRO_DIEM,
} from "../../../src/local/upstream-sim/index.js";
import { diemOf, jsonFrames, parseSse, post, startSim, userMessage } from "../../../testkit/upstream-sim.js";

function pricingOf(id: string): SimTextPricing {
  const model = DEFAULT_SIM_MODELS.find((m) => m.id === id);
  if (model?.type !== "text" || !model.model_spec.pricing) throw new Error(`no priced text model ${id}`);
  return model.model_spec.pricing;
}

interface ChatBody {
  id: string;
  object: string;
  model: string;
  choices: { index: number; message: { role: string; content: string }; finish_reason: string }[];
  usage: {
    prompt_tokens: number;
    completion_tokens: number;
    total_tokens: number;
    prompt_tokens_details: { cached_tokens: number; cache_creation_input_tokens: number };
  };
  cost: { diem: number; usd: number };
  venice_parameters: Record<string, unknown>;
}

let sim: UpstreamSimulator;

beforeEach(async () => {
  sim = await startSim([{ key: "k1", diemMicro: 50_000_000n }]);
});

afterEach(async () => {
  await sim.close();
});

describe("buffered chat", () => {
  test("returns usage and cost and debits exactly computeBurnMicroDiem", async () => {
    const messages = [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Tell me about DIEM. [[sim:tokens=37]]" },
    ];
    const before = diemOf(sim);
    const res = await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages });
    expect(res.status).toBe(200);
    const body = (await res.json()) as ChatBody;
    const promptTokens = countPromptTokens(messages);
    expect(body.object).toBe("chat.completion");
    expect(body.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(body.model).toBe("zai-org-glm-5-1");
    expect(body.usage.prompt_tokens).toBe(promptTokens);
    expect(body.usage.completion_tokens).toBe(37);
    expect(body.usage.total_tokens).toBe(promptTokens + 37);
    expect(body.choices[0]?.finish_reason).toBe("stop");
    expect(body.choices[0]?.message.role).toBe("assistant");
    expect(body.choices[0]?.message.content.length).toBeGreaterThan(37);

    const burn = computeBurnMicroDiem(pricingOf("zai-org-glm-5-1"), {
      prompt_tokens: promptTokens,
      completion_tokens: 37,
    });
    expect(burn).toBeGreaterThan(0n);
    expect(before - diemOf(sim)).toBe(burn);
    expect(body.cost).toEqual({ diem: Number(formatMicro(burn)), usd: 0 });

    expect(res.headers.get("x-venice-balance-diem")).toBe(formatMicro(before));
    expect(res.headers.get("x-venice-balance-usd")).toBe("0");
    expect(res.headers.get("x-venice-version")).toMatch(/^\d{8}\.\d{6}$/);
    expect(res.headers.get("cf-ray")).toMatch(/^[0-9a-f]{16}-[A-Z]{3}$/);
    expect(res.headers.get("x-ratelimit-remaining-requests")).toBe("99999");
    expect(res.headers.get("x-ratelimit-limit-tokens")).toBe("100000000");

    const [record] = sim.state.listRequests({ route: "/chat/completions" });
    expect(record?.burnMicroDiem).toBe(burn);
    expect(record?.status).toBe(200);
    expect(record?.usage).toEqual({
      promptTokens,
      completionTokens: 37,
      totalTokens: promptTokens + 37,
      cachedTokens: 0,
      cacheWriteTokens: 0,
    });
  });

  test("default reply length derives from the prompt and max tokens cut it with finish_reason length", async () => {
    const short = (await (
      await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("hi") })
    ).json()) as ChatBody;
    expect(short.usage.completion_tokens).toBe(8);

    const thirty = userMessage("x".repeat(104)); // 4 + 26 = 30 prompt tokens
    const mid = (await (
      await post(sim, "/chat/completions", { model: "qwen3-4b", messages: thirty })
    ).json()) as ChatBody;
    expect(mid.usage.prompt_tokens).toBe(30);
    expect(mid.usage.completion_tokens).toBe(30);

    const cut = (await (
      await post(sim, "/chat/completions", { model: "qwen3-4b", messages: thirty, max_tokens: 5 })
    ).json()) as ChatBody;
    expect(cut.usage.completion_tokens).toBe(5);
    expect(cut.choices[0]?.finish_reason).toBe("length");

    // max_completion_tokens wins over max_tokens
    const both = (await (
      await post(sim, "/chat/completions", {
        model: "qwen3-4b",
        messages: thirty,
        max_tokens: 5,
        max_completion_tokens: 12,
      })
    ).json()) as ChatBody;
    expect(both.usage.completion_tokens).toBe(12);
  });

  test("n choices are all billed", async () => {
    const messages = userMessage("two please [[sim:tokens=10]]");
    const before = diemOf(sim);
    const body = (await (
      await post(sim, "/chat/completions", { model: "llama-3.3-70b", messages, n: 2 })
    ).json()) as ChatBody;
    expect(body.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(body.usage.completion_tokens).toBe(20);
    const burn = computeBurnMicroDiem(pricingOf("llama-3.3-70b"), {
      prompt_tokens: countPromptTokens(messages),
      completion_tokens: 20,
    });
    expect(before - diemOf(sim)).toBe(burn);
  });

  test("cached-token directive bills cache reads at cache_input", async () => {
    const messages = userMessage(`${"y".repeat(4000)} [[sim:cached_tokens=800]] [[sim:tokens=20]]`);
    const before = diemOf(sim);
    const body = (await (
      await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages })
    ).json()) as ChatBody;
    expect(body.usage.prompt_tokens_details.cached_tokens).toBe(800);
    const usage = {
      prompt_tokens: body.usage.prompt_tokens,
      completion_tokens: 20,
      prompt_tokens_details: { cached_tokens: 800 },
    };
    const burn = computeBurnMicroDiem(pricingOf("zai-org-glm-5-1"), usage);
    expect(burn).toBeLessThan(
      computeBurnMicroDiem(pricingOf("zai-org-glm-5-1"), { ...usage, prompt_tokens_details: {} }),
    );
    expect(before - diemOf(sim)).toBe(burn);
  });

  test("cache-write directive reports cache_creation_input_tokens, billed at cache_write (streamed too)", async () => {
    // about 1000 prompt tokens: 300 read from the cache, 500 written to it, the rest at the input rate
    const messages = userMessage(
      `${"w".repeat(4000)} [[sim:cached_tokens=300]] [[sim:cache_write_tokens=500]] [[sim:tokens=20]]`,
    );
    const promptTokens = countPromptTokens(messages);
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: 20,
      prompt_tokens_details: { cached_tokens: 300, cache_creation_input_tokens: 500 },
    };
    const burn = computeBurnMicroDiem(pricingOf("claude-sonnet-4-6"), usage);
    // 4.5 DIEM/M for writes against 3.6 for input: 500 writes cost 450 micro-DIEM more than uncached
    expect(
      burn -
        computeBurnMicroDiem(pricingOf("claude-sonnet-4-6"), {
          ...usage,
          prompt_tokens_details: { cached_tokens: 300, cache_creation_input_tokens: 0 },
        }),
    ).toBe(450n);
    const before = diemOf(sim);
    const body = (await (
      await post(sim, "/chat/completions", { model: "claude-sonnet-4-6", messages })
    ).json()) as ChatBody;
    expect(body.usage.prompt_tokens_details).toEqual({ cached_tokens: 300, cache_creation_input_tokens: 500 });
    expect(before - diemOf(sim)).toBe(burn);
    const [record] = sim.state.listRequests({ route: "/chat/completions" }).slice(-1);
    expect(record?.usage).toMatchObject({ cachedTokens: 300, cacheWriteTokens: 500 });

    const streamed = await post(sim, "/chat/completions", { model: "claude-sonnet-4-6", messages, stream: true });
    const usageFrame = jsonFrames(parseSse(await streamed.text())).find((f) => f.usage) as
      | { usage: ChatBody["usage"] }
      | undefined;
    expect(usageFrame?.usage.prompt_tokens_details).toEqual({ cached_tokens: 300, cache_creation_input_tokens: 500 });
    // without the directive: none written
    const plain = (await (
      await post(sim, "/chat/completions", { model: "claude-sonnet-4-6", messages: userMessage("hello") })
    ).json()) as ChatBody;
    expect(plain.usage.prompt_tokens_details.cache_creation_input_tokens).toBe(0);
  });

  test("extended pricing tier applies above the context threshold", async () => {
    const messages = userMessage("z".repeat(800_004)); // 4 + 200001 tokens > 200000
    const promptTokens = countPromptTokens(messages);
    expect(promptTokens).toBe(200_005);
    const before = diemOf(sim);
    const res = await post(sim, "/chat/completions", {
      model: "gemini-3-1-pro-preview",
      messages,
      max_completion_tokens: 10,
    });
    expect(res.status).toBe(200);
    // 200005 × 5 + 10 × 22.5 DIEM per 1M tokens = 1000025 + 225 micro
    expect(before - diemOf(sim)).toBe(1_000_250n);
  });

  test("web search adds the per-request fee, via venice_parameters or a model suffix", async () => {
    const messages = userMessage("search this [[sim:tokens=10]]");
    const tokenBurn = computeBurnMicroDiem(pricingOf("zai-org-glm-5-1"), {
      prompt_tokens: countPromptTokens(messages),
      completion_tokens: 10,
    });
    let before = diemOf(sim);
    const viaParams = (await (
      await post(sim, "/chat/completions", {
        model: "zai-org-glm-5-1",
        messages,
        venice_parameters: { enable_web_search: "on", unknown_flag: 1 },
      })
    ).json()) as ChatBody;
    expect(viaParams.venice_parameters.enable_web_search).toBe("on");
    expect(viaParams.venice_parameters).not.toHaveProperty("unknown_flag");
    expect(before - diemOf(sim)).toBe(tokenBurn + WEB_SEARCH_FEE_MICRO_DIEM);

    before = diemOf(sim);
    const viaSuffix = await post(sim, "/chat/completions", {
      model: "zai-org-glm-5-1:enable_web_search=on&include_venice_system_prompt=false",
      messages,
    });
    const suffixBody = (await viaSuffix.json()) as ChatBody;
    expect(suffixBody.model).toBe("zai-org-glm-5-1");
    expect(suffixBody.venice_parameters.include_venice_system_prompt).toBe(false);
    expect(before - diemOf(sim)).toBe(tokenBurn + WEB_SEARCH_FEE_MICRO_DIEM);
  });

  test("model lookup tolerates dots/underscores and resolves traits", async () => {
    const dashed = (await (
      await post(sim, "/chat/completions", { model: "llama_3_3_70b", messages: userMessage("hi") })
    ).json()) as ChatBody;
    expect(dashed.model).toBe("llama-3.3-70b");
    const trait = (await (
      await post(sim, "/chat/completions", { model: "default", messages: userMessage("hi") })
    ).json()) as ChatBody;
    expect(trait.model).toBe("llama-3.3-70b");
  });

  test("documented aliases are rewritten (input, max_output_tokens) and include/metadata dropped", async () => {
    const res = await post(sim, "/chat/completions", {
      model: "qwen3-4b",
      input: userMessage("alias"),
      max_output_tokens: 3,
      include: ["x"],
      metadata: { a: "b" },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as ChatBody;
    expect(body.usage.completion_tokens).toBe(3);
  });

  test("deprecated models send deprecation headers", async () => {
    const res = await post(sim, "/chat/completions", { model: "llama-3.1-405b", messages: userMessage("hi") });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-venice-deprecated")).toBe("true");
    expect(res.headers.get("x-venice-model-deprecation-date")).toBe("2026-09-30T00:00:00.000Z");
  });
});

describe("streamed chat", () => {
  test("role chunk, content chunks, finish chunk, usage chunk with cost, [DONE] even with include_usage false", async () => {
    const messages = userMessage("stream it [[sim:tokens=25]]");
    const before = diemOf(sim);
    const res = await post(sim, "/chat/completions", {
      model: "zai-org-glm-5-1",
      messages,
      stream: true,
      stream_options: { include_usage: false },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("x-venice-balance-diem")).toBe(formatMicro(before));
    const frames = parseSse(await res.text());
    expect(frames.at(-1)?.data).toBe("[DONE]");
    const chunks = jsonFrames(frames) as {
      object: string;
      choices: { delta: { role?: string; content?: string }; finish_reason: string | null }[];
      usage?: { prompt_tokens: number; completion_tokens: number };
      cost?: { diem: number; usd: number };
    }[];
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    const usageChunk = chunks.at(-1);
    expect(usageChunk?.choices).toEqual([]);
    const finish = chunks.at(-2);
    expect(finish?.choices[0]?.finish_reason).toBe("stop");
    const content = chunks.slice(1, -2);
    expect(content.length).toBeGreaterThanOrEqual(3);
    expect(content.every((c) => c.usage === undefined && typeof c.choices[0]?.delta.content === "string")).toBe(true);

    const promptTokens = countPromptTokens(messages);
    expect(usageChunk?.usage?.prompt_tokens).toBe(promptTokens);
    expect(usageChunk?.usage?.completion_tokens).toBe(25);
    const burn = computeBurnMicroDiem(pricingOf("zai-org-glm-5-1"), {
      prompt_tokens: promptTokens,
      completion_tokens: 25,
    });
    expect(usageChunk?.cost).toEqual({ diem: Number(formatMicro(burn)), usd: 0 });
    expect(before - diemOf(sim)).toBe(burn);

    // The streamed text equals the buffered text for the same request.
    const buffered = (await (
      await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages })
    ).json()) as ChatBody;
    expect(content.map((c) => c.choices[0]?.delta.content).join("")).toBe(buffered.choices[0]?.message.content);
    const [streamRecord] = sim.state.listRequests({ route: "/chat/completions" });
    expect(streamRecord?.stream).toBe(true);
    expect(streamRecord?.burnMicroDiem).toBe(burn);
  });

  test("chunk delay directive paces the stream and the request counts as in flight meanwhile", async () => {
    const started = Date.now();
    const pending = post(sim, "/chat/completions", {
      model: "qwen3-4b",
      messages: userMessage("slow [[sim:tokens=6]] [[sim:chunks=3]] [[sim:chunk_delay_ms=80]]"),
      stream: true,
    });
    const res = await pending;
    expect(res.status).toBe(200);
    expect(sim.state.getKey("k1")?.inFlight).toBe(1);
    const frames = parseSse(await res.text());
    expect(Date.now() - started).toBeGreaterThanOrEqual(230);
    const contentFrames = jsonFrames(frames).filter((c) => {
      const choices = c.choices as { delta: { content?: string } }[];
      return typeof choices[0]?.delta.content === "string" && choices[0].delta.content !== "";
    });
    expect(contentFrames).toHaveLength(3);
    expect(sim.state.getKey("k1")?.inFlight).toBe(0);
    expect(sim.state.getKey("k1")?.peakInFlight).toBe(1);
  });
});

describe("chat validation", () => {
  test("unknown top-level field → 400 DetailedError naming it", async () => {
    const res = await post(sim, "/chat/completions", {
      model: "qwen3-4b",
      messages: userMessage("hi"),
      svc: { maxPrice: 3 },
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; details: unknown; issues: { code: string; keys?: string[] }[] };
    expect(body.error).toBe("Invalid request parameters");
    expect(body.details).toBeTypeOf("object");
    expect(body.issues[0]).toMatchObject({ code: "unrecognized_keys", keys: ["svc"] });
    expect(sim.state.getKey("k1")?.diemMicro).toBe(50_000_000n);
  });

  test("documented fields are accepted", async () => {
    const res = await post(sim, "/chat/completions", {
      model: "zai-org-glm-5-1",
      messages: userMessage("hi"),
      stream: false,
      stream_options: { include_usage: true },
      venice_parameters: { include_venice_system_prompt: false },
      max_tokens: 10,
      max_completion_tokens: 10,
      user: "u1",
      store: false,
      n: 1,
      temperature: 0.2,
      top_p: 0.9,
      seed: 7,
      stop: ["\n"],
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
      tool_choice: "auto",
      parallel_tool_calls: true,
      response_format: { type: "text" },
      reasoning_effort: "low",
      prompt_cache_key: "abc",
    });
    expect(res.status).toBe(200);
  });

  test.each([
    { label: "missing model", body: { messages: userMessage("hi") }, status: 400, error: "model is required" },
    {
      label: "unknown model",
      body: { model: "gpt-99", messages: userMessage("hi") },
      status: 404,
      error: "Specified model not found",
    },
    {
      label: "image model",
      body: { model: "venice-sd35", messages: userMessage("hi") },
      status: 400,
      error: /image model/,
    },
    {
      label: "video model",
      body: { model: "wan-2.6-text-to-video", messages: userMessage("hi") },
      status: 400,
      error: /video model/,
    },
    {
      label: "offline model",
      body: { model: "deepseek-r1-671b", messages: userMessage("hi") },
      status: 400,
      error: /offline/,
    },
    {
      label: "max_completion_tokens above the model cap",
      body: { model: "qwen3-4b", messages: userMessage("hi"), max_completion_tokens: 8193 },
      status: 400,
      error: /exceeds/,
    },
    {
      label: "max_tokens above the model cap",
      body: { model: "qwen3-4b", messages: userMessage("hi"), max_tokens: 9000 },
      status: 400,
      error: /max_tokens/,
    },
    {
      label: "tools on a model without function calling",
      body: {
        model: "llama-3.2-3b",
        messages: userMessage("hi"),
        tools: [{ type: "function", function: { name: "f" } }],
      },
      status: 400,
      error: /tools/,
    },
    {
      label: "image input on a non-vision model",
      body: {
        model: "zai-org-glm-5-1",
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }],
      },
      status: 400,
      error: /image/,
    },
    { label: "messages missing", body: { model: "qwen3-4b" }, status: 400, error: "Invalid request parameters" },
    {
      label: "temperature out of range",
      body: { model: "qwen3-4b", messages: userMessage("hi"), temperature: 3 },
      status: 400,
      error: "Invalid request parameters",
    },
  ])("$label → $status", async ({ body, status, error }) => {
    const res = await post(sim, "/chat/completions", body);
    expect(res.status).toBe(status);
    const json = (await res.json()) as { error: string };
    if (typeof error === "string") expect(json.error).toBe(error);
    else expect(json.error).toMatch(error);
    expect(sim.state.getKey("k1")?.diemMicro).toBe(50_000_000n);
  });

  test("invalid JSON → 400 Invalid JSON request", async () => {
    const res = await fetch(`${sim.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer k1", "content-type": "application/json" },
      body: "{not json",
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "Invalid JSON request" });
  });

  test("context overflow → 400 OpenAI-shaped context_length_exceeded", async () => {
    const res = await post(sim, "/chat/completions", {
      model: "qwen3-4b",
      messages: userMessage("a".repeat(32_000 * 4)),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { type: string; code: string; param: string; message: string } };
    expect(body.error).toMatchObject({
      type: "invalid_request_error",
      code: "context_length_exceeded",
      param: "messages",
    });
    expect(body.error.message).toContain("32000");
  });
});

describe("admission", () => {
  test("no DIEM and no USD → 402 insufficient balance", async () => {
    sim.state.addKey({ key: "empty", diemMicro: 0n });
    const res = await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("hi") }, "empty");
    expect(res.status).toBe(402);
    expect(await res.json()).toEqual({
      error:
        "Insufficient USD or Diem balance to complete request. Visit https://venice.ai/settings/api to add credits.",
    });
    expect(sim.state.listRequests({ key: "empty" })[0]?.status).toBe(402);
  });

  test("DIEM exhausted but USD positive → charged to USD, cost.usd set", async () => {
    sim.state.addKey({ key: "usd", diemMicro: 0n, usdMicro: 1_000_000n });
    const messages = userMessage("pay in usd [[sim:tokens=40]]");
    const res = await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages }, "usd");
    expect(res.status).toBe(200);
    const body = (await res.json()) as ChatBody;
    const burn = computeBurnMicroDiem(pricingOf("zai-org-glm-5-1"), {
      prompt_tokens: countPromptTokens(messages),
      completion_tokens: 40,
    });
    expect(body.cost).toEqual({ diem: 0, usd: Number(formatMicro(burn)) });
    expect(sim.state.getKey("usd")).toMatchObject({ diemMicro: 0n, usdMicro: 1_000_000n - burn });
    expect(sim.state.listRequests({ key: "usd" })[0]).toMatchObject({ chargedUsdMicro: burn, chargedDiemMicro: 0n });
  });

  test("DIEM may go slightly negative after completion, then 402", async () => {
    sim.state.addKey({ key: "low", diemMicro: 10n });
    const ok = await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages: userMessage("go") }, "low");
    expect(ok.status).toBe(200);
    const after = sim.state.getKey("low")?.diemMicro ?? 0n;
    expect(after).toBeLessThan(0n);
    const denied = await post(
      sim,
      "/chat/completions",
      { model: "zai-org-glm-5-1", messages: userMessage("go") },
      "low",
    );
    expect(denied.status).toBe(402);
    expect(sim.state.getKey("low")?.diemMicro).toBe(after);
  });

  test("key DIEM cap reached → 402 spend limit", async () => {
    sim.state.addKey({ key: "capped", diemMicro: 10_000_000n, diemCapMicro: 20n });
    const first = await post(
      sim,
      "/chat/completions",
      { model: "zai-org-glm-5-1", messages: userMessage("one") },
      "capped",
    );
    expect(first.status).toBe(200);
    expect(sim.state.getKey("capped")?.spentDiemEpochMicro).toBeGreaterThanOrEqual(20n);
    const second = await post(
      sim,
      "/chat/completions",
      { model: "zai-org-glm-5-1", messages: userMessage("two") },
      "capped",
    );
    expect(second.status).toBe(402);
    const body = (await second.json()) as { error: string };
    expect(body.error).toMatch(/^API key DIEM spend limit exceeded\./);
  });

  test("per-key RPM limit → 429 Rate limit exceeded", async () => {
    sim.state.addKey({ key: "rpm", diemMicro: 10_000_000n, rpmLimit: 2 });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("hi") }, "rpm");
      statuses.push(res.status);
      if (res.status === 429) {
        expect(await res.json()).toEqual({ error: "Rate limit exceeded" });
        expect(res.headers.get("x-ratelimit-remaining-requests")).toBe("0");
      }
    }
    expect(statuses).toEqual([200, 200, 429]);
  });
});
