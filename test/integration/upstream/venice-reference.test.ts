// Venice as documented (issue 39 items 1 and 4): Venice's own API reference (vendor/venice/swagger.yaml)
// is the source of truth. Every request body the service sends upstream — captured in the simulator's
// call log while the service is driven through its routes — validates against the reference's request
// schema and carries no property the reference does not list (even where the schema allows extras);
// every answer of the simulator validates against the reference's response schema for its status, the
// simulator can give every documented status of the routes the service calls, and its answers carry
// every documented field the service reads. Buyers' undocumented fields are dropped, `fallbacks` is
// refused, and the video quote asks with the pricing inputs only.
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect } from "vitest";
import { VENICE_REQUEST_FIELDS } from "../../../src/adapters/upstream/venice-fields.js";
import type { SimFaultKind, SimRequestRecord, UpstreamSimulator } from "../../../src/local/upstream-sim/index.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";
import { registerKey, simKey } from "../../../testkit/supply.js";
import { jsonFrames, parseSse, startSim } from "../../../testkit/upstream-sim.js";
import { type JsonSchema, veniceReference } from "../../../testkit/venice-reference.js";

const ref = veniceReference();
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

type Json = Record<string, unknown>;

/** What is wrong with one request the simulator received, against the reference (empty: nothing). */
function requestProblems(r: SimRequestRecord): string[] {
  const op = ref.operation(r.method, r.route);
  if (!op) return [`${r.method} ${r.route} is not in the reference`];
  const problems: string[] = [];
  for (const [name, value] of new URLSearchParams(r.query)) {
    const schema = ref.querySchema(r.method, r.route, name);
    if (!schema) problems.push(`query ${name} is not documented`);
    else problems.push(...ref.validate(schema, value).map((e) => `query ${name}: ${e}`));
  }
  if (r.method !== "POST") return problems;
  const schema = ref.requestSchema(r.method, r.route);
  if (!schema) return [...problems, "the reference documents no JSON body"];
  problems.push(...ref.validate(schema, r.body));
  problems.push(...ref.undocumentedFields(schema, r.body).map((p) => `${p} is not in the reference`));
  return problems;
}

function bearer(apiKey: string) {
  return { authorization: `Bearer ${apiKey}` };
}

async function post(apiKey: string, path: string, body: unknown) {
  return call(world.app, { method: "POST", path, headers: bearer(apiKey), body });
}

/** The newest call the simulator received on `route` (below /api/v1). */
function lastCall(route: string): SimRequestRecord {
  const r = world.sim.state.listRequests({ route }).at(-1);
  if (!r) throw new Error(`no call to ${route}`);
  return r;
}

/** Every documented field of a chat body (top level, venice_parameters, nested content parts). */
const RICH_CHAT = {
  model: "zai-org-glm-5-1",
  messages: [
    { role: "system", content: "Be brief." },
    {
      role: "user",
      content: [{ type: "text", text: "Say hi [[sim:tokens=4]]", cache_control: { type: "ephemeral" } }],
    },
  ],
  temperature: 0.5,
  top_p: 0.9,
  top_k: 40,
  min_p: 0.05,
  frequency_penalty: 0.1,
  presence_penalty: 0.1,
  repetition_penalty: 1.1,
  seed: 7,
  stop: ["\n\n"],
  stop_token_ids: [2],
  logprobs: false,
  parallel_tool_calls: true,
  tools: [
    {
      type: "function",
      function: { name: "lookup", description: "look up", parameters: { type: "object", properties: {} } },
    },
  ],
  tool_choice: "auto",
  response_format: { type: "json_object" },
  reasoning_effort: "low",
  prompt_cache_key: "conversation-1",
  prompt_cache_retention: "default",
  max_tokens: 50,
  venice_parameters: { strip_thinking_response: true, disable_thinking: true },
};

describe("every request the service sends upstream is one the reference documents", () => {
  let buyer: { apiKey: string; accountId: string };

  beforeAll(async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 100_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    buyer = await fundedBuyerKey(world.app, 10_000_000n);
  });

  test("chat, Responses, images, video quote/queue/retrieve/complete, models and rate limits: valid, nothing unlisted", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
    const undocumented = { logit_bias: { "50256": -100 }, service_tier: "auto", svc: { maxPriceCentsPerDollar: 80 } };
    const answers = [
      await post(buyer.apiKey, "/v1/chat/completions", { ...RICH_CHAT, ...undocumented }),
      await post(buyer.apiKey, "/v1/chat/completions", { ...RICH_CHAT, stream: true, stream_options: {} }),
      await post(buyer.apiKey, "/v1/responses", {
        model: "zai-org-glm-5-1",
        instructions: "Be brief.",
        input: [{ role: "user", content: "Say hi [[sim:tokens=4]]" }],
        temperature: 0.4,
        top_p: 0.9,
        reasoning: { effort: "low" },
        // the reference's Responses function tool nests `function` (as chat does)
        tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }],
        tool_choice: "auto",
        store: false,
        previous_response_id: "resp_1",
        metadata: { a: "b" },
        text: { format: { type: "text" } },
        truncation: "auto",
        user: "u-1",
        max_output_tokens: 50,
      }),
      await post(buyer.apiKey, "/v1/responses", { model: "zai-org-glm-5-1", input: "Say hi", stream: true }),
      await post(buyer.apiKey, "/v1/image/generate", {
        model: "venice-sd35",
        prompt: "a red fox",
        negative_prompt: "blur",
        seed: 3,
        hide_watermark: true,
        style_preset: "3D Model",
        n: 2,
        ...undocumented,
      }),
      await post(buyer.apiKey, "/v1/images/generations", {
        model: "venice-sd35",
        prompt: "a red fox",
        size: "1024x1536",
        moderation: "low",
        style: "vivid",
        user: "u-1",
      }),
      await post(buyer.apiKey, "/v1/video/quote", {
        model: "wan-2.6-text-to-video",
        prompt: "a fox in the snow",
        negative_prompt: "rain",
        duration: "5s",
        resolution: "720p",
        ...undocumented,
      }),
    ];
    for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
    const queued = await post(buyer.apiKey, "/v1/video/queue", {
      model: "wan-2.6-text-to-video",
      prompt: "a fox in the snow",
      negative_prompt: "rain",
      duration: "5s",
      resolution: "720p",
      ...undocumented,
    });
    expect(queued.status, JSON.stringify(queued.body)).toBe(200);
    const queueId = (queued.body as { queue_id: string }).queue_id;
    const media = await fetch(`${world.app.baseUrl}/v1/video/retrieve`, {
      method: "POST",
      headers: { ...bearer(buyer.apiKey), "content-type": "application/json" },
      body: JSON.stringify({ queue_id: queueId }),
    });
    expect([media.status, media.headers.get("content-type")]).toEqual([200, "video/mp4"]);
    await media.arrayBuffer();
    // a delivered job's media is deleted upstream (/video/complete)
    await expect.poll(() => world.sim.state.listRequests({ route: "/video/complete" }).length).toBe(1);
    // a supplier's key is checked on registration (/api_keys/rate_limits)
    await registerKey(world.app, (await fundedBuyerKey(world.app, 0n)).user, simKey(world.sim));

    const calls = world.sim.state.listRequests();
    const problems = calls.flatMap((r) => requestProblems(r).map((p) => `${r.method} ${r.route}: ${p}`));
    expect(problems).toEqual([]);
    // every route the service calls was seen (the catalog sync asked /models for each synced type)
    const seen = new Set(calls.map((r) => `${r.method} ${r.route}`));
    expect([...seen].sort()).toEqual(
      [
        "GET /api_keys/rate_limits",
        "GET /models",
        "POST /chat/completions",
        "POST /image/generate",
        "POST /responses",
        "POST /video/complete",
        "POST /video/queue",
        "POST /video/quote",
        "POST /video/retrieve",
      ].sort(),
    );
    expect(calls.every((r) => r.method === "GET" || r.body !== null)).toBe(true);
  });

  test("the check fails on a field the reference does not list, even where the schema allows extras", () => {
    // QueueVideoRequest and the Responses body allow extra properties; the check does not
    const queue = ref.requestSchema("POST", "/video/queue") as JsonSchema;
    const body = { model: "m", prompt: "p", duration: "5s" };
    expect(ref.validate(queue, { ...body, extra: 1 })).toEqual([]);
    expect(ref.undocumentedFields(queue, { ...body, extra: 1 })).toEqual(["extra"]);
    const chat = ref.requestSchema("POST", "/chat/completions") as JsonSchema;
    expect(
      ref.undocumentedFields(chat, {
        ...RICH_CHAT,
        venice_parameters: { include_venice_system_prompt: false, made_up: true },
        messages: [{ role: "user", content: "x", not_a_message_field: 1 }],
      }),
    ).toEqual(["messages[0].not_a_message_field", "venice_parameters.made_up"]);
    expect(ref.undocumentedFields(chat, RICH_CHAT)).toEqual([]);
  });
});

describe("only documented fields go upstream", () => {
  let buyer: { apiKey: string; accountId: string };

  beforeAll(async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 100_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    buyer = await fundedBuyerKey(world.app, 10_000_000n);
  });

  test("chat: undocumented fields (top level and in venice_parameters) are dropped, documented ones go", async () => {
    const r = await post(buyer.apiKey, "/v1/chat/completions", {
      model: "zai-org-glm-5-1",
      messages: [{ role: "user", content: "hi" }],
      temperature: 0.3,
      logit_bias: { "1": 2 },
      service_tier: "flex",
      web_search_options: {},
      fallbacks: [],
      venice_parameters: { strip_thinking_response: true, not_documented: 1, enable_web_search: "off" },
      stream_options: { include_usage: false, not_documented: 1 },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const sent = lastCall("/chat/completions").body as Json;
    expect(sent).toMatchObject({ model: "zai-org-glm-5-1", temperature: 0.3, stream: false });
    for (const k of ["logit_bias", "service_tier", "web_search_options", "fallbacks", "stream_options"])
      expect(sent, k).not.toHaveProperty(k);
    expect(sent.venice_parameters).toEqual({
      include_venice_system_prompt: false,
      strip_thinking_response: true,
      enable_web_search: "off",
    });
    const streamed = await call(world.app, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: bearer(buyer.apiKey),
      body: {
        model: "zai-org-glm-5-1",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: false, not_documented: 1 },
      },
    });
    expect(streamed.status).toBe(200);
    expect((lastCall("/chat/completions").body as Json).stream_options).toEqual({ include_usage: true });
  });

  test("Responses: instructions go as a leading system message; storage and other unlisted fields are dropped", async () => {
    const r = await post(buyer.apiKey, "/v1/responses", {
      model: "zai-org-glm-5-1",
      instructions: "Answer in French.",
      input: "hello",
      store: true,
      previous_response_id: "resp_1",
      background: false,
      metadata: { a: "b" },
      text: { format: { type: "text" } },
      user: "u-1",
      venice_parameters: { include_search_results_in_stream: false, strip_thinking_response: true },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const sent = lastCall("/responses").body as Json;
    expect(Object.keys(sent).sort()).toEqual(["input", "max_output_tokens", "model", "stream", "venice_parameters"]);
    expect(sent.input).toEqual([
      { role: "system", content: "Answer in French." },
      { role: "user", content: "hello" },
    ]);
    // strip_thinking_response is a chat parameter: the Responses body does not list it
    expect(sent.venice_parameters).toEqual({
      include_venice_system_prompt: false,
      include_search_results_in_stream: false,
    });
    // the upstream counts the instructions as the simulator always did: same usage as before the mapping
    const usage = (r.body as { usage: { input_tokens: number } }).usage;
    expect(usage.input_tokens).toBe(4 + Math.ceil("Answer in French.".length / 4) + 4 + Math.ceil(5 / 4));

    const items = await post(buyer.apiKey, "/v1/responses", {
      model: "zai-org-glm-5-1",
      instructions: "Answer in French.",
      input: [{ type: "message", role: "user", content: "hello" }],
    });
    expect(items.status).toBe(200);
    expect((lastCall("/responses").body as Json).input).toEqual([
      { role: "system", content: "Answer in French." },
      { type: "message", role: "user", content: "hello" },
    ]);
  });

  test.each([
    ["/v1/chat/completions", { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hi" }] }],
    ["/v1/responses", { model: "zai-org-glm-5-1", input: "hi" }],
  ])("%s: fallbacks is 400 invalid_request naming it; nothing sent, held or charged", async (path, body) => {
    const before = {
      calls: world.sim.state.listRequests().length,
      account: await world.app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } }),
      requests: await world.app.rt.db.inferenceRequest.count({ where: { accountId: buyer.accountId } }),
    };
    const r = await post(buyer.apiKey, path, { ...body, fallbacks: [{ model: "qwen3-4b" }] });
    expect(r.status).toBe(400);
    expect((r.body as { error: Json }).error).toMatchObject({ code: "invalid_request", field: "fallbacks" });
    expect((r.body as { error: { message: string } }).error.message).toMatch(/^fallbacks is refused/);
    const account = await world.app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } });
    expect([account.confirmedMicroUsdc, account.reservedMicroUsdc]).toEqual([
      before.account.confirmedMicroUsdc,
      before.account.reservedMicroUsdc,
    ]);
    expect(await world.app.rt.db.inferenceRequest.count({ where: { accountId: buyer.accountId } })).toBe(
      before.requests,
    );
    expect(world.sim.state.listRequests().length).toBe(before.calls);
  });

  test("native images: undocumented fields are dropped", async () => {
    const r = await post(buyer.apiKey, "/v1/image/generate", {
      model: "venice-sd35",
      prompt: "a fox",
      seed: 1,
      background: "transparent",
      made_up: true,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const sent = lastCall("/image/generate").body as Json;
    expect(Object.keys(sent).sort()).toEqual(["format", "model", "prompt", "seed", "variants"]);
  });

  test("the video quote carries the pricing inputs only (no prompt, no image URLs); the queue gets the job", async () => {
    const job = {
      model: "kling-2.6-pro-image-to-video",
      prompt: "the fox runs",
      negative_prompt: "rain",
      duration: "5s",
      image_url: "https://example.com/fox.png",
      end_image_url: "https://example.com/end.png",
      made_up: 1,
    };
    const quoted = await post(buyer.apiKey, "/v1/video/quote", job);
    expect(quoted.status, JSON.stringify(quoted.body)).toBe(200);
    const sent = lastCall("/video/quote").body as Json;
    expect(sent).toEqual({ model: "kling-2.6-pro-image-to-video", duration: "5s" });
    const pricingInputs: readonly string[] = VENICE_REQUEST_FIELDS["/video/quote"].fields;
    expect(Object.keys(sent).every((k) => pricingInputs.includes(k))).toBe(true);

    world.sim.state.setVideoConfig({ processingPolls: 5, renderMs: 0, defaultOutcome: "mp4" });
    const queued = await post(buyer.apiKey, "/v1/video/queue", job);
    expect(queued.status, JSON.stringify(queued.body)).toBe(200);
    // the queue asked its own quote with the pricing inputs only too
    expect(lastCall("/video/quote").body).toEqual({ model: "kling-2.6-pro-image-to-video", duration: "5s" });
    const { made_up: _, ...documented } = job;
    expect(lastCall("/video/queue").body).toEqual(documented);
  });

  test("the quote's unit is the reference's: USD, taken as DIEM one for one, plus the markup", async () => {
    expect(ref.operation("POST", "/video/quote")?.responses?.["200"]).toBeDefined();
    expect(String((ref.operation("POST", "/video/quote") as { description?: string }).description)).toMatch(
      /Returns the price in USD/,
    );
    const quoted = await post(buyer.apiKey, "/v1/video/quote", {
      model: "wan-2.6-text-to-video",
      prompt: "a fox",
      duration: "5s",
      resolution: "720p",
    });
    expect(quoted.status).toBe(200);
    // the simulator quotes 0.6 (USD); the job's DIEM is 0.6 + 5% markup
    const q = quoted.body as { quote_diem: string; svc: { upstream_quote_diem: string } };
    expect([q.svc.upstream_quote_diem, q.quote_diem]).toEqual(["0.600000", "0.630000"]);
  });
});

// ---------------------------------------------------------------------------------------------------
// The simulator's answers against the reference

/** A fault for each documented refusal the simulator gives on request. */
const FAULT_FOR_STATUS: Record<string, SimFaultKind> = {
  "401": "http_401_pro_only",
  "402": "http_402_balance",
  "403": "http_403_region",
  "409": "http_409_consent",
  "413": "http_413",
  "415": "http_415",
  "422": "http_422_content_policy",
  "429": "http_429",
  "500": "http_500",
  "503": "http_503",
  "504": "http_504",
};

interface Answer {
  status: number;
  type: string;
  headers: Headers;
  json: unknown;
  text: string;
}

const KEY = "sk-ref";
const POOR = "sk-poor";
const REVOKED = "sk-revoked";

async function ask(sim: UpstreamSimulator, method: string, path: string, body?: unknown, key: string | null = KEY) {
  const headers: Record<string, string> = {};
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${sim.baseUrl}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const type = (res.headers.get("content-type") ?? "").split(";")[0] ?? "";
  const text = type.startsWith("video/") ? "" : await res.text();
  if (type.startsWith("video/")) await res.arrayBuffer().catch(() => undefined);
  let json: unknown = null;
  if (type === "application/json") json = JSON.parse(text);
  return { status: res.status, type, headers: res.headers, json, text } satisfies Answer;
}

/** Problems of one answer against the reference (its status documented, its body of the documented shape). */
function answerProblems(method: string, path: string, a: Answer): string[] {
  const route = path.split("?")[0] as string;
  if (!ref.statuses(method, route).includes(String(a.status))) return [`status ${a.status} is not documented`];
  if (a.type === "text/event-stream") return []; // streams: their usage is checked below
  const schema = ref.responseSchema(method, route, a.status, a.type);
  if (!schema) return [`${a.status} in ${a.type} is not documented`];
  if (a.type !== "application/json") return [];
  return ref.validate(schema, a.json);
}

/** `value` at a dotted path (`a.b[].c`: every element of `b`); true when every reached leaf is present. */
function has(value: unknown, path: string): boolean {
  const [head, ...rest] = path.split(".");
  if (head === undefined) return true;
  const isArray = head.endsWith("[]");
  const key = isArray ? head.slice(0, -2) : head;
  const v = (value as Json | null)?.[key];
  if (v === undefined) return false;
  if (isArray) return Array.isArray(v) && v.length > 0 && v.every((x) => has(x, rest.join(".")));
  return rest.length === 0 || has(v, rest.join("."));
}

/** Whether the reference's schema documents `path` (any union branch listing it). */
function documents(schema: unknown, path: string): boolean {
  const [head, ...rest] = path.split(".");
  if (head === undefined) return true;
  const s = schema as JsonSchema;
  const isArray = head.endsWith("[]");
  const key = isArray ? head.slice(0, -2) : head;
  const branches = [s, ...(["anyOf", "oneOf", "allOf"] as const).flatMap((u) => (s[u] as JsonSchema[]) ?? [])];
  return branches.some((b) => {
    const p = (b.properties as Record<string, JsonSchema> | undefined)?.[key];
    if (!p) return branches.length > 1 && b !== s && documents(b, path);
    const next = isArray ? (p.items as JsonSchema) : p;
    return rest.length === 0 || documents(next, rest.join("."));
  });
}

/**
 * The fields of the simulator's answers the service reads (src/domain, src/adapters/upstream): each
 * must be documented by the reference and present in the simulator's answer, so dropping one from
 * the simulator fails here.
 */
const READ_BY_US: { name: string; method: string; path: string; body?: unknown; status: number; fields: string[] }[] = [
  {
    name: "chat usage (settlement: usage.ts)",
    method: "POST",
    path: "/chat/completions",
    body: {
      model: "claude-sonnet-4-6",
      messages: [
        { role: "user", content: `${"x".repeat(400)} [[sim:cached_tokens=20]] [[sim:cache_write_tokens=30]]` },
      ],
    },
    status: 200,
    fields: [
      "id",
      "created",
      "model",
      "choices[].message",
      "choices[].finish_reason",
      "usage.prompt_tokens",
      "usage.completion_tokens",
      "usage.prompt_tokens_details.cached_tokens",
      "usage.prompt_tokens_details.cache_creation_input_tokens",
    ],
  },
  {
    name: "Responses usage and status",
    method: "POST",
    path: "/responses",
    body: { model: "zai-org-glm-5-1", input: "hi [[sim:cached_tokens=2]]" },
    status: 200,
    fields: [
      "status",
      "output",
      "usage.input_tokens",
      "usage.output_tokens",
      "usage.input_tokens_details.cached_tokens",
    ],
  },
  {
    name: "images",
    method: "POST",
    path: "/image/generate",
    body: { model: "venice-sd35", prompt: "a fox" },
    status: 200,
    fields: ["id", "images"],
  },
  {
    name: "video quote",
    method: "POST",
    path: "/video/quote",
    body: { model: "wan-2.6-text-to-video", duration: "5s", resolution: "720p" },
    status: 200,
    fields: ["quote"],
  },
  {
    name: "video queue",
    method: "POST",
    path: "/video/queue",
    body: { model: "wan-2.6-text-to-video", prompt: "a fox", duration: "5s", resolution: "720p" },
    status: 200,
    fields: ["queue_id", "model"],
  },
  {
    name: "video queue of a private model",
    method: "POST",
    path: "/video/queue",
    body: { model: "grok-imagine-text-to-video-private", prompt: "a fox", duration: "6s" },
    status: 200,
    fields: ["queue_id", "download_url"],
  },
  {
    name: "text catalog",
    method: "GET",
    path: "/models?type=text",
    status: 200,
    fields: [
      "data[].id",
      "data[].type",
      "data[].model_spec.name",
      "data[].model_spec.offline",
      "data[].model_spec.availableContextTokens",
      "data[].model_spec.capabilities",
    ],
  },
  {
    name: "image catalog",
    method: "GET",
    path: "/models?type=image",
    status: 200,
    fields: ["data[].id", "data[].type", "data[].model_spec.pricing", "data[].model_spec.constraints"],
  },
  {
    name: "video catalog",
    method: "GET",
    path: "/models?type=video",
    status: 200,
    fields: [
      "data[].id",
      "data[].type",
      "data[].model_spec.constraints.durations",
      "data[].model_spec.constraints.model_type",
    ],
  },
  {
    name: "key status (rate limits)",
    method: "GET",
    path: "/api_keys/rate_limits",
    status: 200,
    fields: ["data.accessPermitted", "data.balances.DIEM", "data.balances.USD", "data.nextEpochBegins"],
  },
];

describe("the simulator answers as the reference documents", () => {
  let sim: UpstreamSimulator;

  beforeAll(async () => {
    sim = await startSim([
      { key: KEY, diemMicro: 100_000_000n },
      { key: POOR, diemMicro: 0n },
      { key: REVOKED, diemMicro: 1_000_000n, revoked: true },
    ]);
    return () => sim.close();
  });

  test("the fields the service reads are documented and the simulator sends them", async () => {
    const problems: string[] = [];
    for (const c of READ_BY_US) {
      const route = c.path.split("?")[0] as string;
      const schema = ref.responseSchema(c.method, route, c.status);
      const a = await ask(sim, c.method, c.path, c.body);
      expect(a.status, `${c.name}: ${a.text}`).toBe(c.status);
      problems.push(...answerProblems(c.method, c.path, a).map((p) => `${c.name}: ${p}`));
      for (const f of c.fields) {
        if (!documents(schema, f)) problems.push(`${c.name}: ${f} is read but not documented`);
        if (!has(a.json, f)) problems.push(`${c.name}: the simulator does not send ${f}`);
      }
    }
    expect(problems).toEqual([]);
  });

  test("the headers the service reads are documented and sent", async () => {
    const spec = readFileSync(new URL("../../../vendor/venice/api-spec.mdx", import.meta.url), "utf8");
    for (const h of ["x-venice-balance-diem", "x-venice-is-content-violation"]) expect(spec).toContain(`\`${h}\``);
    for (const [path, body] of [
      ["/chat/completions", { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hi" }] }],
      ["/responses", { model: "zai-org-glm-5-1", input: "hi" }],
      ["/image/generate", { model: "venice-sd35", prompt: "a fox" }],
      ["/video/queue", { model: "wan-2.6-text-to-video", prompt: "a fox", duration: "5s", resolution: "720p" }],
    ] as const) {
      const a = await ask(sim, "POST", path, body);
      expect([path, a.status, a.headers.get("x-venice-balance-diem")]).toEqual([path, 200, expect.any(String)]);
    }
    const blocked = await ask(sim, "POST", "/image/generate", {
      model: "venice-sd35",
      prompt: "[[sim:content_violation]]",
    });
    expect(blocked.headers.get("x-venice-is-content-violation")).toBe("true");
  });

  test("streamed usage has the documented usage shape (cache reads and writes included)", async () => {
    const chat = ref.responseSchema("POST", "/chat/completions", 200) as JsonSchema;
    const usageSchema = (chat.properties as Record<string, JsonSchema>).usage as JsonSchema;
    const a = await ask(sim, "POST", "/chat/completions", {
      model: "claude-sonnet-4-6",
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: "user", content: `${"x".repeat(400)} [[sim:cached_tokens=20]] [[sim:cache_write_tokens=30]]` },
      ],
    });
    const usage = jsonFrames(parseSse(a.text)).find((f) => f.usage)?.usage as Json;
    expect(ref.validate(usageSchema, usage)).toEqual([]);
    expect(usage.prompt_tokens_details).toEqual({ cached_tokens: 20, cache_creation_input_tokens: 30 });

    const responses = ref.responseSchema("POST", "/responses", 200) as JsonSchema;
    const r = await ask(sim, "POST", "/responses", { model: "zai-org-glm-5-1", input: "hi", stream: true });
    const done = jsonFrames(parseSse(r.text)).find((f) => f.type === "response.completed")?.response;
    expect(ref.validate(responses, done)).toEqual([]);
  });

  test("every documented status of every route the service calls: the simulator gives it, in the documented shape", async () => {
    const chat = { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hi" }] };
    const responses = { model: "zai-org-glm-5-1", input: "hi" };
    const image = { model: "venice-sd35", prompt: "a fox" };
    const openAiImage = { model: "venice-sd35", prompt: "a fox" };
    const video = { model: "wan-2.6-text-to-video", prompt: "a fox", duration: "5s", resolution: "720p" };
    const quote = { model: "wan-2.6-text-to-video", duration: "5s", resolution: "720p" };
    const queue = async (prompt = "a fox") =>
      (await ask(sim, "POST", "/video/queue", { ...video, prompt })).json as { queue_id: string };
    sim.state.setVideoConfig({ processingPolls: 1, renderMs: 0, defaultOutcome: "mp4" });

    /** How each route's answers are produced: its good body, a bad one, and the answers a fault cannot give. */
    const routes: {
      method: string;
      path: string;
      good?: () => Promise<unknown>;
      bad?: unknown;
      special?: Record<string, () => Promise<Answer>>;
    }[] = [
      { method: "POST", path: "/chat/completions", good: async () => chat, bad: { ...chat, temperature: 5 } },
      { method: "POST", path: "/responses", good: async () => responses, bad: { model: "zai-org-glm-5-1" } },
      { method: "POST", path: "/image/generate", good: async () => image, bad: { ...image, variants: 9 } },
      { method: "POST", path: "/images/generations", good: async () => openAiImage, bad: { ...openAiImage, n: 3 } },
      { method: "POST", path: "/video/quote", good: async () => quote, bad: { ...quote, duration: "99s" } },
      {
        method: "POST",
        path: "/video/queue",
        good: async () => video,
        bad: { ...video, duration: "99s" },
      },
      {
        method: "POST",
        path: "/video/retrieve",
        good: async () => ({ model: video.model, queue_id: (await queue()).queue_id }),
        bad: { model: video.model },
        special: {
          "200 video/mp4": async () => {
            const { queue_id } = await queue();
            await ask(sim, "POST", "/video/retrieve", { model: video.model, queue_id });
            return ask(sim, "POST", "/video/retrieve", { model: video.model, queue_id });
          },
          "404": () =>
            ask(sim, "POST", "/video/retrieve", {
              model: video.model,
              queue_id: "00000000-0000-4000-8000-000000000000",
            }),
          "422": async () => {
            const { queue_id } = await queue("a fox [[sim:video=content_policy]] [[sim:polls=0]]");
            return ask(sim, "POST", "/video/retrieve", { model: video.model, queue_id });
          },
        },
      },
      {
        method: "POST",
        path: "/video/complete",
        good: async () => ({ model: video.model, queue_id: (await queue()).queue_id }),
        bad: { queue_id: 7 },
      },
      { method: "GET", path: "/models?type=text" },
      { method: "GET", path: "/api_keys/rate_limits" },
    ];

    const problems: string[] = [];
    const missing: string[] = [];
    for (const r of routes) {
      const route = r.path.split("?")[0] as string;
      const body = async () => (r.good ? await r.good() : undefined);
      for (const status of ref.statuses(r.method, route)) {
        const answers: [string, Answer][] = [];
        const special = r.special?.[status];
        if (special) answers.push([status, await special()]);
        else if (status === "200") answers.push([status, await ask(sim, r.method, r.path, await body())]);
        else if (status === "400" && r.bad !== undefined)
          answers.push([status, await ask(sim, r.method, r.path, r.bad)]);
        else if (status === "401") {
          answers.push(["401 revoked", await ask(sim, r.method, r.path, await body(), REVOKED)]);
          if (r.method === "POST") {
            sim.state.injectFault(KEY, { kind: "http_401_pro_only", route, count: 1 });
            answers.push(["401 pro only", await ask(sim, r.method, r.path, await body())]);
          }
        } else if (status === "402" && r.method === "POST") {
          answers.push(["402 x402 discovery", await ask(sim, r.method, r.path, await body(), null)]);
          sim.state.injectFault(KEY, { kind: "http_402_balance", route, count: 1 });
          answers.push(["402 balance", await ask(sim, r.method, r.path, await body())]);
          sim.state.injectFault(KEY, { kind: "http_402_spend_limit", route, count: 1 });
          answers.push(["402 spend limit", await ask(sim, r.method, r.path, await body())]);
        } else if (FAULT_FOR_STATUS[status]) {
          const b = await body();
          sim.state.injectFault(KEY, { kind: FAULT_FOR_STATUS[status] as SimFaultKind, route, count: 1 });
          answers.push([status, await ask(sim, r.method, r.path, b)]);
        } else {
          missing.push(`${r.method} ${route} ${status}`);
          continue;
        }
        if (r.special?.["200 video/mp4"] && status === "200")
          answers.push(["200 video/mp4", await (r.special["200 video/mp4"] as () => Promise<Answer>)()]);
        for (const [label, a] of answers) {
          const where = `${r.method} ${route} ${label}`;
          if (String(a.status) !== status) problems.push(`${where}: answered ${a.status} ${a.text.slice(0, 200)}`);
          problems.push(...answerProblems(r.method, r.path, a).map((p) => `${where}: ${p}`));
        }
      }
    }
    expect(missing).toEqual([]);
    expect(problems).toEqual([]);
    // the poor key's natural refusal is the documented 402 too
    const poor = await ask(sim, "POST", "/chat/completions", chat, POOR);
    expect([poor.status, answerProblems("POST", "/chat/completions", poor)]).toEqual([402, []]);
  });

  test("answers the reference does not document, kept on purpose (each still undocumented)", async () => {
    // observed upstream behaviour the reference leaves out (/work/shared/upstream/VENICE_API.md §3, §6):
    // an unknown model is 404; a context overflow is OpenAI-shaped; /video/complete on a gone job is 404
    const unknownModel = await ask(sim, "POST", "/chat/completions", {
      model: "no-such-model",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(unknownModel.status).toBe(404);
    expect(ref.statuses("POST", "/chat/completions")).not.toContain("404");
    const overflow = await ask(sim, "POST", "/chat/completions", {
      model: "qwen3-4b",
      messages: [{ role: "user", content: "x".repeat(200_000) }],
    });
    expect([overflow.status, (overflow.json as { error: { code: string } }).error.code]).toEqual([
      400,
      "context_length_exceeded",
    ]);
    expect(answerProblems("POST", "/chat/completions", overflow)).not.toEqual([]);
    const gone = await ask(sim, "POST", "/video/complete", {
      model: "wan-2.6-text-to-video",
      queue_id: "00000000-0000-4000-8000-000000000000",
    });
    expect(gone.status).toBe(404);
    expect(ref.statuses("POST", "/video/complete")).not.toContain("404");
  });
});
