import { beforeEach, describe, expect } from "vitest";
import {
  anthropicErrorBody,
  anthropicMessageResponse,
  countTokensResponse,
  parseCountTokensRequest,
} from "../../../src/contract/messages.js";
import {
  chatPromptOf,
  messagesPromptEstimate,
} from "../../../src/domain/inference/modalities/messages/messages-translate.js";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import {
  addSupply,
  confirmedOf,
  emptyBook,
  endedRequest,
  fundedBuyerKey,
  requestByReference,
} from "../../../testkit/market.js";

/**
 * `POST /v1/messages` and `POST /v1/messages/count_tokens` on the wire (docs/decisions.md
 * "Anthropic Messages API"): the credentials (`x-api-key` or Bearer), Anthropic's error shape with
 * the service's code and headers, no state change on bad input, the SSE event sequence, an
 * incomplete stream's `error` event with its bill, fall-forward before content, and the token count.
 */

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

beforeEach(async () => {
  await emptyBook(world.app);
  world.sim.state.clearFaults();
});

type Json = Record<string, unknown>;

async function post(path: string, headers: Record<string, string>, body: unknown) {
  const res = await fetch(`${world.app.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "anthropic-version": "2023-06-01", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Json = {};
  try {
    json = JSON.parse(text) as Json;
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

const apiKeyHeader = (apiKey: string) => ({ "x-api-key": apiKey });
const hi = (extra: Json = {}) => ({
  model: MODEL,
  max_tokens: 100,
  messages: [{ role: "user", content: "hi [[sim:tokens=10]]" }],
  ...extra,
});

/** Anthropic's error body, the service's code beside it, the headers. */
function expectAnthropicError(
  r: Awaited<ReturnType<typeof post>>,
  status: number,
  type: string,
  code: string,
  retry?: boolean,
) {
  expect(r.status, r.text).toBe(status);
  expect(r.json.type).toBe("error");
  expect(r.json.error).toMatchObject({ type, code, message: expect.any(String), details: { error_code: code } });
  expect(r.json.request_id).toBe(r.headers.get("x-svc-request-id"));
  expect(r.headers.get("x-svc-error-code")).toBe(code);
  if (retry !== undefined) expect(r.headers.get("x-should-retry")).toBe(String(retry));
  // what /openapi.json documents
  expect(anthropicErrorBody.safeParse(r.json).error).toBeUndefined();
}

interface Event {
  event: string | undefined;
  json: Json;
}

function events(raw: string): Event[] {
  return raw
    .split("\n\n")
    .filter((b) => b.trim().length > 0)
    .map((block) => {
      const lines = block.split("\n");
      const data = lines
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6))
        .join("\n");
      return { event: lines.find((l) => l.startsWith("event: "))?.slice(7), json: JSON.parse(data) as Json };
    });
}

describe("credentials", () => {
  test("x-api-key or Bearer; both naming different keys, none, or a session cookie: 401 in Anthropic's shape", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const other = await fundedBuyerKey(world.app, 5_000_000n);
    expect((await post("/v1/messages", apiKeyHeader(buyer.apiKey), hi())).status).toBe(200);
    expect((await post("/v1/messages", { authorization: `Bearer ${buyer.apiKey}` }, hi())).status).toBe(200);
    const same = { authorization: `Bearer ${buyer.apiKey}`, "x-api-key": buyer.apiKey };
    expect((await post("/v1/messages", same, hi())).status).toBe(200);

    const before = await confirmedOf(world.app, buyer.accountId);
    const both = await post(
      "/v1/messages",
      { authorization: `Bearer ${buyer.apiKey}`, "x-api-key": other.apiKey },
      hi(),
    );
    expectAnthropicError(both, 401, "authentication_error", "authentication_failed", false);
    expect(both.json.error).toMatchObject({ message: expect.stringContaining("different keys") });
    expectAnthropicError(await post("/v1/messages", {}, hi()), 401, "authentication_error", "authentication_failed");
    expectAnthropicError(
      await post("/v1/messages", apiKeyHeader("svc_not_a_key"), hi()),
      401,
      "authentication_error",
      "authentication_failed",
    );
    const user = await signIn(world.app);
    expectAnthropicError(
      await post("/v1/messages", { cookie: user.cookie, "x-api-key": buyer.apiKey }, hi()),
      401,
      "authentication_error",
      "authentication_failed",
    );
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
  });

  test("a key's policy applies: a model it may not call is 403 permission_error; its budget 402 billing_error", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const mint = async (policy: Json) => {
      const res = await fetch(`${world.app.baseUrl}/v1/account/api-keys`, {
        method: "POST",
        headers: { "content-type": "application/json", cookie: buyer.user.cookie },
        body: JSON.stringify({ name: `p-${crypto.randomUUID().slice(0, 8)}`, ...policy }),
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { apiKey: string }).apiKey;
    };
    const narrow = await mint({ models: ["qwen3-4b"] });
    expectAnthropicError(
      await post("/v1/messages", apiKeyHeader(narrow), hi()),
      403,
      "permission_error",
      "model_not_allowed",
    );
    expectAnthropicError(
      await post("/v1/messages/count_tokens", apiKeyHeader(narrow), { model: MODEL, messages: hi().messages }),
      403,
      "permission_error",
      "model_not_allowed",
    );
    const poor = await mint({ limitUsdc: "0.000001", limitReset: "daily" });
    const r = await post("/v1/messages", apiKeyHeader(poor), hi());
    expectAnthropicError(r, 402, "billing_error", "key_budget_exceeded", false);
    // refused after the request was opened for routing: it carries its support reference
    expect(r.headers.get("x-svc-support-reference")).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.json.error).toMatchObject({ supportReference: r.headers.get("x-svc-support-reference") });
  });
});

describe("bad input: Anthropic's error shape, the service's code, nothing changed", () => {
  test.each([
    ["no max_tokens", { model: MODEL, messages: [{ role: "user", content: "x" }] }, "max_tokens"],
    ["no messages", { model: MODEL, max_tokens: 10 }, "messages"],
    ["a tool role in messages", hi({ messages: [{ role: "tool", content: "x" }] }), "messages.0.role"],
    [
      "an image in a system message",
      hi({
        messages: [
          { role: "system", content: [{ type: "image", source: { type: "url", url: "https://example.com/a.png" } }] },
        ],
      }),
      "messages.0.content.0.type",
    ],
    [
      "a document block",
      hi({ messages: [{ role: "user", content: [{ type: "document", source: {} }] }] }),
      "messages.0.content.0.type",
    ],
    [
      "an image of an unknown media type",
      hi({
        messages: [
          {
            role: "user",
            content: [{ type: "image", source: { type: "base64", media_type: "image/bmp", data: "x" } }],
          },
        ],
      }),
      "messages.0.content.0.source.media_type",
    ],
    ["temperature above 1", hi({ temperature: 1.5 }), "temperature"],
    ["five stop sequences", hi({ stop_sequences: ["a", "b", "c", "d", "e"] }), "stop_sequences"],
    ["the web search server tool", hi({ tools: [{ type: "web_search_20250305", name: "web_search" }] }), "tools"],
    ["a tool without input_schema", hi({ tools: [{ name: "t" }] }), "tools.0.input_schema"],
    ["an unknown tool_choice", hi({ tool_choice: { type: "sometimes" } }), "tool_choice.type"],
    ["a model suffix", hi({ model: `${MODEL}:enable_web_search=on` }), "model"],
  ] as const)("%s → 400 invalid_request_error", async (_label, body, field) => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await post("/v1/messages", apiKeyHeader(buyer.apiKey), body);
    expectAnthropicError(r, 400, "invalid_request_error", "invalid_request", false);
    expect(r.json.error).toMatchObject({ field });
    expect(r.headers.get("x-svc-support-reference")).toBeNull();
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    expect(await world.app.rt.db.inferenceRequest.count({ where: { accountId: buyer.accountId } })).toBe(0);
  });

  test("malformed JSON, a non-object body, an unknown model, a GET: never a 500, always Anthropic's shape", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const h = apiKeyHeader(buyer.apiKey);
    expectAnthropicError(await post("/v1/messages", h, "{not json"), 400, "invalid_request_error", "invalid_request");
    expectAnthropicError(await post("/v1/messages", h, "[1,2]"), 400, "invalid_request_error", "invalid_request");
    expectAnthropicError(
      await post("/v1/messages", h, hi({ model: "no-such-model" })),
      404,
      "not_found_error",
      "model_not_found",
    );
    expectAnthropicError(
      await post("/v1/messages/count_tokens", h, {
        model: "no-such-model",
        messages: [{ role: "user", content: "x" }],
      }),
      404,
      "not_found_error",
      "model_not_found",
    );
    const get = await fetch(`${world.app.baseUrl}/v1/messages`, { headers: h });
    expect(get.status).toBe(404);
    expect(await get.json()).toMatchObject({ type: "error", error: { type: "not_found_error", code: "not_found" } });
  });

  test("unknown fields are ignored and not forwarded (the upstream's chat body is strict)", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await post(
      "/v1/messages",
      apiKeyHeader(buyer.apiKey),
      hi({
        metadata: { user_id: "u-1" },
        service_tier: "auto",
        container: null,
        future_field: { anything: true },
        system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
        temperature: 0.5,
        top_p: 0.9,
        top_k: 40,
        stop_sequences: ["\n\nHuman:"],
        thinking: { type: "disabled" },
      }),
    );
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ type: "message", role: "assistant", stop_reason: "end_turn" });
    expect(anthropicMessageResponse.safeParse(r.json).error).toBeUndefined();
  });
});

describe("supply errors carry the support reference and say whether to retry", () => {
  test("no offer at or below the ceiling: 503 overloaded_error no_eligible_supply, x-should-retry false, hints", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 70, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n, 40);
    const r = await post("/v1/messages", apiKeyHeader(buyer.apiKey), hi());
    expectAnthropicError(r, 503, "overloaded_error", "no_eligible_supply", false);
    const ref = r.headers.get("x-svc-support-reference");
    expect(ref).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.headers.get("x-svc-cheapest-posted-cents")).toBe("70");
    expect(r.json.error).toMatchObject({ supportReference: ref, buyerMaxCents: 40, cheapestPostedCents: 70 });
  });

  test("a balance too low: 402 billing_error insufficient_balance", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 0n);
    expectAnthropicError(
      await post("/v1/messages", apiKeyHeader(buyer.apiKey), hi()),
      402,
      "billing_error",
      "insufficient_balance",
      false,
    );
  });
});

describe("the stream on the wire", () => {
  test("message_start, ping, blocks, message_delta with the cost, message_stop; event names are the JSON types", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const res = await fetch(`${world.app.baseUrl}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": buyer.apiKey },
      body: JSON.stringify(
        hi({ stream: true, messages: [{ role: "user", content: "hi [[sim:tokens=9]] [[sim:chunks=3]]" }] }),
      ),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("x-svc-cost-usdc")).toBeNull();
    const ref = res.headers.get("x-svc-support-reference");
    const raw = await res.text();
    expect(raw).not.toContain("[DONE]");
    const evs = events(raw);
    for (const e of evs) expect(e.json.type).toBe(e.event);
    expect(evs.map((e) => e.event)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(evs[0]?.json.message).toMatchObject({ type: "message", role: "assistant", model: MODEL, content: [] });
    const delta = evs.at(-2)?.json as Json & { usage: Json & { cost_details: Json } };
    const change = before - (await confirmedOf(world.app, buyer.accountId));
    expect(delta.delta).toEqual({ stop_reason: "end_turn", stop_sequence: null });
    expect(delta.usage).toMatchObject({ output_tokens: 9, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 });
    expect(delta.costUsdc).toBe(formatDecimal6(change));
    expect(delta.usage.cost_details.cost_usdc).toBe(formatDecimal6(change));
    expect(delta.supportReference).toBe(ref);
    const row = await endedRequest(world.app, ref ?? "");
    expect(row).toMatchObject({ route: "messages", stream: true, status: "succeeded", completionTokens: 9 });
    expect(delta.usage.input_tokens).toBe(row?.promptTokens);
  });

  test("a failure before the first content falls forward invisibly to the next offer", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 40, quantityMicroDiem: 50_000_000n },
      { priceCents: 45, quantityMicroDiem: 50_000_000n },
    ]);
    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "midstream_error", afterChunks: 0 });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await post("/v1/messages", apiKeyHeader(buyer.apiKey), hi({ stream: true }));
    const evs = events(r.text);
    expect(evs.map((e) => e.event)).not.toContain("error");
    expect(evs.filter((e) => e.event === "message_start")).toHaveLength(1);
    expect(evs.at(-1)?.event).toBe("message_stop");
    expect(evs.at(-2)?.json.clearingPriceCents).toBe(45);
  });

  test.each([
    ["a truncated stream", { kind: "truncate_stream", afterChunks: 2 }],
    ["an upstream error after content", { kind: "midstream_error", afterChunks: 2 }],
  ] as const)(
    "%s: billed on estimated usage, then an error event with the cost; no message_stop",
    async (_l, fault) => {
      const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
      world.sim.state.injectFault(supply.keys[0]?.secret ?? "", fault);
      const buyer = await fundedBuyerKey(world.app, 5_000_000n);
      const before = await confirmedOf(world.app, buyer.accountId);
      const r = await post(
        "/v1/messages",
        apiKeyHeader(buyer.apiKey),
        hi({ stream: true, max_tokens: 100, messages: [{ role: "user", content: "hello [[sim:tokens=60]]" }] }),
      );
      expect(r.status).toBe(200);
      const evs = events(r.text);
      const names = evs.map((e) => e.event);
      expect(names).not.toContain("message_stop");
      expect(names).not.toContain("message_delta");
      const last = evs.at(-1)?.json as Json & { error: Json };
      expect(evs.at(-1)?.event).toBe("error");
      const ref = r.headers.get("x-svc-support-reference");
      expect(last.error).toMatchObject({
        type: "api_error",
        code: "stream_incomplete",
        details: { error_code: "stream_incomplete" },
        supportReference: ref,
      });
      const change = before - (await confirmedOf(world.app, buyer.accountId));
      expect(change).toBeGreaterThan(0n);
      expect(last.costUsdc).toBe(formatDecimal6(change));
      expect(last.clearingPriceCents).toBe(40);
      const req = await requestByReference(world.app, ref ?? "");
      expect(req.status).toBe("incomplete");
      // the estimate is ceil(relayed characters / 4) (usage.ts `billIncomplete`)
      const chars = evs
        .filter((e) => e.event === "content_block_delta")
        .reduce((a, e) => a + String((e.json.delta as Json).text).length, 0);
      expect(chars).toBeGreaterThan(0);
      expect(req.completionTokens).toBe(Math.ceil(chars / 4));
      await expectHoldsReleased(world.app, buyer.accountId);
      await assertBooksBalance(world.app.rt.db);
    },
  );
});

describe("POST /v1/messages/count_tokens", () => {
  test("the admission estimate of the same prompt, free: nothing recorded, nothing charged", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const body = {
      model: MODEL,
      system: "You are terse.",
      messages: [
        { role: "user", content: "What is the weather in Paris?" },
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "get_weather", input: { city: "Paris" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "18°C" }] },
      ],
      tools: [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
      max_tokens: 5,
    };
    const r = await post("/v1/messages/count_tokens", { authorization: `Bearer ${buyer.apiKey}` }, body);
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ input_tokens: messagesPromptEstimate(chatPromptOf(parseCountTokensRequest(body))) });
    expect(r.json.input_tokens).toBeGreaterThan(16 * 4);
    expect(countTokensResponse.safeParse(r.json).error).toBeUndefined();
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    expect(await world.app.rt.db.inferenceRequest.count({ where: { accountId: buyer.accountId } })).toBe(0);
    expectAnthropicError(
      await post("/v1/messages/count_tokens", apiKeyHeader(buyer.apiKey), { model: MODEL }),
      400,
      "invalid_request_error",
      "invalid_request",
    );
  });
});
