// The hosted MCP connector (SPEC "What the service does" 14, issue 17 item 4), driven with the SDK's own
// client over Streamable HTTP: the tools are the REST routes' service calls, the errors are the REST
// codes as tool errors, and the Bearer rule is REST's, answered with HTTP 401 before any MCP processing.
// Tests in this file share one market and run in order: the empty-market case comes first.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect } from "vitest";
import { formatDecimal6, parseDecimal6 } from "../../../src/lib/money.js";
import { mcpPath } from "../../../src/mcp/routes.js";
import { bearer, call, createKey } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, confirmedOf, fundedBuyerKey } from "../../../testkit/market.js";

const MODEL = "zai-org-glm-5-1";
const VIDEO_JOB = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };
const TOOL_NAMES = [
  "agent_key",
  "agent_me",
  "capacity",
  "chat_completion",
  "create_key",
  "generate_image",
  "list_keys",
  "list_models",
  "model_stats",
  "request_lookup",
  "set_max_price",
  "video_quote",
];

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

const open: Client[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

function mcpUrl(): URL {
  return new URL("/mcp", world.app.baseUrl);
}

/** An SDK client connected with these request headers (the Bearer key goes in `requestInit`). */
async function connect(headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: "mcp-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(mcpUrl(), { requestInit: { headers } });
  open.push(client);
  await client.connect(transport);
  return client;
}

/** A successful tool result: its structured content, and the text content carrying the same JSON. */
async function ok(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
  const text = r.content[0]?.type === "text" ? r.content[0].text : "";
  expect(JSON.parse(text)).toEqual(r.structuredContent);
  return r.structuredContent as Record<string, unknown>;
}

interface ToolErrorBody {
  error: { code: string; message: string; field?: string; cheapestPostedCents?: number; [k: string]: unknown };
}

/** A tool error: `isError` with the REST error body as text, and no structured content. */
async function fails(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolErrorBody> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(r.isError, JSON.stringify(r.content)).toBe(true);
  expect(r.structuredContent).toBeUndefined();
  const text = r.content[0]?.type === "text" ? r.content[0].text : "";
  const body = JSON.parse(text) as ToolErrorBody;
  expect(typeof body.error.message).toBe("string");
  return body;
}

function rest(apiKey: string, method: string, path: string, body?: unknown) {
  return call(world.app, { method, path, headers: bearer(apiKey), body });
}

/** A JSON-RPC POST as any MCP client sends it. */
function rawPost(headers: Record<string, string>, body: unknown) {
  return fetch(mcpUrl(), {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

function chatCall(content: string, extra: Record<string, unknown> = {}) {
  return { model: MODEL, messages: [{ role: "user", content }], ...extra };
}

describe("an empty market", () => {
  test("chat_completion and video_quote are pool_empty tool errors; nothing is charged", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const client = await connect(bearer(buyer.apiKey));
    expect((await fails(client, "chat_completion", chatCall("hello [[sim:tokens=10]]"))).error.code).toBe("pool_empty");
    expect((await fails(client, "video_quote", VIDEO_JOB)).error.code).toBe("pool_empty");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n);
    // (filtered at 80: the unfiltered answer is cached 30 s and is read with supply further down)
    const cap = await ok(client, "capacity", { maxPriceCents: 80 });
    expect(cap).toMatchObject({ routableDiem: "0.000000", cheapestPostedCents: null, prices: [] });
  });
});

describe("tools", () => {
  test("listTools: the twelve tools, each with a description and input and output schemas", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    const client = await connect(bearer(buyer.apiKey));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOL_NAMES);
    for (const t of tools) {
      expect(t.inputSchema.type, t.name).toBe("object");
      expect(t.outputSchema?.type, t.name).toBe("object");
      expect(t.description?.length ?? 0, t.name).toBeGreaterThan(80);
    }
    const byName = new Map(tools.map((t) => [t.name, t]));
    const chat = byName.get("chat_completion");
    expect(chat?.inputSchema.required).toEqual(["model", "messages"]);
    expect(Object.keys(chat?.inputSchema.properties ?? {})).toEqual(["model", "messages", "max_tokens"]);
    expect(chat?.description).toMatch(/insufficient_balance/);
    expect(chat?.description).toMatch(/six decimals/);
    expect(byName.get("set_max_price")?.inputSchema).toMatchObject({
      required: ["maxPriceCentsPerDollar"],
      properties: { maxPriceCentsPerDollar: { type: "integer", minimum: 30, maximum: 80 } },
    });
    expect(byName.get("capacity")?.inputSchema).toMatchObject({
      properties: { maxPriceCents: { type: "integer", minimum: 30, maximum: 80 } },
    });
    expect(byName.get("model_stats")?.inputSchema).toMatchObject({
      properties: { window: { enum: ["24h", "7d", "30d"] } },
    });
    expect(byName.get("request_lookup")?.inputSchema).toMatchObject({
      required: ["support_reference"],
      properties: { support_reference: { type: "string", format: "uuid" } },
    });
    expect(byName.get("agent_me")?.annotations?.readOnlyHint).toBe(true);
    expect(byName.get("chat_completion")?.annotations?.readOnlyHint).toBe(false);
    const createKey = byName.get("create_key")?.inputSchema;
    expect(createKey?.required).toEqual(["name"]);
    expect(Object.keys(createKey?.properties ?? {})).toEqual([
      "name",
      "limitUsdc",
      "limitReset",
      "maxPriceCentsPerDollar",
      "models",
      "expiresAt",
      "scopes",
    ]);
    expect(JSON.stringify(createKey?.properties)).toContain('"pattern":"^\\\\d+\\\\.\\\\d{6}$"');
    expect(byName.get("agent_key")?.annotations?.readOnlyHint).toBe(true);
  });

  test("create_key mints a budgeted key; agent_key and list_keys show its policy and spend", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    const client = await connect(bearer(buyer.apiKey));
    const created = await ok(client, "create_key", {
      name: "sub-agent",
      limitUsdc: "1.250000",
      limitReset: "weekly",
      models: [`svc/${MODEL}`],
    });
    expect(created).toMatchObject({
      name: "sub-agent",
      source: "agent",
      limitUsdc: "1.250000",
      limitReset: "weekly",
      models: [MODEL],
      spentUsdc: "0.000000",
      remainingUsdc: "1.250000",
      resetsAt: expect.stringMatching(/T00:00:00\.000Z$/),
    });
    expect(created.apiKey).toMatch(/^svc_/);
    const sub = await connect(bearer(String(created.apiKey)));
    // the key in use gets its lastUsedAt
    const { apiKey: _plaintext, lastUsedAt: _unused, ...shown } = created;
    expect(await ok(sub, "agent_key")).toMatchObject(shown);
    const listed = (await ok(client, "list_keys")) as { keys: Record<string, unknown>[]; active: number };
    expect(listed.active).toBe(2);
    expect(listed.keys.find((k) => k.id === created.id)).toMatchObject(shown);
    expect(JSON.stringify(listed)).not.toContain(String(created.apiKey));
    // the same refusals as POST /v1/agent/keys, nothing minted
    for (const [args, field] of [
      [{ name: "x", limitUsdc: "0.000000" }, "limitUsdc"],
      [{ name: "x", models: ["no-such-model"] }, "models"],
      [{ name: "x", expiresAt: "2020-01-01T00:00:00Z" }, "expiresAt"],
    ] as const) {
      const { error } = await fails(client, "create_key", args);
      expect([error.code, error.field]).toEqual(["invalid_request", field]);
    }
    expect(((await ok(client, "list_keys")) as { active: number }).active).toBe(2);
  });

  test("agent_me, capacity, list_models and model_stats answer what their REST routes answer", async () => {
    await addSupply(world.app, world.sim, [
      { priceCents: 55, quantityMicroDiem: 50_000_000n },
      { priceCents: 40, quantityMicroDiem: 50_000_000n },
    ]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 3_000_000n);
    const client = await connect(bearer(buyer.apiKey));

    const me = await ok(client, "agent_me");
    expect(me).toEqual((await rest(buyer.apiKey, "GET", "/v1/agent/me")).body);
    expect(me).toMatchObject({ accountId: buyer.accountId, confirmedUsdc: "3.000000", maxPriceCentsPerDollar: 80 });
    expect(me.confirmationBlocks).toBe(world.app.rt.config.chain.confirmationBlocks);

    // capacity: the REST answer read right after (the same 30 s cache, so the same generatedAt)
    const cap = await ok(client, "capacity");
    expect(cap).toEqual((await rest(buyer.apiKey, "GET", "/v1/capacity")).body);
    expect(cap).toMatchObject({ cheapestPostedCents: 40, routableDiem: "100.000000" });
    const narrowed = await ok(client, "capacity", { maxPriceCents: 45 });
    expect(narrowed).toEqual((await rest(buyer.apiKey, "GET", "/v1/capacity?maxPriceCents=45")).body);
    expect((narrowed.prices as { priceCentsPerDollar: number }[]).map((p) => p.priceCentsPerDollar)).toEqual([40]);

    const models = await ok(client, "list_models");
    expect(models).toEqual((await rest(buyer.apiKey, "GET", "/v1/models")).body);
    const video = await ok(client, "list_models", { modality: "video" });
    const videoRows = video.data as { id: string; modality: string }[];
    expect(videoRows.length).toBeGreaterThan(0);
    expect(videoRows.every((m) => m.modality === "video")).toBe(true);
    expect(videoRows).toEqual((models.data as { modality: string }[]).filter((m) => m.modality === "video"));

    const stats = await ok(client, "model_stats", { window: "24h" });
    const restStats = (await rest(buyer.apiKey, "GET", "/v1/models/stats?window=24h")).body as Record<string, unknown>;
    expect({ ...stats, generatedAt: undefined }).toEqual({ ...restStats, generatedAt: undefined });
    expect(stats.window).toBe("24h");
    expect((await ok(client, "model_stats")).window).toBe("7d");
  });

  test("video_quote answers the REST quote; no charge, no job", async () => {
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const client = await connect(bearer(buyer.apiKey));
    const q = await ok(client, "video_quote", VIDEO_JOB);
    expect(q).toEqual((await rest(buyer.apiKey, "POST", "/v1/video/quote", VIDEO_JOB)).body);
    expect(q).toMatchObject({ quote_diem: "0.630000", clears_now: true, svc: { clearing_price_cents: 40 } });
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    expect(await world.app.rt.db.videoJob.count({ where: { accountId: buyer.accountId } })).toBe(0);
  });

  test("chat_completion: the balance moves by exactly the reported cost; the reference resolves by tool and REST", async () => {
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = await connect(bearer(buyer.apiKey));
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await ok(client, "chat_completion", chatCall("Hello there [[sim:tokens=40]]", { max_tokens: 200 }));
    const after = await confirmedOf(world.app, buyer.accountId);
    expect(before - after).toBeGreaterThan(0n);
    expect(parseDecimal6(r.costUsdc as string)).toBe(before - after);
    expect(r.balanceRemainingUsdc).toBe(formatDecimal6(after));
    expect(r.clearingPriceCents).toBe(40);
    expect((r.message as { role: string; content: string }).role).toBe("assistant");
    expect((r.message as { content: string }).content.length).toBeGreaterThan(0);

    const ref = r.supportReference as string;
    const viaTool = await ok(client, "request_lookup", { support_reference: ref });
    const viaRest = await rest(buyer.apiKey, "GET", `/v1/agent/requests/${ref}`);
    expect(viaRest.status).toBe(200);
    expect(viaTool).toEqual(viaRest.body);
    expect(viaTool).toMatchObject({
      supportReference: ref,
      requestId: r.requestId,
      status: "succeeded",
      costUsdc: r.costUsdc,
      clearingPriceCents: 40,
      route: "chat",
    });
    // an upper-case reference is the same reference
    expect(await ok(client, "request_lookup", { support_reference: ref.toUpperCase() })).toEqual(viaTool);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a batch of paid calls in one POST: each call its own record, id and support reference", async () => {
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const call = (id: number) => ({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "chat_completion", arguments: chatCall(`batch ${id} [[sim:tokens=20]]`) },
    });
    const res = await rawPost(bearer(buyer.apiKey), [call(11), call(12), call(13)]);
    expect(res.status).toBe(200);
    const answers = (await res.json()) as { id: number; result: CallToolResult }[];
    const values = answers.map((a) => a.result.structuredContent as Record<string, unknown>);
    expect(
      answers.map((a) => a.result.isError ?? false),
      JSON.stringify(answers).slice(0, 600),
    ).toEqual([false, false, false]);
    const ids = values.map((v) => v.requestId as string);
    const refs = values.map((v) => v.supportReference as string);
    expect(new Set(ids).size).toBe(3);
    expect(new Set(refs).size).toBe(3);
    // the POST's own id goes to one of them; each record is found by its reference
    expect(ids).toContain(res.headers.get("x-svc-request-id"));
    for (const [i, ref] of refs.entries()) {
      const r = await rest(buyer.apiKey, "GET", `/v1/agent/requests/${ref}`);
      expect(r.body).toMatchObject({ requestId: ids[i], status: "succeeded", costUsdc: values[i]?.costUsdc });
    }
    const spent = values.reduce((a, v) => a + (parseDecimal6(v.costUsdc as string) ?? 0n), 0n);
    expect(before - (await confirmedOf(world.app, buyer.accountId))).toBe(spent);
    await assertBooksBalance(world.app.rt.db);
  });

  test("generate_image: the images as image blocks; the balance moves by exactly the reported cost", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const client = await connect(bearer(buyer.apiKey));
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = (await client.callTool({
      name: "generate_image",
      arguments: { model: "venice-sd35", prompt: "a lighthouse at dusk", variants: 2, format: "png" },
    })) as CallToolResult;
    expect(r.isError, JSON.stringify(r.content).slice(0, 300)).toBeFalsy();
    const value = r.structuredContent as Record<string, unknown>;
    expect(r.content[0]?.type === "text" ? JSON.parse(r.content[0].text) : undefined).toEqual(value);
    expect(value).toMatchObject({ imageCount: 2, mimeType: "image/png", clearingPriceCents: 40 });
    const images = r.content.slice(1);
    expect(images).toHaveLength(2);
    for (const img of images) {
      expect(img.type).toBe("image");
      expect(img.type === "image" && img.mimeType).toBe("image/png");
      expect(img.type === "image" && Buffer.from(img.data, "base64").length).toBeGreaterThan(0);
    }
    const after = await confirmedOf(world.app, buyer.accountId);
    // two images at 10_000 micro-DIEM each, cleared at 40 cents: 8_000 micro-USDC
    expect(parseDecimal6(value.costUsdc as string)).toBe(before - after);
    expect(before - after).toBe(8_000n);
    expect(value.balanceRemainingUsdc).toBe(formatDecimal6(after));
    const lookup = await ok(client, "request_lookup", { support_reference: value.supportReference });
    expect(lookup).toMatchObject({ route: "image", status: "succeeded", costUsdc: value.costUsdc });
    await assertBooksBalance(world.app.rt.db);
  });

  test("set_max_price: below every posted price chat_completion is no_eligible_supply; its hint clears the call", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const client = await connect(bearer(buyer.apiKey));
    expect(await ok(client, "set_max_price", { maxPriceCentsPerDollar: 30 })).toEqual({
      walletAddress: buyer.user.walletAddress,
      maxPriceCentsPerDollar: 30,
    });
    expect((await rest(buyer.apiKey, "GET", "/v1/agent/me")).body).toMatchObject({ maxPriceCentsPerDollar: 30 });

    const refused = await fails(client, "chat_completion", chatCall("hi [[sim:tokens=10]]"));
    expect(refused.error).toMatchObject({ code: "no_eligible_supply", buyerMaxCents: 30, cheapestPostedCents: 40 });
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n);

    await ok(client, "set_max_price", { maxPriceCentsPerDollar: refused.error.cheapestPostedCents });
    const r = await ok(client, "chat_completion", chatCall("hi again [[sim:tokens=10]]"));
    expect(r.clearingPriceCents).toBe(40);
    expect(parseDecimal6(r.costUsdc as string)).toBe(5_000_000n - (await confirmedOf(world.app, buyer.accountId)));
  });
});

describe("tool errors", () => {
  test("invalid arguments: invalid_request naming the field, and nothing changes", async () => {
    const buyer = await fundedBuyerKey(world.app, 2_000_000n, 60);
    const client = await connect(bearer(buyer.apiKey));
    const simBefore = world.sim.state.listRequests().length;
    const cases: [string, Record<string, unknown>, string][] = [
      ["capacity", { maxPriceCents: 29 }, "maxPriceCents"],
      ["capacity", { maxPriceCents: 45.5 }, "maxPriceCents"],
      ["capacity", { maxPriceCents: "45" }, "maxPriceCents"],
      ["list_models", { modality: "audio" }, "modality"],
      ["model_stats", { window: "1y" }, "window"],
      ["request_lookup", { support_reference: "not-a-uuid" }, "support_reference"],
      ["request_lookup", {}, "support_reference"],
      ["set_max_price", { maxPriceCentsPerDollar: 81 }, "maxPriceCentsPerDollar"],
      ["set_max_price", { maxPriceCentsPerDollar: 29 }, "maxPriceCentsPerDollar"],
      ["set_max_price", { maxPriceCentsPerDollar: "50" }, "maxPriceCentsPerDollar"],
      ["set_max_price", {}, "maxPriceCentsPerDollar"],
      ["chat_completion", { model: MODEL, messages: [] }, "messages"],
      ["chat_completion", { messages: [{ role: "user", content: "x" }] }, "model"],
      ["chat_completion", chatCall("x", { max_tokens: 0 }), "max_tokens"],
      ["chat_completion", chatCall("x", { max_tokens: "many" }), "max_tokens"],
      ["video_quote", { ...VIDEO_JOB, resolution: "4k" }, "resolution"],
    ];
    for (const [tool, args, field] of cases) {
      const { error } = await fails(client, tool, args);
      expect([error.code, error.field], `${tool} ${JSON.stringify(args)}`).toEqual(["invalid_request", field]);
    }
    const acct = await world.app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } });
    expect([acct.confirmedMicroUsdc, acct.reservedMicroUsdc, acct.maxPriceCentsPerDollar]).toEqual([
      2_000_000n,
      0n,
      60,
    ]);
    expect(world.sim.state.listRequests().length).toBe(simBefore);
  });

  test("the domain's codes: model_not_found, unsupported modality, insufficient_balance; nothing charged", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    const client = await connect(bearer(buyer.apiKey));
    expect((await fails(client, "chat_completion", { ...chatCall("x"), model: "no-such-model" })).error.code).toBe(
      "model_not_found",
    );
    const imageModel = (
      (await ok(client, "list_models", { modality: "image" })).data as { id: string; status: string }[]
    ).find((m) => m.status === "live");
    expect(imageModel).toBeDefined();
    const wrong = await fails(client, "chat_completion", { ...chatCall("x"), model: imageModel?.id });
    expect(wrong.error.code).toBe("unsupported_modality");
    const poor = await fails(client, "chat_completion", chatCall("x [[sim:tokens=10]]"));
    expect(poor.error.code).toBe("insufficient_balance");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(0n);
  });

  test("an unknown tool is a protocol error (-32602), not a tool result", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    const client = await connect(bearer(buyer.apiKey));
    await expect(client.callTool({ name: "drain_wallet", arguments: {} })).rejects.toMatchObject({ code: -32602 });
  });
});

describe("authorisation", () => {
  /** The HTTP answer of a refused request: 401, the REST error body, a Bearer challenge. */
  async function expect401(res: Response, invalidToken: boolean) {
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(
      invalidToken ? 'Bearer realm="mcp", error="invalid_token"' : 'Bearer realm="mcp"',
    );
    expect(res.headers.get("x-svc-error-code")).toBe("authentication_failed");
    const body = (await res.json()) as ToolErrorBody;
    expect(body.error.code).toBe("authentication_failed");
    expect(typeof body.error.message).toBe("string");
  }

  /** The SDK client cannot even initialize. */
  async function expectConnectRefused(headers: Record<string, string>) {
    const err = await connect(headers).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StreamableHTTPError);
    expect((err as StreamableHTTPError).code).toBe(401);
  }

  const SET_CEILING = {
    jsonrpc: "2.0",
    id: 2,
    method: "tools/call",
    params: { name: "set_max_price", arguments: { maxPriceCentsPerDollar: 31 } },
  };

  test("an unknown key: 401 before any MCP processing, nothing changed", async () => {
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    await expectConnectRefused(bearer("svc_not_a_real_key"));
    await expect401(await rawPost(bearer("svc_not_a_real_key"), INITIALIZE), true);
    await expect401(await rawPost({ authorization: "Basic abc" }, INITIALIZE), true);
    // even a body that is not JSON-RPC is refused for the credential first
    await expect401(await rawPost(bearer("svc_not_a_real_key"), { nonsense: true }), true);
    // the body is not read before a sent credential checks out: malformed JSON is a 401 with a bad
    // key, and the parser's 400 only with a good one
    await expect401(await rawPost(bearer("svc_not_a_real_key"), "{not json"), true);
    const malformed = await rawPost(bearer(buyer.apiKey), "{not json");
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as ToolErrorBody).error.code).toBe("invalid_request");
    expect((await rest(buyer.apiKey, "GET", "/v1/agent/me")).body).toMatchObject({ maxPriceCentsPerDollar: 80 });
  });

  test("no credential at all: the tools are listed, a free tool is authentication_failed, nothing changed", async () => {
    const client = await connect({});
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOL_NAMES);
    for (const name of ["agent_me", "set_max_price", "list_models", "request_lookup"]) {
      const { error } = await fails(client, name, name === "set_max_price" ? { maxPriceCentsPerDollar: 31 } : {});
      expect(error.code, name).toBe("authentication_failed");
      expect(error.message).toMatch(/chat_completion and generate_image/);
    }
    // the transport's own refusals are answered as with a key
    expect((await rawPost({}, { nonsense: true })).status).toBe(400);
    expect((await rawPost({}, "{not json")).status).toBe(400);
    const set = await rawPost({}, SET_CEILING);
    expect(set.status).toBe(200);
    const body = (await set.json()) as { result: CallToolResult };
    expect(body.result.isError).toBe(true);
  });

  test("a session cookie instead of a key is 401, and so is a cookie beside a valid key", async () => {
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    await expectConnectRefused({ cookie: buyer.user.cookie });
    await expect401(await rawPost({ cookie: buyer.user.cookie }, SET_CEILING), false);
    await expect401(await rawPost({ cookie: buyer.user.cookie, ...bearer(buyer.apiKey) }, SET_CEILING), true);
    expect((await rest(buyer.apiKey, "GET", "/v1/agent/me")).body).toMatchObject({ maxPriceCentsPerDollar: 80 });
  });

  test("a key revoked through REST: the connected client's next call is refused (401), nothing charged", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const other = await createKey(world.app, buyer.user, "second key");
    const client = await connect(bearer(buyer.apiKey));
    await ok(client, "agent_me");
    const keys = (await rest(other.apiKey, "GET", "/v1/agent/keys")).body as { keys: { id: string; name: string }[] };
    const first = keys.keys.find((k) => k.name !== "second key");
    expect(first).toBeDefined();
    expect((await rest(other.apiKey, "DELETE", `/v1/agent/keys/${first?.id}`)).status).toBe(200);

    const simBefore = world.sim.state.listRequests().length;
    const err = await client.callTool({ name: "chat_completion", arguments: chatCall("x [[sim:tokens=10]]") }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StreamableHTTPError);
    expect((err as StreamableHTTPError).code).toBe(401);
    await expectConnectRefused(bearer(buyer.apiKey));
    await expect401(await rawPost(bearer(buyer.apiKey), SET_CEILING), true);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n);
    expect(world.sim.state.listRequests().length).toBe(simBefore);
    expect((await rest(other.apiKey, "GET", "/v1/agent/me")).body).toMatchObject({ maxPriceCentsPerDollar: 80 });
    // the account's other key still works
    expect((await ok(await connect(bearer(other.apiKey)), "agent_me")).accountId).toBe(buyer.accountId);
  });

  test("another account's key cannot read this account's support reference (not_found)", async () => {
    const owner = await fundedBuyerKey(world.app, 5_000_000n);
    const stranger = await fundedBuyerKey(world.app, 0n);
    const r = await ok(await connect(bearer(owner.apiKey)), "chat_completion", chatCall("mine [[sim:tokens=10]]"));
    const ref = r.supportReference as string;
    const { error } = await fails(await connect(bearer(stranger.apiKey)), "request_lookup", { support_reference: ref });
    expect(error.code).toBe("not_found");
    expect((await rest(stranger.apiKey, "GET", `/v1/agent/requests/${ref}`)).status).toBe(404);
  });
});

describe("the HTTP endpoint", () => {
  test("GET and DELETE are 405 with the JSON error body; a stateless answer carries no session id", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(mcpUrl(), { method, headers: bearer(buyer.apiKey) });
      expect(res.status, method).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
      expect(((await res.json()) as ToolErrorBody).error.code).toBe("method_not_allowed");
    }
    const init = await rawPost(bearer(buyer.apiKey), INITIALIZE);
    expect(init.status).toBe(200);
    expect(init.headers.get("mcp-session-id")).toBeNull();
    expect(init.headers.get("content-type")).toMatch(/^application\/json/);
    const body = (await init.json()) as { result: { serverInfo: { name: string }; capabilities: { tools?: unknown } } };
    expect(body.result.capabilities.tools).toBeDefined();
    // no initialize needed on a later request: each POST is served on its own
    const list = await rawPost(bearer(buyer.apiKey), { jsonrpc: "2.0", id: 3, method: "tools/list" });
    expect(((await list.json()) as { result: { tools: unknown[] } }).result.tools).toHaveLength(12);
  });

  test("bodies: malformed JSON is 400 invalid_request and an oversized body is 413, as on every route", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    const bad = await rawPost(bearer(buyer.apiKey), "{not json");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as ToolErrorBody).error.code).toBe("invalid_request");
    const huge = await rawPost(bearer(buyer.apiKey), JSON.stringify({ pad: "x".repeat(21 * 1024 * 1024) }));
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as ToolErrorBody).error.code).toBe("payload_too_large");
  });
});

describe("mcpPath", () => {
  test.each([
    ["MCP_URL defaulted to BASE_URL", "http://localhost:3000", "/mcp"],
    ["a trailing slash", "https://mcp.example.com/", "/mcp"],
    ["a path prefix", "https://example.com/connector", "/connector/mcp"],
    ["a prefix with a trailing slash", "https://example.com/connector/", "/connector/mcp"],
  ])("%s: %s → %s", (_label, url, path) => {
    expect(mcpPath(url)).toBe(path);
  });
});
