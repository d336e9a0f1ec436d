import { describe, expect } from "vitest";
import { GRAPHQL_LIMITS } from "../../../src/graphql/limits.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { type Answer, sendRaw } from "../../../testkit/fuzz/http-fuzz.js";
import type { TestApp } from "../../../testkit/harness.js";

/**
 * Issue 38 "Bad input": a document of 10,000 nested list literals in an argument overflowed the
 * stack inside graphql-js's recursive parser — before any validation rule (Armor's token limit lets
 * ~2,000 levels through) — and was answered 200 with a masked `internal_error` on /graphql, and a
 * 500 carrying the RangeError's stack on /graphql/stream. The nesting is now bounded before the
 * parser runs (GRAPHQL_LIMITS.maxNesting): HTTP 400, `invalid_request`, `details.limit: "nesting"`,
 * on every transport that parses a document.
 */

const lists = (n: number) => `{ models(filter: ${"[".repeat(n)}1${"]".repeat(n)}) { id } }`;
/** A subscription with a nested argument (its field takes none: only the parser's verdict matters). */
const subscription = (n: number) => `subscription { capacityChanged(x: ${"[".repeat(n)}1${"]".repeat(n)}) { reason } }`;

function post(app: TestApp, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const text = JSON.stringify(body);
  return sendRaw(
    app.baseUrl,
    "POST",
    path,
    {
      accept: "application/json",
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(text)),
      ...headers,
    },
    text,
  );
}

/** A GET whose query string carries the brackets raw (each `[` one byte: 7,000 levels fit in 16 KB). */
function get(app: TestApp, path: string, query: string, accept = "application/json"): Promise<Answer> {
  const raw = query.replaceAll(" ", "%20").replaceAll("{", "%7B").replaceAll("}", "%7D");
  return sendRaw(app.baseUrl, "GET", `${path}?query=${raw}`, { accept }, undefined);
}

interface GqlError {
  message?: string;
  extensions?: { code?: string; status?: number; details?: { limit?: string }; http?: unknown };
}

/** The GraphQL errors of an answer: a JSON result, or the `next` events of an event stream. */
function errorsOf(a: Answer): GqlError[] {
  const bodies = a.text.trimStart().startsWith("{")
    ? [a.text]
    : [...a.text.matchAll(/^data: (.+)$/gm)].map((m) => m[1] as string).filter((d) => d.startsWith("{"));
  return bodies.flatMap((b) => (JSON.parse(b) as { errors?: GqlError[] }).errors ?? []);
}

/** HTTP 400 with one `invalid_request` GraphQL error naming the nesting limit, and no data. */
function expectNestingRefusal(a: Answer, label: string) {
  expect(a.status, `${label}: ${a.text.slice(0, 300)}`).toBe(400);
  expect(a.text, label).not.toMatch(/"data":\{/);
  const errors = errorsOf(a);
  expect(errors.length, `${label}: ${a.text.slice(0, 300)}`).toBe(1);
  expect(errors[0]?.extensions?.code, label).toBe("invalid_request");
  expect(errors[0]?.extensions?.status, label).toBe(400);
  expect(errors[0]?.extensions?.details?.limit, label).toBe("nesting");
  expect(errors[0]?.extensions?.http, `${label}: yoga's status hint stays out of the body`).toBeUndefined();
  expect(errors[0]?.message, label).toMatch(new RegExp(`deeper than ${GRAPHQL_LIMITS.maxNesting} levels`));
  expect(a.text, `${label}: no stack in the answer`).not.toMatch(/RangeError|at .*node_modules/);
}

describe("a document nested deeper than the limit is refused before the parser", () => {
  test("10,000 nested list literals in an argument: 400 invalid_request, 20 times out of 20", async ({ app }) => {
    const body = { query: lists(10_000) };
    for (let run = 1; run <= 20; run++) expectNestingRefusal(await post(app, "/graphql", body), `run ${run}`);
  });

  test.for([
    ["application/json", lists(10_000)],
    ["application/graphql-response+json", lists(10_000)],
    ["text/event-stream", lists(10_000)],
    ["text/event-stream", subscription(10_000)],
  ] as const)("POST /graphql with Accept %s → 400", async ([accept, query], { app }) => {
    expectNestingRefusal(await post(app, "/graphql", { query }, { accept }), accept);
  });

  test("GET /graphql?query=… (7,000 levels, as much as a 16 KB URL holds) → 400", async ({ app }) => {
    expectNestingRefusal(await get(app, "/graphql", lists(7_000)), "GET");
  });

  test("/graphql/stream (graphql-sse), distinct connections: POST and GET → 400, no stack", async ({ app }) => {
    const accept = "text/event-stream";
    expectNestingRefusal(await post(app, "/graphql/stream", { query: subscription(10_000) }, { accept }), "POST");
    expectNestingRefusal(await get(app, "/graphql/stream", subscription(7_000), accept), "GET");
  });

  test("/graphql/stream, single connection (the web app's): the operation's POST → 400; the stream takes the next", async ({
    app,
  }) => {
    const put = await sendRaw(app.baseUrl, "PUT", "/graphql/stream", { accept: "text/plain" }, undefined);
    expect(put.status, put.text).toBe(201);
    const token = put.text.trim();
    const headers = { "x-graphql-event-stream-token": token };
    const refused = await post(
      app,
      "/graphql/stream",
      { query: subscription(10_000), extensions: { operationId: "deep" } },
      headers,
    );
    expectNestingRefusal(refused, "single connection");
    // the stream still takes operations: a well-formed one is accepted (its events go down the stream)
    const ok = await post(
      app,
      "/graphql/stream",
      { query: "subscription { capacityChanged { reason } }", extensions: { operationId: "ok" } },
      headers,
    );
    expect(ok.status, ok.text).toBe(202);
  });
});

describe("the limit itself", () => {
  /** `{ models(filter: [[…1…]]) { id } }` whose deepest bracket is at `levels` (`{` and `(` are two). */
  const atLevels = (levels: number) => lists(levels - 2);

  test(`${GRAPHQL_LIMITS.maxNesting} levels pass the bound (the document is then judged as usual); one more is refused`, async ({
    app,
  }) => {
    const at = await post(app, "/graphql", { query: atLevels(GRAPHQL_LIMITS.maxNesting) });
    expect(at.status, at.text.slice(0, 300)).toBeLessThan(500);
    const errors = errorsOf(at);
    // `models` takes no argument: validation refuses it, so the document was parsed
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.map((e) => e.extensions?.details?.limit)).not.toContain("nesting");
    expect(errors.map((e) => e.message).join(" ")).toMatch(/Unknown argument "filter"/);

    expectNestingRefusal(await post(app, "/graphql", { query: atLevels(GRAPHQL_LIMITS.maxNesting + 1) }), "65");
  });

  test("brackets inside strings, block strings and comments do not count", async ({ app }) => {
    const deepText = `"${"[".repeat(500)}"`;
    const query = `# ${"{".repeat(500)}\n{ apiVersion } # ${"(".repeat(500)}`;
    const r = await post(app, "/graphql", { query, variables: { s: deepText } });
    expect(r.status, r.text.slice(0, 300)).toBe(200);
    expect(r.text).toContain("apiVersion");
    const block = await post(app, "/graphql", {
      query: `{ models { id description(x: """${"[".repeat(500)}""") } }`,
    });
    expect(errorsOf(block).map((e) => e.extensions?.details?.limit)).not.toContain("nesting");
  });
});

describe("/graphql/stream takes the checks /graphql makes (it parsed documents outside them)", () => {
  const accept = "text/event-stream";

  test("a document that does not parse → 400 with its GraphQL error (was a 500 with the stack)", async ({ app }) => {
    const a = await post(app, "/graphql/stream", { query: "subscription { capacityChanged { " }, { accept });
    expect(a.status, a.text.slice(0, 300)).toBe(400);
    const errors = errorsOf(a);
    expect(errors[0]?.message).toMatch(/Syntax Error/);
    expect(typeof errors[0]?.extensions?.code).toBe("string");
    expect(a.text).not.toMatch(/at .*node_modules/);
  });

  test("a document past the token limit → 400 invalid_request (tokens)", async ({ app }) => {
    const query = `subscription { ${Array.from({ length: 1_000 }, (_, i) => `a${i}: capacityChanged { reason }`).join(" ")} }`;
    const a = await post(app, "/graphql/stream", { query }, { accept });
    expect(a.status, a.text.slice(0, 300)).toBe(400);
    expect(errorsOf(a)[0]?.extensions?.details?.limit).toBe("tokens");
  });

  test("GET variables with a NUL (a JSON escape the URL check cannot see) → 400 naming the variable", async ({
    app,
  }) => {
    const query = encodeURIComponent("subscription ($r: String) { capacityChanged { reason } }");
    const variables = encodeURIComponent(JSON.stringify({ r: "a\u0000b" }));
    const a = await sendRaw(
      app.baseUrl,
      "GET",
      `/graphql/stream?query=${query}&variables=${variables}`,
      { accept },
      undefined,
    );
    expect(a.status, a.text.slice(0, 300)).toBe(400);
    const e = errorsOf(a)[0];
    expect(e?.extensions?.code).toBe("invalid_request");
    expect(e?.message).toMatch(/variables\.r/);
  });

  test("a query string that does not decode → 400 in the JSON error shape, as on /graphql", async ({ app }) => {
    const a = await sendRaw(app.baseUrl, "GET", "/graphql/stream?query=%ZZ", { accept }, undefined);
    expect(a.status, a.text.slice(0, 300)).toBe(400);
    expect(a.headers["x-svc-error-code"]).toBe("invalid_request");
    expect((JSON.parse(a.text) as { error?: { code?: string } }).error?.code).toBe("invalid_request");
  });
});
