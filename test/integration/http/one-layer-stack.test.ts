import { createServer } from "node:http";
import { connect } from "node:net";
import { describe, expect } from "vitest";
import { answerClientError } from "../../../src/http/error-response.js";
import { type Agent, appTest } from "../../../testkit/app-test.js";
import { freePort } from "../../../testkit/harness.js";

/**
 * Issue 27 deliver 5: the HTTP layers (in-flight count, timing, request id, unsafe URL refusal,
 * credential before body, body limits and parsing, the error ending) are defined once
 * (src/http/layers.ts) and composed both for Express and for the node:http fast path of the two hot
 * inference POSTs. The same hostile requests go down both paths for the same route: the app's
 * listener (where `POST /v1/chat/completions` and `POST /v1/responses` never reach Express) and a
 * second listener over the Express app alone (`http.app`, which routes those two paths itself).
 * Every answer must agree: status, error code, the headers that matter in their order, the body.
 */

/** a second listener over the Express app alone, beside the app's own (fast path) listener */
const test = appTest.extend("expressUrl", { scope: "file" }, async ({ app }, { onCleanup }) => {
  const port = await freePort();
  const expressOnly = createServer(app.http.app);
  expressOnly.on("clientError", answerClientError);
  await new Promise<void>((resolve) => expressOnly.listen(port, "127.0.0.1", resolve));
  onCleanup(async () => {
    expressOnly.closeAllConnections();
    await new Promise<void>((r) => expressOnly.close(() => r()));
  });
  return `http://127.0.0.1:${port}`;
});

const CHAT = "/v1/chat/completions";
const RESPONSES = "/v1/responses";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const BODIES: Record<string, string> = {
  [CHAT]: JSON.stringify({ model: "qwen3-4b", messages: [{ role: "user", content: "hi" }] }),
  [RESPONSES]: JSON.stringify({ model: "qwen3-4b", input: "hi" }),
};

interface Answer {
  status: number;
  /** header names in wire order, lower-cased */
  names: string[];
  headers: Record<string, string>;
  text: string;
}

/**
 * One request written raw on its own connection (the target byte for byte, no client-side
 * normalisation); `body` may be shorter than a declared Content-Length (a body still being sent).
 * Resolves with the first answer once its declared length has arrived.
 */
function sendRaw(baseUrl: string, method: string, target: string, headers: Record<string, string>, body = "") {
  const { hostname, port } = new URL(baseUrl);
  return new Promise<Answer>((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let data = Buffer.alloc(0);
    let answered = false;
    const finish = (a: Answer) => {
      answered = true;
      socket.destroy();
      resolve(a);
    };
    const parse = (): Answer | undefined => {
      const end = data.indexOf("\r\n\r\n");
      if (end < 0) return undefined;
      const lines = data.subarray(0, end).toString("latin1").split("\r\n");
      const names: string[] = [];
      const hs: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).toLowerCase();
        names.push(name);
        hs[name] = line.slice(colon + 1).trim();
      }
      const rest = data.subarray(end + 4);
      const length = method === "HEAD" ? 0 : Number(hs["content-length"] ?? "0");
      if (rest.length < length) return undefined;
      const status = Number(lines[0]?.split(" ")[1]);
      return { status, names, headers: hs, text: rest.subarray(0, length).toString("utf8") };
    };
    socket.on("data", (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const a = parse();
      if (a) finish(a);
    });
    socket.on("error", (err) => {
      if (!answered) reject(err);
    });
    socket.on("close", () => {
      if (!answered) reject(new Error(`no complete answer to ${method} ${target}: ${data.toString("latin1")}`));
    });
    const head = Object.entries({ host: `${hostname}:${port}`, ...headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    socket.write(`${method} ${target} HTTP/1.1\r\n${head}\r\n`);
    if (body) socket.write(body, () => undefined);
  });
}

/** What both paths must agree on: per-request values (the request id, the date) only checked for presence. */
function shape(a: Answer) {
  expect(a.headers["x-svc-request-id"], "every answer has a request id").toMatch(UUID);
  expect(a.headers.date).toBeDefined();
  const headers = { ...a.headers, "x-svc-request-id": "<id>", date: "<date>" };
  const text = a.text.replace(/"(supportReference|requestId)":"[^"]*"/g, '"$1":"<v>"');
  return { status: a.status, code: a.headers["x-svc-error-code"], names: a.names, headers, text };
}

interface Case {
  method?: string;
  /** appended to the path */
  query?: string;
  /** the request headers, for the file's signed-in user with a key */
  headers: (a: Agent) => Record<string, string>;
  /** the route's own valid body unless given */
  body?: string;
  /** the Content-Length declared (a body still being sent), when it is not the body's */
  declared?: number;
  status: number;
  code?: string;
}

const json = { "content-type": "application/json" };
const key = (a: Agent) => ({ ...json, authorization: `Bearer ${a.apiKey}` });
const nobody = () => json;

const CASES: [string, Case][] = [
  // the URL: text Postgres could not store is refused before the credential; malformed escapes in a
  // query are decoded leniently (node's querystring, as Express parses it) and so are not refused
  ["a NUL as a query key, with a key", { query: "?%00=", headers: key, status: 400, code: "invalid_request" }],
  ["a NUL as a query key, no credential", { query: "?%00=", headers: nobody, status: 400, code: "invalid_request" }],
  ["a NUL inside a query value", { query: "?a=b%00c", headers: nobody, status: 400, code: "invalid_request" }],
  ["a NUL after a lone surrogate's escape", { query: "?x=%ED%A0%80%00", headers: key, status: 400 }],
  ["a lone surrogate's UTF-8 escape alone", { query: "?x=%ED%A0%80", headers: nobody, status: 401 }],
  ["a malformed escape %ZZ", { query: "?a=%ZZ", headers: nobody, status: 401 }],
  ["a truncated escape", { query: "?a=%E0%A4%A&b=%", headers: nobody, status: 401 }],
  ["a NUL after a fragment mark", { query: "?a=1#%00", headers: nobody, status: 401 }],
  ["an ordinary query string", { query: "?trace=1&x", headers: nobody, status: 401, code: "authentication_failed" }],
  // the credential before the body
  ["no credential", { headers: nobody, status: 401, code: "authentication_failed" }],
  ["a Basic header", { headers: () => ({ ...json, authorization: "Basic abc" }), status: 401 }],
  ["an unknown key", { headers: () => ({ ...json, authorization: "Bearer svc_nope" }), status: 401 }],
  ["a session cookie on the Bearer route", { headers: (a) => ({ ...json, cookie: a.user.cookie }), status: 401 }],
  [
    "a session cookie beside a valid key",
    { headers: (a) => ({ ...key(a), cookie: a.user.cookie }), status: 401, code: "authentication_failed" },
  ],
  ["malformed JSON, no credential", { headers: nobody, body: '{"model":', status: 401 }],
  ["malformed JSON, a valid key", { headers: key, body: '{"model":', status: 400, code: "invalid_request" }],
  [
    "a 20 MB body still being sent, no credential",
    { headers: nobody, body: `{"pad":"${"x".repeat(64 * 1024)}`, declared: 20_000_000, status: 401 },
  ],
  [
    "a body over the limit, a valid key",
    {
      headers: key,
      body: JSON.stringify({ pad: "x".repeat(21 * 1024 * 1024) }),
      status: 413,
      code: "payload_too_large",
    },
  ],
  // body parsing and content types
  ["a text/plain body", { headers: (a) => ({ ...key(a), "content-type": "text/plain" }), status: 400 }],
  ["no content type", { headers: (a) => ({ authorization: `Bearer ${a.apiKey}` }), status: 400 }],
  [
    "a non-UTF charset",
    {
      headers: (a) => ({ ...key(a), "content-type": "application/json; charset=latin1" }),
      status: 415,
      code: "unsupported_media_type",
    },
  ],
  ["an unknown content coding", { headers: (a) => ({ ...key(a), "content-encoding": "foo" }), status: 415 }],
  ["a NUL in the body", { headers: key, body: '{"model":"a\\u0000b","input":"x","messages":[]}', status: 400 }],
  ["a lone surrogate in the body", { headers: key, body: '{"model":"\\ud800","input":"x"}', status: 400 }],
  ["JSON nested past 64 levels", { headers: key, body: `${"[".repeat(70)}${"]".repeat(70)}`, status: 400 }],
  ["a bare JSON string", { headers: key, body: '"hello"', status: 400 }],
  // methods the fast path does not take
  ["HEAD", { method: "HEAD", headers: key, body: "", status: 404 }],
  ["PUT with a body", { method: "PUT", headers: nobody, body: "{", status: 404, code: "not_found" }],
  ["DELETE", { method: "DELETE", headers: key, body: "", status: 404 }],
];

describe.each([CHAT, RESPONSES])("%s: the fast path and Express answer alike", (path) => {
  test.for(CASES)("%s", async ([_label, c], { app, agent, expressUrl }) => {
    const method = c.method ?? "POST";
    const body = c.body ?? BODIES[path] ?? "";
    const headers: Record<string, string> = { ...c.headers(agent) };
    if (method === "POST" || method === "PUT" || body !== "") {
      headers["content-length"] = String(c.declared ?? Buffer.byteLength(body));
    }
    const target = `${path}${c.query ?? ""}`;
    const fast = await sendRaw(app.baseUrl, method, target, headers, body);
    const viaExpress = await sendRaw(expressUrl, method, target, headers, body);
    expect(fast.status, fast.text.slice(0, 300)).toBe(c.status);
    if (c.code) expect(fast.headers["x-svc-error-code"]).toBe(c.code);
    expect(shape(fast)).toEqual(shape(viaExpress));
  });
});

describe("the refusals name what they refuse, on both paths", () => {
  test.for(["fast", "express"])("a NUL in the query names the query key (%s)", async (which, { app, expressUrl }) => {
    const base = which === "express" ? expressUrl : app.baseUrl;
    const a = await sendRaw(base, "POST", `${CHAT}?a=b%00c`, { ...json, "content-length": "2" }, "{}");
    expect(a.status).toBe(400);
    expect((JSON.parse(a.text) as { error: { field?: string } }).error.field).toBe("a");
  });
});
