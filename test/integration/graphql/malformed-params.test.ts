import { describe, expect } from "vitest";
import { appTest as test } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";

/**
 * Issue 26 finding 10: GraphQL-over-HTTP parameters read from a query string (or a form body) that
 * do not decode — a malformed percent-escape, or `variables` / `extensions` that are not JSON —
 * answered 200 with a masked `internal_error`. They are malformed input: 400 `invalid_request`
 * naming the parameter, in the JSON error shape a malformed JSON body gets, and nothing runs.
 */

const QUERY = encodeURIComponent("{ apiVersion }");

async function send(
  app: TestApp,
  method: "GET" | "POST",
  search: string,
  init: { body?: string; contentType?: string } = {},
) {
  const res = await fetch(`${app.baseUrl}/graphql?${search}`, {
    method,
    headers: {
      accept: "application/json",
      ...(method === "POST" ? { "content-type": init.contentType ?? "application/json" } : {}),
    },
    ...(method === "POST" ? { body: init.body ?? JSON.stringify({ query: "{ apiVersion }" }) } : {}),
  });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, body, text };
}

function expectRefused(r: Awaited<ReturnType<typeof send>>, field: string) {
  expect(r.status, r.text).toBe(400);
  expect(r.headers.get("x-svc-error-code"), r.text).toBe("invalid_request");
  expect(r.body).toMatchObject({ error: { code: "invalid_request", field } });
  expect(JSON.stringify(r.body)).not.toContain("internal_error");
  expect(r.body).not.toHaveProperty("data");
}

describe("rejection: GraphQL parameters that do not decode", () => {
  test.for([
    ["variables=%ZZ (the issue's request)", `query=${QUERY}&variables=%ZZ`, "variables"],
    ["extensions=%ZZ", `query=${QUERY}&extensions=%ZZ`, "extensions"],
    ["query=%ZZ", "query=%ZZ", "query"],
    ["operationName=%ZZ", `query=${QUERY}&operationName=%ZZ`, "operationName"],
    ["a truncated escape", `query=${QUERY}&variables=%7`, "variables"],
    ["an escape of invalid UTF-8", `query=${QUERY}&variables=%C3%28`, "variables"],
    ["a malformed escape inside valid JSON", `query=${QUERY}&variables=%7B%22a%22%3A%22%ZZ%22%7D`, "variables"],
    ["a malformed escape in a parameter's name", `query=${QUERY}&%ZZ=1`, "%ZZ"],
    ["variables that are not JSON", `query=${QUERY}&variables=abc`, "variables"],
    ["extensions that are not JSON", `query=${QUERY}&extensions=%7B`, "extensions"],
  ] as const)("GET with %s → 400 invalid_request", async ([_label, search, field], { app }) => {
    expectRefused(await send(app, "GET", search), field);
  });

  test.for([
    ["variables=%ZZ", "variables=%ZZ", "variables"],
    ["query=%ZZ", "query=%ZZ", "query"],
    ["operationName=%ZZ", "operationName=%ZZ", "operationName"],
    ["extensions=%ZZ", "extensions=%ZZ", "extensions"],
  ] as const)(
    "POST with %s in its query string → 400 invalid_request (the URL is malformed too)",
    async ([_l, search, field], { app }) => {
      expectRefused(await send(app, "POST", search), field);
    },
  );

  test("a form-encoded POST whose variables do not decode → 400 invalid_request", async ({ app }) => {
    const r = await send(app, "POST", "", {
      contentType: "application/x-www-form-urlencoded",
      body: `query=${QUERY}&variables=%ZZ`,
    });
    expectRefused(r, "variables");
  });
});

describe("success: well-formed parameters still run", () => {
  test("GET with JSON variables holding escaped text: the operation runs on the decoded value", async ({ app }) => {
    const q = encodeURIComponent("query V($id: String!) { model(id: $id) { id } }");
    const vars = encodeURIComponent(JSON.stringify({ id: "no such model %ZZ ü" }));
    const r = await send(app, "GET", `query=${q}&variables=${vars}&operationName=V`);
    expect(r.status, r.text).toBe(200);
    // the resolver ran with the variable and found no such model
    expect(r.body).toMatchObject({ errors: [{ extensions: { code: "model_not_found" } }] });
  });

  test("POST with a well-formed query string", async ({ app }) => {
    const r = await send(app, "POST", "debug=a%20b");
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ data: { apiVersion: expect.any(String) } });
  });
});
