import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { isolatedWorld, startTestApp, type TestApp } from "../../../testkit/harness.js";

/**
 * Issue 18 "Found by hostile input": what a hostile client sent that the service answered with a 500
 * (or an empty body). Each answer must be a 4xx in the JSON error shape naming the problem.
 */

let app: TestApp;
let drop: () => Promise<void>;
let user: SignedInUser;
let apiKey: string;

beforeAll(async () => {
  const w = await isolatedWorld();
  drop = w.drop;
  app = await startTestApp({ databaseUrl: w.databaseUrl, prefix: w.prefix });
  user = await signIn(app);
  apiKey = (await createKey(app, user)).apiKey;
});
afterAll(async () => {
  await app.close();
  await drop();
});

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
}

async function send(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
  const res = await fetch(`${app.baseUrl}${path}`, {
    method,
    headers: { ...(init.body !== undefined ? { "content-type": "application/json" } : {}), ...init.headers },
    body: init.body,
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, body } satisfies Answer;
}

/** 400 `invalid_request` in the JSON error shape, with `X-Svc-Error-Code` and the field named. */
function expectInvalid(a: Answer, field: string | RegExp, label = "") {
  expect(a.status, `${label} status (${a.text.slice(0, 300)})`).toBe(400);
  expect(a.headers.get("content-type") ?? "", label).toMatch(/^application\/json/);
  expect(a.headers.get("x-svc-error-code"), label).toBe("invalid_request");
  const e = (a.body as { error?: { code?: string; message?: string; field?: string } }).error;
  expect(e?.code, label).toBe("invalid_request");
  expect(e?.message, label).toBeTypeOf("string");
  if (typeof field === "string") expect(e?.field, label).toBe(field);
  else expect(e?.field ?? "", label).toMatch(field);
}

const UNSTORABLE: [string, string][] = [
  ["a lone NUL", "\\u0000"],
  ["a NUL inside text", "ab\\u0000cd"],
  ["a lone high surrogate", "\\ud800"],
  ["a lone low surrogate", "x\\udc00"],
];

describe("finding 1: text Postgres cannot store is a 400 naming the field", () => {
  test.each(UNSTORABLE)("POST /v1/account/api-keys with %s in name", async (label, escaped) => {
    const before = await app.rt.db.apiKey.count({ where: { accountId: user.accountId } });
    const a = await send("POST", "/v1/account/api-keys", {
      body: `{"name":"${escaped}"}`,
      headers: { cookie: user.cookie },
    });
    expectInvalid(a, "name", label);
    expect(await app.rt.db.apiKey.count({ where: { accountId: user.accountId } })).toBe(before);
  });

  test.each(UNSTORABLE)("chat and Responses with %s in model", async (label, escaped) => {
    const chat = await send("POST", "/v1/chat/completions", {
      body: `{"model":"${escaped}","messages":[{"role":"user","content":"hi"}]}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(chat, "model", `chat ${label}`);
    const responses = await send("POST", "/v1/responses", {
      body: `{"model":"${escaped}","input":"hi"}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(responses, "model", `responses ${label}`);
  });

  test("deep inside a body and in an object key, the path is named", async () => {
    const nested = await send("POST", "/v1/chat/completions", {
      body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\\u0000"}]}]}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(nested, "messages.0.content.0.text");
    const key = await send("POST", "/v1/chat/completions", {
      body: `{"model":"m","metadata":{"k\\u0000":"v"},"messages":[]}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(key, /^metadata\.k/);
  });

  test("GET /v1/models/%00 (a path parameter) and a query value with %00", async () => {
    expectInvalid(await send("GET", "/v1/models/%00"), "path", "path");
    expectInvalid(await send("GET", "/v1/models/ab%00cd"), "path", "path inside");
    expectInvalid(await send("GET", "/v1/models/stats?window=%00"), "window", "query");
    expectInvalid(
      await send("GET", "/v1/account/inference-history?cursor=a%00", { headers: { cookie: user.cookie } }),
      "cursor",
      "query on a session route",
    );
  });

  test.each(UNSTORABLE)("GraphQL model(id:) with %s", async (label, escaped) => {
    // as a literal in the document (GraphQL escapes are JSON's, escaped once more inside the JSON body)
    const literal = await send("POST", "/graphql", {
      body: JSON.stringify({ query: `{ model(id: "${escaped}") { id } }` }),
    });
    expect(literal.status, `${label}: ${literal.text}`).toBeLessThan(500);
    const errs = (literal.body as { errors?: { extensions?: { code?: string } }[] }).errors;
    if (escaped.includes("u0000")) {
      expect(errs?.[0]?.extensions?.code, label).toBe("invalid_request");
    } else {
      // a lone surrogate escape is not valid GraphQL: a syntax error, not a 500
      expect(errs?.[0]?.extensions?.code ?? "GRAPHQL_PARSE_FAILED", label).not.toBe("internal_error");
    }
    // as a variable from a GET query string: decoded by yoga, checked before execution
    const vars = encodeURIComponent(`{"id":"${escaped}"}`);
    const q = encodeURIComponent("query($id: String!) { model(id: $id) { id } }");
    const viaGet = await send("GET", `/graphql?query=${q}&variables=${vars}`, {
      headers: { accept: "application/json" },
    });
    expect(viaGet.status, `${label}: ${viaGet.text}`).toBeLessThan(500);
    const getErrs = (viaGet.body as { errors?: { extensions?: { code?: string; details?: { field?: string } } }[] })
      .errors;
    expect(getErrs?.[0]?.extensions?.code, label).toBe("invalid_request");
    expect(getErrs?.[0]?.extensions?.details?.field, label).toBe("variables.id");
    // as a variable in a POST body: refused by the JSON parser, like every other body
    const viaPost = await send("POST", "/graphql", {
      body: `{"query":"query($id: String!) { model(id: $id) { id } }","variables":{"id":"${escaped}"}}`,
    });
    expectInvalid(viaPost, "variables.id", `${label} POST variables`);
  });

  test("text that is merely unusual is still accepted", async () => {
    const a = await send("POST", "/v1/account/api-keys", {
      body: JSON.stringify({ name: "émoji 🚀 \u00a0 ok" }),
      headers: { cookie: user.cookie },
    });
    expect(a.status, a.text).toBe(201);
  });
});

interface RouteLayer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  handle?: { stack?: RouteLayer[] };
}

/** Every Express route with a path parameter, as [method, path with each parameter replaced]. */
function parameterisedRoutes(replacement: string): [string, string][] {
  const out: [string, string][] = [];
  const walk = (stack: RouteLayer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        const paths = Array.isArray(layer.route.path) ? layer.route.path : [layer.route.path];
        for (const p of paths) {
          if (!p.includes(":")) continue;
          for (const m of Object.keys(layer.route.methods)) {
            if (m !== "_all") out.push([m.toUpperCase(), p.replace(/:[A-Za-z_]+/g, replacement)]);
          }
        }
      } else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app.http.app as unknown as { router: { stack: RouteLayer[] } }).router.stack);
  return out;
}

describe("finding 2: a malformed percent-escape in a path is a 400, always", () => {
  test.each([
    ["GET", "/v1/models/%ZZ", {}],
    ["GET", "/v1/agent/requests/%ZZ", {}],
    ["GET", "/v1/agent/requests/%ZZ", "bearer"],
    ["DELETE", "/v1/agent/keys/%ZZ", "bearer"],
    ["PATCH", "/v1/supply/offers/%ZZ", "session"],
    ["DELETE", "/v1/supply/offers/%ZZ", "session"],
    ["DELETE", "/v1/account/api-keys/%E0%A4%A", "session"],
    ["DELETE", "/v1/supply/upstream-keys/%ED%A0%80", "session"],
    ["GET", "/v1/models/svc/%", {}],
    ["GET", "/no-such-route/%ZZ", {}],
  ] as const)("%s %s (%o)", async (method, path, cred) => {
    const headers: Record<string, string> =
      cred === "bearer" ? { authorization: `Bearer ${apiKey}` } : cred === "session" ? { cookie: user.cookie } : {};
    const a = await send(method, path, { headers, body: method === "PATCH" ? "{}" : undefined });
    expectInvalid(a, "path", `${method} ${path}`);
  });

  test("every route with a path parameter, with and without a credential", async () => {
    const routes = parameterisedRoutes("%ZZ");
    expect(routes.length).toBeGreaterThan(8);
    for (const [method, path] of routes) {
      const credentials: Record<string, string>[] = [
        {},
        { authorization: `Bearer ${apiKey}` },
        { cookie: user.cookie },
      ];
      for (const headers of credentials) {
        const a = await send(method, path, { headers });
        expectInvalid(a, "path", `${method} ${path} ${JSON.stringify(Object.keys(headers))}`);
      }
    }
  });
});
