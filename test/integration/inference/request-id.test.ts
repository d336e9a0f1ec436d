// Issue 26 finding 7: one id per request. The `X-Svc-Request-Id` a paid request answers with (on
// success and on every error after it was admitted) is the `requestId` of its record at
// GET /v1/agent/requests/{support_reference}; before, an error answered a fresh uuid of the HTTP layer.
// That id is also the answer's support reference (docs/decisions.md "The support reference is the request id").
import { beforeEach, describe, expect } from "vitest";
import { call, postWithKey } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, chat, emptyBook, fundedBuyerKey, responses } from "../../../testkit/market.js";

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, env: { KEY_MAX_IN_FLIGHT: "64" }, syncCatalog: true });
const world = fileWorld(test);

const CHAT = { model: MODEL, messages: [{ role: "user", content: "hello [[sim:tokens=12]]" }] };
const RESPONSES = { model: MODEL, input: "hello [[sim:tokens=12]]" };
const IMAGE = { model: "venice-sd35", prompt: "a lighthouse" };
const VIDEO = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };

/** Each test starts from an empty book and no faults. */
beforeEach(async () => {
  await emptyBook(world.app);
  world.sim.state.clearFaults();
});

async function market(count = 1) {
  const s = await addSupply(
    world.app,
    world.sim,
    Array.from({ length: count }, (_, i) => ({ priceCents: 40 + i, quantityMicroDiem: 50_000_000n })),
  );
  world.app.rt.services.inference.invalidateBook();
  return s;
}

/** The record's request id, as the buyer reads it back by the answer's support reference. */
async function recordedRequestId(apiKey: string, headers: Headers): Promise<string> {
  const ref = headers.get("x-svc-support-reference");
  expect(ref, "the answer names its support reference").toMatch(/^[0-9a-f-]{36}$/);
  const r = await call(world.app, {
    method: "GET",
    path: `/v1/agent/requests/${ref}`,
    headers: { authorization: `Bearer ${apiKey}` },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const id = (r.body as { requestId?: string }).requestId;
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  return id ?? "";
}

async function expectOneId(apiKey: string, r: { status: number; headers: Headers; body: unknown }, status: number) {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  const header = r.headers.get("x-svc-request-id");
  expect(header).toMatch(/^[0-9a-f-]{36}$/);
  expect(header).toBe(await recordedRequestId(apiKey, r.headers));
  // the support reference is the request id, and the record stores no second uuid for it
  expect(r.headers.get("x-svc-support-reference")).toBe(header);
  const stored = await world.app.rt.db.inferenceRequest.findFirstOrThrow({
    where: { id: header ?? "" },
    select: { supportReference: true },
  });
  expect(stored.supportReference).toBeNull();
}

describe("success: the header is the record's request id", () => {
  test("chat, buffered", async () => {
    await market();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    await expectOneId(buyer.apiKey, await chat(world.app, buyer.apiKey, CHAT), 200);
  });

  test("chat, streamed (the SSE response's header)", async () => {
    await market();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const res = await fetch(`${world.app.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${buyer.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ ...CHAT, stream: true }),
    });
    expect(await res.text()).toContain("[DONE]");
    await expectOneId(buyer.apiKey, { status: res.status, headers: res.headers, body: null }, 200);
  });

  test("Responses and images", async () => {
    await market();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    await expectOneId(buyer.apiKey, await responses(world.app, buyer.apiKey, RESPONSES), 200);
    await expectOneId(buyer.apiKey, await postWithKey(world.app, buyer.apiKey, "/v1/image/generate", IMAGE), 200);
  });

  test("video queue (the body's svc.request_id too)", async () => {
    await market();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await postWithKey(world.app, buyer.apiKey, "/v1/video/queue", VIDEO);
    await expectOneId(buyer.apiKey, r, 200);
    expect((r.body as { svc: { request_id: string } }).svc.request_id).toBe(r.headers.get("x-svc-request-id"));
  });
});

describe("rejection: an error with a stored attempt carries the same id", () => {
  test("chat 502 upstream_error (every key answers 503)", async () => {
    const supply = await market(2);
    for (const k of supply.keys) world.sim.state.injectFault(k.secret, { kind: "http_503" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await chat(world.app, buyer.apiKey, CHAT);
    expect((r.body as { error: { code: string } }).error.code).toBe("upstream_error");
    await expectOneId(buyer.apiKey, r, 502);
  });

  test("chat stream that fails before its first byte answers JSON with the same id", async () => {
    const supply = await market();
    for (const k of supply.keys) world.sim.state.injectFault(k.secret, { kind: "http_503" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await chat(world.app, buyer.apiKey, { ...CHAT, stream: true });
    await expectOneId(buyer.apiKey, r, 502);
  });

  test("chat 402 insufficient_balance", async () => {
    await market();
    const buyer = await fundedBuyerKey(world.app, 1n);
    const r = await chat(world.app, buyer.apiKey, CHAT);
    expect((r.body as { error: { code: string } }).error.code).toBe("insufficient_balance");
    await expectOneId(buyer.apiKey, r, 402);
  });

  test("Responses and image 502", async () => {
    const supply = await market();
    for (const k of supply.keys) world.sim.state.injectFault(k.secret, { kind: "http_503" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    await expectOneId(buyer.apiKey, await responses(world.app, buyer.apiKey, RESPONSES), 502);
    await expectOneId(buyer.apiKey, await postWithKey(world.app, buyer.apiKey, "/v1/image/generate", IMAGE), 502);
  });

  test("video queue 502 (the upstream's answer was lost)", async () => {
    const supply = await market();
    for (const k of supply.keys) world.sim.state.injectFault(k.secret, { kind: "drop", route: "/video/queue" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    await expectOneId(buyer.apiKey, await postWithKey(world.app, buyer.apiKey, "/v1/video/queue", VIDEO), 502);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("the MCP connector: the HTTP answer's id is the tool result's and the record's", () => {
  async function callTool(apiKey: string, name: string, args: Record<string, unknown>) {
    const res = await fetch(new URL("/mcp", world.app.baseUrl), {
      method: "POST",
      headers: {
        authorization: `Bearer ${apiKey}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
    });
    const body = (await res.json()) as {
      result?: { isError?: boolean; structuredContent?: Record<string, unknown>; content?: { text?: string }[] };
    };
    return { status: res.status, header: res.headers.get("x-svc-request-id"), result: body.result };
  }

  test("chat_completion", async () => {
    await market();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await callTool(buyer.apiKey, "chat_completion", CHAT);
    expect(r.status).toBe(200);
    expect(r.result?.isError, JSON.stringify(r.result)).toBeFalsy();
    const out = r.result?.structuredContent as { requestId: string; supportReference: string };
    expect(r.header).toBe(out.requestId);
    const rec = await call(world.app, {
      method: "GET",
      path: `/v1/agent/requests/${out.supportReference}`,
      headers: { authorization: `Bearer ${buyer.apiKey}` },
    });
    expect((rec.body as { requestId: string }).requestId).toBe(out.requestId);
  });
});
