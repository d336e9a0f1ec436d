import { connect } from "node:net";
import { describe, expect } from "vitest";
import { appTest as test } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";

/**
 * Issue 18 "Found by hostile input": what a hostile client sent that the service answered with a 500
 * (or an empty body). Each answer must be a 4xx in the JSON error shape naming the problem.
 */

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
}

async function send(
  app: TestApp,
  method: string,
  path: string,
  init: { body?: string; headers?: Record<string, string> } = {},
) {
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
  test.for(UNSTORABLE)(
    "POST /v1/account/api-keys with %s in name",
    async ([label, escaped], { app, agent: { user } }) => {
      const before = await app.rt.db.apiKey.count({ where: { accountId: user.accountId } });
      const a = await send(app, "POST", "/v1/account/api-keys", {
        body: `{"name":"${escaped}"}`,
        headers: { cookie: user.cookie },
      });
      expectInvalid(a, "name", label);
      expect(await app.rt.db.apiKey.count({ where: { accountId: user.accountId } })).toBe(before);
    },
  );

  test.for(UNSTORABLE)("chat and Responses with %s in model", async ([label, escaped], { app, agent: { apiKey } }) => {
    const chat = await send(app, "POST", "/v1/chat/completions", {
      body: `{"model":"${escaped}","messages":[{"role":"user","content":"hi"}]}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(chat, "model", `chat ${label}`);
    const responses = await send(app, "POST", "/v1/responses", {
      body: `{"model":"${escaped}","input":"hi"}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(responses, "model", `responses ${label}`);
  });

  test("deep inside a body and in an object key, the path is named", async ({ app, agent: { apiKey } }) => {
    const nested = await send(app, "POST", "/v1/chat/completions", {
      body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\\u0000"}]}]}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(nested, "messages.0.content.0.text");
    const key = await send(app, "POST", "/v1/chat/completions", {
      body: `{"model":"m","metadata":{"k\\u0000":"v"},"messages":[]}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(key, /^metadata\.k/);
  });

  test("GET /v1/models/%00 (a path parameter) and a query value with %00", async ({ app, agent: { user } }) => {
    expectInvalid(await send(app, "GET", "/v1/models/%00"), "path", "path");
    expectInvalid(await send(app, "GET", "/v1/models/ab%00cd"), "path", "path inside");
    expectInvalid(await send(app, "GET", "/v1/models/stats?window=%00"), "window", "query");
    expectInvalid(
      await send(app, "GET", "/v1/account/inference-history?cursor=a%00", { headers: { cookie: user.cookie } }),
      "cursor",
      "query on a session route",
    );
  });

  test.for(UNSTORABLE)("GraphQL model(id:) with %s", async ([label, escaped], { app }) => {
    // as a literal in the document (GraphQL escapes are JSON's, escaped once more inside the JSON body)
    const literal = await send(app, "POST", "/graphql", {
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
    const viaGet = await send(app, "GET", `/graphql?query=${q}&variables=${vars}`, {
      headers: { accept: "application/json" },
    });
    expect(viaGet.status, `${label}: ${viaGet.text}`).toBeLessThan(500);
    const getErrs = (viaGet.body as { errors?: { extensions?: { code?: string; details?: { field?: string } } }[] })
      .errors;
    expect(getErrs?.[0]?.extensions?.code, label).toBe("invalid_request");
    expect(getErrs?.[0]?.extensions?.details?.field, label).toBe("variables.id");
    // as a variable in a POST body: refused by the JSON parser, like every other body
    const viaPost = await send(app, "POST", "/graphql", {
      body: `{"query":"query($id: String!) { model(id: $id) { id } }","variables":{"id":"${escaped}"}}`,
    });
    expectInvalid(viaPost, "variables.id", `${label} POST variables`);
  });

  test("text that is merely unusual is still accepted", async ({ app, agent: { user } }) => {
    const a = await send(app, "POST", "/v1/account/api-keys", {
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
function parameterisedRoutes(app: TestApp, replacement: string): [string, string][] {
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
  test.for([
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
  ] as const)("%s %s (%o)", async ([method, path, cred], { app, agent: { user, apiKey } }) => {
    const headers: Record<string, string> =
      cred === "bearer" ? { authorization: `Bearer ${apiKey}` } : cred === "session" ? { cookie: user.cookie } : {};
    const a = await send(app, method, path, { headers, body: method === "PATCH" ? "{}" : undefined });
    expectInvalid(a, "path", `${method} ${path}`);
  });

  test("every route with a path parameter, with and without a credential", async ({ app, agent: { user, apiKey } }) => {
    const routes = parameterisedRoutes(app, "%ZZ");
    expect(routes.length).toBeGreaterThan(8);
    for (const [method, path] of routes) {
      const credentials: Record<string, string>[] = [
        {},
        { authorization: `Bearer ${apiKey}` },
        { cookie: user.cookie },
      ];
      for (const headers of credentials) {
        const a = await send(app, method, path, { headers });
        expectInvalid(a, "path", `${method} ${path} ${JSON.stringify(Object.keys(headers))}`);
      }
    }
  });
});

/**
 * A POST whose body is announced (`Content-Length`) but only begun: the answer that arrives while the
 * body is still being sent, or null when none comes within `waitMs` (the server is waiting for it).
 */
function partialPost(
  app: TestApp,
  path: string,
  headers: Record<string, string>,
  contentLength: number,
  waitMs = 3000,
): Promise<{ status: number; headers: string; body: unknown } | null> {
  const { hostname, port } = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let data = "";
    const done = (v: { status: number; headers: string; body: unknown } | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(null), waitMs);
    socket.on("error", (e) => (data ? undefined : reject(e)));
    socket.on("data", (chunk) => {
      data += chunk.toString("utf8");
      const end = data.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = data.slice(0, end);
      const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? "0");
      const rest = data.slice(end + 4);
      if (Buffer.byteLength(rest) < length) return;
      let body: unknown = rest;
      try {
        body = JSON.parse(rest);
      } catch {}
      done({ status: Number(head.split(" ")[1]), headers: head, body });
    });
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${contentLength}\r\n${extra}\r\n`,
    );
    // the first 64 KB of a body that never ends
    socket.write(`{"pad":"${"x".repeat(64 * 1024)}`);
  });
}

describe("finding 6: every error carries the JSON error shape; the credential before the body", () => {
  function expectShape(a: Answer, status: number, code: string) {
    expect(a.status, a.text.slice(0, 200)).toBe(status);
    expect(a.headers.get("content-type") ?? "").toMatch(/^application\/json/);
    expect(a.headers.get("x-svc-error-code")).toBe(code);
    expect((a.body as { error?: { code?: string; message?: string } }).error?.code).toBe(code);
  }

  test("oversized headers → 431 with the JSON error shape (node's own answer had no body)", async ({ app }) => {
    expectShape(
      await send(app, "GET", "/healthz", { headers: { "x-big": "a".repeat(20_000) } }),
      431,
      "headers_too_large",
    );
  });

  test("an oversized query string → 431 with the JSON error shape", async ({ app }) => {
    expectShape(await send(app, "GET", `/v1/models?q=${"a".repeat(20_000)}`), 431, "headers_too_large");
  });

  test("a malformed request line → 400 with the JSON error shape", async ({ app }) => {
    const { hostname, port } = new URL(app.baseUrl);
    const raw = await new Promise<string>((resolve) => {
      const socket = connect({ host: hostname, port: Number(port) });
      let data = "";
      socket.on("data", (c) => {
        data += c.toString("utf8");
      });
      socket.on("close", () => resolve(data));
      socket.on("error", () => resolve(data));
      socket.write("NOT A REQUEST\r\n\r\n");
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw).toMatch(/x-svc-error-code: invalid_request/i);
    const body = JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };
    expect(body.error.code).toBe("invalid_request");
  });

  test("/graphql with an unsupported content type → 415 with the JSON error shape", async ({ app }) => {
    const a = await send(app, "POST", "/graphql", {
      body: "{ models { id } }",
      headers: { "content-type": "text/plain" },
    });
    expectShape(a, 415, "unsupported_media_type");
  });

  test.for([
    ["the fast path (chat), no credential", "/v1/chat/completions", {}],
    ["the fast path (Responses), an unknown key", "/v1/responses", { authorization: "Bearer svc_nope" }],
    ["the fast path, a session cookie", "/v1/chat/completions", "cookie"],
    ["an Express Bearer route (video quote)", "/v1/video/quote", {}],
    ["an Express Bearer route (agent keys), an unknown key", "/v1/agent/keys", { authorization: "Bearer svc_nope" }],
    ["refill", "/v1/x402/refill", {}],
    ["a session route, no cookie", "/v1/account/api-keys", {}],
    ["a session route, an Authorization header", "/v1/supply/offers", "bearer"],
    ["a session route, an unknown session", "/v1/supply/upstream-keys", { cookie: "svc_session=nope" }],
  ] as const)(
    "%s: 401 while a 20 MB body is still being sent",
    async ([_label, path, cred], { app, agent: { user, apiKey } }) => {
      const headers: Record<string, string> =
        cred === "cookie" ? { cookie: user.cookie } : cred === "bearer" ? { authorization: `Bearer ${apiKey}` } : cred;
      const a = await partialPost(app, path, headers, 20_000_000);
      expect(a, "an answer before the body is complete").not.toBeNull();
      expect(a?.status).toBe(401);
      expect((a?.body as { error?: { code?: string } } | undefined)?.error?.code).toBe("authentication_failed");
    },
  );

  test.for([
    ["the fast path", "/v1/chat/completions", "bearer"],
    ["an Express Bearer route", "/v1/agent/keys", "bearer"],
    ["a session route", "/v1/account/api-keys", "cookie"],
  ] as const)(
    "%s with a valid credential: the body limit still applies (413)",
    async ([_l, path, cred], { app, agent: { user, apiKey } }) => {
      const headers: Record<string, string> =
        cred === "cookie" ? { cookie: user.cookie } : { authorization: `Bearer ${apiKey}` };
      const a = await send(app, "POST", path, { body: JSON.stringify({ pad: "x".repeat(21 * 1024 * 1024) }), headers });
      expectShape(a, 413, "payload_too_large");
    },
  );

  test("a valid credential's body is read and served as before", async ({ app, agent: { user, apiKey } }) => {
    const a = await send(app, "POST", "/v1/account/api-keys", {
      body: JSON.stringify({ name: "after the credential" }),
      headers: { cookie: user.cookie },
    });
    expect(a.status, a.text).toBe(201);
    const malformed = await send(app, "POST", "/v1/agent/keys", {
      body: '{"name":',
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expectInvalid(malformed, /.*/);
  });
});

describe("issue 38: 100,000 nested arrays in a JSON body", () => {
  // V8's JSON.parse is iterative (a million levels parse in a fresh process); the depth check that
  // follows it is iterative too (lib/json-safety.ts): no route may answer this with a 5xx
  const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;

  test.for([
    ["a public route", "/v1/x402/signup", "none"],
    ["the fast path", "/v1/chat/completions", "bearer"],
    ["an Express Bearer route", "/v1/agent/keys", "bearer"],
    ["a session route", "/v1/account/api-keys", "cookie"],
    ["the MCP route", "/mcp", "bearer"],
    ["/graphql", "/graphql", "none"],
  ] as const)(
    "%s → 400 invalid_request naming the depth",
    async ([_l, path, cred], { app, agent: { user, apiKey } }) => {
      const headers: Record<string, string> = { accept: "application/json, text/event-stream" };
      if (cred === "cookie") headers.cookie = user.cookie;
      if (cred === "bearer") headers.authorization = `Bearer ${apiKey}`;
      const a = await send(app, "POST", path, { body: deep, headers });
      expectInvalid(a, /^0\.0\.0/, path);
      expect((a.body as { error: { message: string } }).error.message).toMatch(/deeper than 64 levels/);
    },
  );

  test("in an X-PAYMENT header (base64 JSON, as deep as a header holds) → a 4xx in the error shape", async ({
    app,
  }) => {
    const payment = Buffer.from(`${"[".repeat(5_000)}${"]".repeat(5_000)}`).toString("base64");
    const a = await send(app, "POST", "/v1/x402/signup", {
      body: JSON.stringify({ keyName: "deep" }),
      headers: { "x-payment": payment },
    });
    expect(a.status, a.text.slice(0, 300)).toBeGreaterThanOrEqual(400);
    expect(a.status, a.text.slice(0, 300)).toBeLessThan(500);
    expect((a.body as { error?: { code?: string } }).error?.code).toBeTypeOf("string");
  });
});
