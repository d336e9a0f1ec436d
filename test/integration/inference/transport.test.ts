import { request as httpRequest } from "node:http";
import { gzipSync } from "node:zlib";
import supertest from "supertest";
import { beforeAll, describe, expect } from "vitest";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";
import { waitFor } from "../../../testkit/spawn.js";

/**
 * The two hot inference POSTs are served before Express (src/http/routes/inference.ts). These pin
 * that the answers are the ones Express gave (recorded before the fast path existed), and that every
 * other request on those paths still reaches Express.
 */

const MODEL = "zai-org-glm-5-1";
const CHAT = "/v1/chat/completions";
const RESPONSES = "/v1/responses";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const CHAT_BODY = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi [[sim:tokens=5]]" }] });
const RESPONSES_BODY = JSON.stringify({ model: MODEL, input: "hi [[sim:tokens=5]]" });

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
let apiKey = "";
let brokeKey = "";

beforeAll(async () => {
  await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 500_000_000n }]);
  apiKey = (await fundedBuyerKey(world.app, 100_000_000n)).apiKey;
  brokeKey = (await fundedBuyerKey(world.app, 0n)).apiKey;
});

interface Answer {
  status: number;
  /** header names in wire order, lower-cased */
  names: string[];
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request over node:http, so the answer's header order and hop-by-hop headers are visible. */
function send(
  method: string,
  path: string,
  o: { headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${world.app.baseUrl}${path}`, { method, headers: o.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          names: res.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()),
          headers: res.headers,
          text: Buffer.concat(chunks).toString("utf8"),
        }),
      );
    });
    req.on("error", reject);
    req.end(o.body);
  });
}

const json = (extra: Record<string, string> = {}) => ({ "content-type": "application/json", ...extra });
const bearer = (key = apiKey) => ({ authorization: `Bearer ${key}` });

function expectJsonError(a: Answer, status: number, code: string, message?: string) {
  expect(a.status).toBe(status);
  expect(a.headers["x-svc-request-id"]).toMatch(UUID);
  expect(a.headers["x-svc-error-code"]).toBe(code);
  expect(a.headers["content-type"]).toBe("application/json; charset=utf-8");
  expect(Number(a.headers["content-length"])).toBe(Buffer.byteLength(a.text));
  const body = JSON.parse(a.text) as { error: { code: string; message: string } };
  expect(body.error.code).toBe(code);
  if (message !== undefined) expect(body.error.message).toBe(message);
}

describe("success", () => {
  test("a buffered answer carries the headers Express sent: request id, cost headers, JSON type and length", async () => {
    const a = await send("POST", CHAT, { headers: { ...json(), ...bearer() }, body: CHAT_BODY });
    expect(a.status).toBe(200);
    expect(a.names).toEqual([
      "x-svc-request-id",
      "x-svc-support-reference",
      "x-svc-cost-usdc",
      "x-svc-clearing-price-cents",
      "x-balance-remaining",
      "server-timing",
      "content-type",
      "content-length",
      "date",
      "connection",
      "keep-alive",
    ]);
    expect(a.headers["x-svc-request-id"]).toMatch(UUID);
    expect(a.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(Number(a.headers["content-length"])).toBe(Buffer.byteLength(a.text));
    expect(a.headers.connection).toBe("keep-alive");
    expect(JSON.parse(a.text)).toMatchObject({ object: "chat.completion" });
  });

  test("a stream starts with the SSE headers and the request id", async () => {
    const body = JSON.stringify({ ...JSON.parse(RESPONSES_BODY), stream: true });
    const a = await send("POST", RESPONSES, { headers: { ...json(), ...bearer() }, body });
    expect(a.status).toBe(200);
    expect(a.headers["x-svc-request-id"]).toMatch(UUID);
    expect(a.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(a.headers["transfer-encoding"]).toBe("chunked");
    expect(a.text).toContain("event: response.completed");
  });

  test.each([
    ["a query string", `${CHAT}?a=1&b`, CHAT_BODY],
    ["an empty query string", `${RESPONSES}?`, RESPONSES_BODY],
    // the spellings Express also routes here are left to it (same core function)
    ["a trailing slash", `${RESPONSES}/?x=1`, RESPONSES_BODY],
    ["other letter case", "/V1/Chat/Completions", CHAT_BODY],
  ])("%s is still routed to the model", async (_label, path, body) => {
    const a = await send("POST", path, { headers: { ...json(), ...bearer() }, body });
    expect(a.status).toBe(200);
    expect(a.headers["x-svc-request-id"]).toMatch(UUID);
    expect(a.headers["x-svc-cost-usdc"]).toBeDefined();
  });

  test.each([
    ["a gzip body", { ...json({ "content-encoding": "gzip" }) }, gzipSync(CHAT_BODY)],
    ["a UTF-8 byte-order mark", json(), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(CHAT_BODY)])],
    ["an explicit charset", { "content-type": "application/json; charset=UTF-8" }, CHAT_BODY],
  ])("the JSON reader takes %s, as express.json does", async (_label, headers, body) => {
    const a = await send("POST", CHAT, { headers: { ...headers, ...bearer() }, body });
    expect(a.status).toBe(200);
  });

  test("in-process, `http.handler` serves the fast path too (supertest)", async () => {
    const r = await supertest(world.app.http.handler).post(RESPONSES).send({ model: MODEL, input: "hi" });
    expect(r.status).toBe(401);
    expect(r.headers["x-svc-request-id"]).toMatch(UUID);
  });
});

describe("rejection", () => {
  test.each([CHAT, RESPONSES])("malformed JSON on %s is 400 once the key checks out; 401 without one", async (path) => {
    const a = await send("POST", path, { headers: json(bearer()), body: '{"model": "x",' });
    expectJsonError(a, 400, "invalid_request", "Malformed JSON body.");
    expect(JSON.parse(a.text)).toEqual({ error: { code: "invalid_request", message: "Malformed JSON body." } });
    // the credential before the body (issue 18 finding 6): no key, no parse
    expectJsonError(
      await send("POST", path, { headers: json(), body: '{"model": "x",' }),
      401,
      "authentication_failed",
    );
  });

  test("a body over 20 MB is 413, with a declared length or chunked", async () => {
    const big = JSON.stringify({ pad: "x".repeat(21 * 1024 * 1024) });
    expectJsonError(
      await send("POST", CHAT, { headers: json(bearer()), body: big }),
      413,
      "payload_too_large",
      "Request body too large.",
    );
    const chunked = await new Promise<Answer>((resolve, reject) => {
      const req = httpRequest(
        `${world.app.baseUrl}${RESPONSES}`,
        { method: "POST", headers: json(bearer()) },
        (res) => {
          let text = "";
          res.on("data", (c: Buffer) => {
            text += c.toString();
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, names: [], headers: res.headers, text }));
        },
      );
      req.on("error", reject);
      for (let i = 0; i < 21; i++) req.write("x".repeat(1024 * 1024));
      req.end();
    });
    expectJsonError(chunked, 413, "payload_too_large");
  });

  // strict: false, and a non-JSON type leaves no body: the service answers with its own validation
  test.each([
    ["a bare JSON string", json(), '"hello"', "Body must be a JSON object with model and messages."],
    ["a bare JSON number", json(), "42", "Body must be a JSON object with model and messages."],
    ["JSON null", json(), "null", "Body must be a JSON object with model and messages."],
    [
      "a text/plain body",
      { "content-type": "text/plain" },
      CHAT_BODY,
      "Body must be a JSON object with model and messages.",
    ],
    ["no content type", {}, CHAT_BODY, "Body must be a JSON object with model and messages."],
    ["an empty JSON body", json(), "", "model is required (a live id from /v1/models)."],
  ])("%s reaches the service, which refuses it", async (_label, headers, body, message) => {
    const a = await send("POST", CHAT, { headers: { ...headers, ...bearer() }, body });
    expectJsonError(a, 400, "invalid_request", message);
  });

  test.each([
    ["a non-UTF charset", { "content-type": "application/json; charset=latin1" }],
    ["an unknown content coding", json({ "content-encoding": "foo" })],
  ])("%s is 415", async (_label, headers) => {
    const a = await send("POST", CHAT, { headers: { ...headers, ...bearer() }, body: CHAT_BODY });
    expectJsonError(a, 415, "unsupported_media_type", "Unsupported body encoding.");
  });

  test("a domain error keeps its hint headers and mirrored details", async () => {
    const a = await send("POST", CHAT, { headers: { ...json(), ...bearer(brokeKey) }, body: CHAT_BODY });
    expectJsonError(a, 402, "insufficient_balance");
    const body = JSON.parse(a.text) as { supportReference: string; error: { supportReference: string } };
    expect(a.headers["x-svc-support-reference"]).toBe(body.supportReference);
    expect(body.error.supportReference).toBe(body.supportReference);
  });
});

describe("authorisation", () => {
  test.each([
    ["no key", {}, "Missing Authorization: Bearer <API key>."],
    ["a Basic header", { authorization: "Basic abc" }, "Missing Authorization: Bearer <API key>."],
    ["an unknown key", { authorization: "Bearer svc_nope" }, "Invalid or revoked API key."],
    [
      "a session cookie beside a valid key",
      { cookie: "svc_session=abc" },
      "This route takes a Bearer API key; a session cookie is not accepted.",
    ],
  ])("%s is 401", async (label, headers, message) => {
    const auth = label.includes("cookie") ? { ...bearer(), ...headers } : headers;
    for (const [path, body] of [
      [CHAT, CHAT_BODY],
      [RESPONSES, RESPONSES_BODY],
    ] as const) {
      expectJsonError(
        await send("POST", path, { headers: { ...json(), ...auth }, body }),
        401,
        "authentication_failed",
        message,
      );
    }
  });
});

describe("Express keeps every other request on these paths", () => {
  const notFound = (method: string, path: string) => `No route for ${method} ${path}.`;
  test.each([
    ["GET", CHAT, {}, 404, notFound("GET", CHAT)],
    ["PUT", CHAT, {}, 404, notFound("PUT", CHAT)],
    ["DELETE", RESPONSES, {}, 404, notFound("DELETE", RESPONSES)],
    ["GET", RESPONSES, {}, 401, "Missing Authorization: Bearer <API key>."],
    ["GET", RESPONSES, "key", 404, "Responses are not stored; there is nothing to retrieve."],
    ["GET", `${RESPONSES}?x=1`, "key", 404, "Responses are not stored; there is nothing to retrieve."],
    ["GET", `${RESPONSES}/abc`, "key", 404, "Responses are not stored; there is nothing to retrieve."],
    ["POST", `${RESPONSES}/abc`, "key", 404, notFound("POST", `${RESPONSES}/abc`)],
    ["POST", `${CHAT}//`, "key", 404, notFound("POST", `${CHAT}//`)],
  ])("%s %s (%s) is %i", async (method, path, auth, status, message) => {
    const a = await send(method, path, { headers: auth === "key" ? bearer() : {} });
    expect(a.status).toBe(status);
    expect(a.headers["x-svc-request-id"]).toMatch(UUID);
    expect((JSON.parse(a.text) as { error: { message: string } }).error.message).toBe(message);
  });

  test("HEAD answers the GET's status and length without a body", async () => {
    const chat = await send("HEAD", CHAT, { headers: bearer() });
    expect([chat.status, chat.headers["content-length"], chat.text]).toEqual([404, "82", ""]);
    const resp = await send("HEAD", RESPONSES);
    expect([resp.status, resp.headers["x-svc-error-code"], resp.text]).toEqual([401, "authentication_failed", ""]);
  });

  test("OPTIONS lists the methods Express routes there", async () => {
    const chat = await send("OPTIONS", CHAT);
    expect([chat.status, chat.headers.allow, chat.text]).toEqual([200, "POST", "POST"]);
    const resp = await send("OPTIONS", RESPONSES);
    expect([resp.status, resp.headers.allow]).toEqual([200, "GET, HEAD, POST"]);
  });

  test("a PUT on an inference path is 404 without its body being read (issue 18 finding 6)", async () => {
    expectJsonError(await send("PUT", CHAT, { headers: json(), body: "{" }), 404, "not_found");
  });
});

describe("the fast path and Express answer alike", () => {
  /** status, header names and order, and the body, with per-request values blanked */
  function shape(a: Answer) {
    const varying = new Set([
      "date",
      "x-svc-request-id",
      "x-svc-support-reference",
      "server-timing",
      "x-balance-remaining",
    ]);
    const headers = Object.fromEntries(
      Object.entries(a.headers).map(([k, v]) => [k, varying.has(k) || k === "content-length" ? "<v>" : v]),
    );
    const text = a.text.replace(/"(id|created|created_at|supportReference)":("[^"]*"|\d+)/g, '"$1":<v>');
    return { status: a.status, names: a.names, headers, text };
  }

  // headers are built inside the test: the keys exist only once beforeAll ran
  test.each([
    ["no key", () => json(), CHAT_BODY],
    ["malformed JSON", () => json(bearer()), "{"],
    ["a non-JSON type", () => ({ "content-type": "text/plain", ...bearer() }), CHAT_BODY],
    ["a non-UTF charset", () => ({ "content-type": "application/json; charset=latin1", ...bearer() }), CHAT_BODY],
    ["an unpaid buyer", () => json(bearer(brokeKey)), CHAT_BODY],
    ["a buffered answer", () => json(bearer()), CHAT_BODY],
    ["a stream", () => json(bearer()), JSON.stringify({ ...JSON.parse(CHAT_BODY), stream: true })],
  ])("%s: the exact path (fast) and its trailing-slash spelling (Express)", async (_label, headers, body) => {
    const fast = await send("POST", CHAT, { headers: headers(), body });
    const viaExpress = await send("POST", `${CHAT}/`, { headers: headers(), body });
    expect(shape(fast)).toEqual(shape(viaExpress));
  });
});

describe("in-flight accounting", () => {
  test("an open stream counts until the buyer leaves, so shutdown waits for it", async () => {
    const ac = new AbortController();
    const res = await fetch(`${world.app.baseUrl}${CHAT}`, {
      method: "POST",
      headers: json(bearer()),
      body: JSON.stringify({
        model: MODEL,
        stream: true,
        messages: [{ role: "user", content: "slow [[sim:tokens=40]] [[sim:chunks=20]] [[sim:chunk_delay_ms=150]]" }],
      }),
      signal: ac.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect(world.app.http.inFlight.size).toBe(1);
    expect(await world.app.http.inFlight.drained(50)).toBe(false);
    ac.abort();
    await waitFor(() => world.app.http.inFlight.size === 0, 5000, "the stream to leave the in-flight count");
    expect(await world.app.http.inFlight.drained(50)).toBe(true);
  });

  test("answered and refused requests leave the count at zero", async () => {
    await send("POST", CHAT, { headers: json(bearer()), body: CHAT_BODY });
    await send("POST", CHAT, { headers: json(), body: "{" });
    await send("POST", RESPONSES, { headers: json(), body: RESPONSES_BODY });
    expect(world.app.http.inFlight.size).toBe(0);
  });
});
