import { describe, expect } from "vitest";
import { appTest as test } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";

/**
 * What the fuzz tests (rest.fuzz.test.ts, graphql.fuzz.test.ts) found, one focused case each, so a
 * regression fails here by name rather than as a random counterexample there.
 */

async function send(app: TestApp, method: string, path: string, headers: Record<string, string>, body?: string) {
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
  test.for([
    ["POST", "image/png"],
    ["GET", "image/png"],
  ] as const)(
    "%s with Accept: %s → 406 with the error body (yoga's own 406 had no body)",
    async ([method, accept], { app }) => {
      const query = "{ apiVersion }";
      const a =
        method === "POST"
          ? await send(
              app,
              "POST",
              "/graphql",
              { "content-type": "application/json", accept },
              JSON.stringify({ query }),
            )
          : await send(app, "GET", `/graphql?query=${encodeURIComponent(query)}`, { accept });
      expectErrorBody(a, 406, "not_acceptable");
    },
  );

  test("an Accept header it can answer still gets the result", async ({ app }) => {
    const a = await send(
      app,
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
  const mcp = (app: TestApp, apiKey: string, headers: Record<string, string>, body: string) =>
    send(app, "POST", "/mcp", { authorization: `Bearer ${apiKey}`, ...headers }, body);
  const ping = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });

  // the SDK answered each of these with a JSON-RPC error body (`"code": -32700`) and no X-Svc-Error-Code
  test.for([
    ["jsonrpc is not 2.0", '{"jsonrpc":"1.0","id":1,"method":"tools/list"}'],
    ["method is not a string", '{"jsonrpc":"2.0","id":1,"method":5}'],
    ["the id is an object", '{"jsonrpc":"2.0","id":{},"method":"tools/list"}'],
    ["not an object", '"tools/list"'],
    ["an array of numbers", "[1,2]"],
    ["an empty batch", "[]"],
    ["an empty object", "{}"],
  ] as const)("%s → 400 invalid_request with the error body", async ([_label, body], { app, agent: { apiKey } }) => {
    expectErrorBody(
      await mcp(app, apiKey, { "content-type": "application/json", accept: STREAMABLE }, body),
      400,
      "invalid_request",
    );
  });

  test.for([
    ["none", undefined],
    ["application/json only", "application/json"],
    ["text/html", "text/html"],
  ] as const)(
    "Accept: %s → 406 not_acceptable with the error body",
    async ([_label, accept], { app, agent: { apiKey } }) => {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (accept) headers.accept = accept;
      expectErrorBody(await mcp(app, apiKey, headers, ping), 406, "not_acceptable");
    },
  );

  test("a body that is not JSON → 415 unsupported_media_type with the error body", async ({
    app,
    agent: { apiKey },
  }) => {
    expectErrorBody(
      await mcp(app, apiKey, { "content-type": "text/plain", accept: STREAMABLE }, ping),
      415,
      "unsupported_media_type",
    );
  });

  test("a sent credential still comes first, and a well-formed message is still served", async ({
    app,
    agent: { apiKey },
  }) => {
    const headers = { "content-type": "application/json", accept: STREAMABLE };
    const badKey = await send(app, "POST", "/mcp", { ...headers, authorization: "Bearer svc_not_a_key" }, "[]");
    expectErrorBody(badKey, 401, "authentication_failed");
    // no credential at all is served (paid per call, issue 41): the transport's own refusal
    expectErrorBody(await send(app, "POST", "/mcp", headers, "[]"), 400, "invalid_request");
    const listed = await mcp(app, apiKey, { "content-type": "application/json", accept: STREAMABLE }, ping);
    expect(listed.status, listed.text.slice(0, 200)).toBe(200);
    expect(listed.text).toContain("agent_me");
  });
});

describe("GraphQL: a variable that does not coerce to its type", () => {
  const gql = (app: TestApp, query: string, variables: unknown) =>
    send(
      app,
      "POST",
      "/graphql",
      { "content-type": "application/json", accept: "application/json" },
      JSON.stringify({ query, variables }),
    );

  // graphql-js reports these without extensions; every GraphQL error carries a code (invalid_request)
  test.for([
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
  ] as const)("%s → extensions.code invalid_request, nothing executed", async ([_label, query, variables], { app }) => {
    const a = await gql(app, query, variables);
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

  test.for([
    ["/v1/chat/completions?%00=", chat],
    ["/v1/chat/completions?a=%00", chat],
    ["/v1/responses?x=%ED%A0%80%00", responses],
    ["/v1/chat/completions/?%00=", chat],
  ] as const)(
    "POST %s → 400 invalid_request before the credential and the body",
    async ([path, body], { app, agent: { apiKey } }) => {
      const credentials: Record<string, string>[] = [{}, { authorization: `Bearer ${apiKey}` }];
      for (const headers of credentials) {
        const a = await send(app, "POST", path, { "content-type": "application/json", ...headers }, body);
        expectErrorBody(a, 400, "invalid_request");
      }
    },
  );

  test("an ordinary query string is still ignored", async ({ app }) => {
    const a = await send(app, "POST", "/v1/chat/completions?trace=1", { "content-type": "application/json" }, chat);
    expectErrorBody(a, 401, "authentication_failed");
  });
});
