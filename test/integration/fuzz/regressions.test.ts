import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createKey, signIn } from "../../../testkit/actors.js";
import { isolatedWorld, startTestApp, type TestApp } from "../../../testkit/harness.js";

/**
 * What the fuzz tests (rest.fuzz.test.ts, graphql.fuzz.test.ts) found, one focused case each, so a
 * regression fails here by name rather than as a random counterexample there.
 */

let app: TestApp;
let drop: () => Promise<void>;
let apiKey: string;

beforeAll(async () => {
  const w = await isolatedWorld();
  drop = w.drop;
  app = await startTestApp({ databaseUrl: w.databaseUrl, prefix: w.prefix });
  apiKey = (await createKey(app, await signIn(app))).apiKey;
});
afterAll(async () => {
  await app?.close();
  await drop?.();
});

async function send(method: string, path: string, headers: Record<string, string>, body?: string) {
  const res = await fetch(`${app.baseUrl}${path}`, { method, headers, body });
  const text = await res.text();
  let json: { error?: { code?: string; message?: string } } | undefined;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

function expectErrorBody(a: Awaited<ReturnType<typeof send>>, status: number, code: string) {
  expect(a.status, a.text.slice(0, 300)).toBe(status);
  expect(a.headers.get("content-type") ?? "").toMatch(/^application\/json/);
  expect(a.headers.get("x-svc-error-code")).toBe(code);
  expect(a.json?.error?.code).toBe(code);
  expect(a.json?.error?.message).toBeTypeOf("string");
}

describe("/graphql: an Accept header it cannot answer", () => {
  test.each([
    ["POST", "image/png"],
    ["GET", "image/png"],
  ])("%s with Accept: %s → 406 with the error body (yoga's own 406 had no body)", async (method, accept) => {
    const query = "{ apiVersion }";
    const a =
      method === "POST"
        ? await send("POST", "/graphql", { "content-type": "application/json", accept }, JSON.stringify({ query }))
        : await send("GET", `/graphql?query=${encodeURIComponent(query)}`, { accept });
    expectErrorBody(a, 406, "not_acceptable");
  });

  test("an Accept header it can answer still gets the result", async () => {
    const a = await send(
      "POST",
      "/graphql",
      { "content-type": "application/json", accept: "application/json" },
      JSON.stringify({ query: "{ apiVersion }" }),
    );
    expect(a.status).toBe(200);
    expect(a.text).toContain("apiVersion");
  });
});

describe("POST /mcp: what the transport refuses before any JSON-RPC processing", () => {
  const STREAMABLE = "application/json, text/event-stream";
  const mcp = (headers: Record<string, string>, body: string) =>
    send("POST", "/mcp", { authorization: `Bearer ${apiKey}`, ...headers }, body);
  const ping = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });

  // the SDK answered each of these with a JSON-RPC error body (`"code": -32700`) and no X-Svc-Error-Code
  test.each([
    ["jsonrpc is not 2.0", '{"jsonrpc":"1.0","id":1,"method":"tools/list"}'],
    ["method is not a string", '{"jsonrpc":"2.0","id":1,"method":5}'],
    ["the id is an object", '{"jsonrpc":"2.0","id":{},"method":"tools/list"}'],
    ["not an object", '"tools/list"'],
    ["an array of numbers", "[1,2]"],
    ["an empty batch", "[]"],
    ["an empty object", "{}"],
  ])("%s → 400 invalid_request with the error body", async (_label, body) => {
    expectErrorBody(
      await mcp({ "content-type": "application/json", accept: STREAMABLE }, body),
      400,
      "invalid_request",
    );
  });

  test.each([
    ["none", undefined],
    ["application/json only", "application/json"],
    ["text/html", "text/html"],
  ])("Accept: %s → 406 not_acceptable with the error body", async (_label, accept) => {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (accept) headers.accept = accept;
    expectErrorBody(await mcp(headers, ping), 406, "not_acceptable");
  });

  test("a body that is not JSON → 415 unsupported_media_type with the error body", async () => {
    expectErrorBody(
      await mcp({ "content-type": "text/plain", accept: STREAMABLE }, ping),
      415,
      "unsupported_media_type",
    );
  });

  test("the credential still comes first, and a well-formed message is still served", async () => {
    const anonymous = await send("POST", "/mcp", { "content-type": "application/json", accept: STREAMABLE }, "[]");
    expectErrorBody(anonymous, 401, "authentication_failed");
    const listed = await mcp({ "content-type": "application/json", accept: STREAMABLE }, ping);
    expect(listed.status, listed.text.slice(0, 200)).toBe(200);
    expect(listed.text).toContain("agent_me");
  });
});

describe("GraphQL: a variable that does not coerce to its type", () => {
  const gql = (query: string, variables: unknown) =>
    send(
      "POST",
      "/graphql",
      { "content-type": "application/json", accept: "application/json" },
      JSON.stringify({ query, variables }),
    );

  // graphql-js reports these without extensions; every GraphQL error carries a code (invalid_request)
  test.each([
    ["a number for a String", "query($v: String) { modelStats(window: $v) { window } }", { v: 1 }],
    ["true for an Int", "query($v: Int) { market(maxPriceCents: $v) { routableDiem } }", { v: true }],
    ["1e21 for an Int", "query($v: Int) { recentClears(limit: $v) { model } }", { v: 1e21 }],
    ["a number for an enum", "query($v: VideoJobStatus) { myVideoJobs(status: $v) { queueId } }", { v: 1 }],
    ["null for a non-null String", "query($v: String!) { model(id: $v) { id } }", { v: null }],
    [
      "null for a non-null input",
      "mutation($v: SetMaxPriceInput!) { setMaxPrice(input: $v) { maxPriceCentsPerDollar } }",
      { v: null },
    ],
    [
      "a missing input field",
      "mutation($v: SetMaxPriceInput!) { setMaxPrice(input: $v) { maxPriceCentsPerDollar } }",
      { v: {} },
    ],
  ])("%s → extensions.code invalid_request, nothing executed", async (_label, query, variables) => {
    const a = await gql(query, variables);
    expect(a.status, a.text).toBeLessThan(500);
    const body = JSON.parse(a.text) as { data?: unknown; errors?: { extensions?: { code?: string } }[] };
    expect(body.data ?? null).toBeNull();
    expect(body.errors?.length, a.text).toBeGreaterThan(0);
    for (const e of body.errors ?? []) expect(e.extensions?.code, a.text).toBe("invalid_request");
  });
});

describe("the inference fast path: a query string Postgres could not store", () => {
  // Express refuses these before routing (rejectUnsafeUrl); the two fast-path POSTs never reach
  // Express, and the fuzz found a valid chat body served with `?%00=` while `/v1/chat/completions/?%00=`
  // (Express's spelling of the same route) was a 400
  const chat = JSON.stringify({ model: "qwen3-4b", messages: [{ role: "user", content: "hi" }] });
  const responses = JSON.stringify({ model: "qwen3-4b", input: "hi" });

  test.each([
    ["/v1/chat/completions?%00=", chat],
    ["/v1/chat/completions?a=%00", chat],
    ["/v1/responses?x=%ED%A0%80%00", responses],
    ["/v1/chat/completions/?%00=", chat],
  ])("POST %s → 400 invalid_request before the credential and the body", async (path, body) => {
    const credentials: Record<string, string>[] = [{}, { authorization: `Bearer ${apiKey}` }];
    for (const headers of credentials) {
      const a = await send("POST", path, { "content-type": "application/json", ...headers }, body);
      expectErrorBody(a, 400, "invalid_request");
    }
  });

  test("an ordinary query string is still ignored", async () => {
    const a = await send("POST", "/v1/chat/completions?trace=1", { "content-type": "application/json" }, chat);
    expectErrorBody(a, 401, "authentication_failed");
  });
});
