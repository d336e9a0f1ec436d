// The upstream client's buffered call (`inference` with `stream: false`, undici's dispatcher without a body stream)
// against the simulator: answers, HTTP failures, dropped connections, its timeout and the buyer's
// abort each come back as the failure the router classifies; an answer that is not JSON is an
// `invalid_response`; the pool keeps serving after every kind of failure.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { UpstreamClient } from "../../../src/adapters/upstream/client.js";
import type { UpstreamSimulator } from "../../../src/local/upstream-sim/index.js";
import { startUpstreamSimulator } from "../../../src/local/upstream-sim/index.js";

const KEY = "postjson-key";
const CHAT = { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hi [[sim:tokens=5]]" }] };
let sim: UpstreamSimulator;
let client: UpstreamClient;

beforeAll(async () => {
  sim = await startUpstreamSimulator({ port: 0, keys: [{ key: KEY, diemMicro: 100_000_000n }] });
  client = new UpstreamClient({ baseUrl: sim.baseUrl });
});
afterAll(async () => {
  await client.close();
  await sim.close();
});

const call = (opts: { signal?: AbortSignal; timeoutMs?: number } = {}) =>
  client.inference("/chat/completions", KEY, CHAT, { stream: false, timeoutMs: 10_000, ...opts });

describe("UpstreamClient.inference, buffered", () => {
  test("a 2xx answer is read to its end and parsed, with its status and headers", async () => {
    const r = await call();
    if (!r.ok) throw new Error(`expected an answer, got ${JSON.stringify(r.failure)}`);
    expect(r.value.status).toBe(200);
    expect(r.value.headers["x-venice-balance-diem"]).toBeDefined();
    const body = r.value.json as { usage: { completion_tokens: number }; choices: unknown[] };
    expect(body.usage.completion_tokens).toBe(5);
    expect(body.choices).toHaveLength(1);
  });

  test("an HTTP failure carries its status, kind, message and Retry-After; the pool serves the next call", async () => {
    sim.state.injectFault(KEY, { kind: "http_429", count: 1 });
    const r = await call();
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.failure).toMatchObject({ kind: "rate_limited", status: 429 });
    expect(r.failure.message.length).toBeGreaterThan(0);
    sim.state.injectFault(KEY, { kind: "http_402_balance", count: 1 });
    const paid = await call();
    expect(paid.ok ? null : paid.failure.kind).toBe("payment");
    expect((await call()).ok).toBe(true);
  });

  test("a dropped connection is a network failure; the pool serves the next call", async () => {
    sim.state.injectFault(KEY, { kind: "drop", count: 1 });
    const r = await call();
    expect(r.ok ? null : r.failure.kind).toBe("network");
    expect((await call()).ok).toBe(true);
  });

  test("an answer that does not come within timeoutMs is a timeout failure", async () => {
    sim.state.injectFault(KEY, { kind: "timeout", count: 1 });
    const r = await call({ timeoutMs: 150 });
    expect(r.ok ? null : r.failure.kind).toBe("timeout");
    expect((await call()).ok).toBe(true);
  });

  test("the buyer leaving (its signal aborting) cancels the call, before it starts or while it waits", async () => {
    const gone = new AbortController();
    gone.abort();
    const before = await call({ signal: gone.signal });
    expect(before.ok ? null : before.failure.kind).toBe("timeout");
    sim.state.injectFault(KEY, { kind: "timeout", count: 1 });
    const leaving = new AbortController();
    const pending = call({ signal: leaving.signal });
    setTimeout(() => leaving.abort(), 50);
    const during = await pending;
    expect(during.ok ? null : during.failure.kind).toBe("timeout");
    expect((await call()).ok).toBe(true);
  });

  test("a 2xx answer that is not JSON is an invalid_response failure", async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{ not json");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const odd = new UpstreamClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    try {
      const r = await odd.inference("/chat/completions", KEY, CHAT, { stream: false, timeoutMs: 5_000 });
      expect(r.ok ? null : r.failure).toMatchObject({ kind: "invalid_response", status: 200 });
    } finally {
      await odd.close();
      await new Promise((r) => server.close(r));
    }
  });
});
