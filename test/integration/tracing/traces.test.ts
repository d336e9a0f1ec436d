// Issue 31 deliver 4: OpenTelemetry traces. The app runs with OTEL_EXPORTER_OTLP_ENDPOINT pointed at
// an in-process OTLP/HTTP receiver (testkit/otlp.ts); each test reads back the span tree of one
// request: the server span (a caller's `traceparent` its parent) → admission, one client span per
// attempt (GenAI conventions; the failed one with its fall-forward reason), settlement; the
// `traceparent` the upstream simulator received names the attempt's span; a BullMQ job queued in a
// traced request continues its trace; and no attribute anywhere carries a key or the prompt.
// Issue 40 deliver 3: a streamed chat's attempt span carries every GenAI attribute the conventions
// recommend for it (response id, model, finish reasons, cache and reasoning breakdowns, time to first
// chunk), `gen_ai.request.stream` only when streaming, and no deprecated `gen_ai.system`.
import { randomBytes, randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { call } from "../../../testkit/actors.js";
import { appTest } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import { addSupply, chat, emptyBook, fundedBuyerKey, responses } from "../../../testkit/market.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../../../testkit/otlp.js";
import { startReceiver, webhookFor } from "../../../testkit/webhooks.js";

const MODEL = "zai-org-glm-5-1";

const test = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("otlp", { scope: "file" }, async ({}, { onCleanup }) => {
    const otlp = await startOtlpReceiver();
    onCleanup(() => otlp.close());
    return otlp;
  });
test.override("appOptions", ({ otlp }) => ({
  sim: {},
  syncCatalog: true,
  workers: true,
  env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, KEY_MAX_IN_FLIGHT: "64" },
}));

/** A caller's W3C trace context: its trace id and the id of the caller's own span. */
function callerContext() {
  const traceId = randomBytes(16).toString("hex");
  const parentId = randomBytes(8).toString("hex");
  return { traceId, parentId, traceparent: `00-${traceId}-${parentId}-01` };
}

/**
 * Waits until `done` holds, flushing the app's spans to the receiver on every look (a server span
 * ends when its response closes, a moment after the client has it; a job's span after the job).
 */
async function flushUntil(app: TestApp, done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    await app.rt.tracing.flush();
    if (done()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`spans never arrived: ${what}`);
}

/** The spans of `traceId` once it has a server span and `last` (the span that ends it). */
async function traceOf(
  app: TestApp,
  otlp: OtlpReceiver,
  traceId: string,
  last: (s: ReceivedSpan) => boolean,
): Promise<ReceivedSpan[]> {
  const spans = () => otlp.spans.filter((s) => s.traceId === traceId);
  await flushUntil(app, () => spans().some((s) => s.kind === "server") && spans().some(last), `trace ${traceId}`);
  return spans();
}

const one = (spans: ReceivedSpan[], pred: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan => {
  const found = spans.filter(pred);
  expect(found, what).toHaveLength(1);
  return found[0] as ReceivedSpan;
};
const attempts = (spans: ReceivedSpan[]) =>
  spans
    .filter((s) => s.kind === "client" && s.attributes["gen_ai.operation.name"] === "chat")
    .sort((a, b) => Number(a.attributes["svc.attempt"]) - Number(b.attributes["svc.attempt"]));
/** the parent span id in a `traceparent` header */
const parentIn = (traceparent: string | null) => traceparent?.split("-")[2];
const traceIn = (traceparent: string | null) => traceparent?.split("-")[1];

/** An empty book and no faults: each test routes on its own supply only. */
async function freshBook(app: TestApp, sim: { state: { clearFaults(): void } }) {
  await emptyBook(app);
  sim.state.clearFaults();
}

/** No attribute of any span received, nor of its resource, contains one of `secrets`. */
function expectNoSecrets(otlp: OtlpReceiver, secrets: string[]) {
  expect(otlp.spans.length).toBeGreaterThan(0);
  for (const s of otlp.spans) {
    for (const [k, v] of Object.entries(s.attributes)) {
      const text = JSON.stringify(v);
      for (const secret of secrets) expect(text.includes(secret), `${s.name} ${k}`).toBe(false);
    }
  }
}

describe("one trace per request", () => {
  test("a fall-forward: server → admission, two attempts (the first with its reason), settlement", async ({
    app,
    sim,
    otlp,
  }) => {
    await freshBook(app, sim);
    const supply = await addSupply(app, sim, [
      { priceCents: 35, quantityMicroDiem: 50_000_000n },
      { priceCents: 50, quantityMicroDiem: 50_000_000n },
    ]);
    const [cheap, next] = supply.keys;
    sim.state.injectFault(cheap?.secret ?? "", { kind: "http_500" });
    const buyer = await fundedBuyerKey(app, 5_000_000n);
    const prompt = `a private prompt ${randomUUID()}`;
    const caller = callerContext();
    const r = await call(app, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { authorization: `Bearer ${buyer.apiKey}`, traceparent: caller.traceparent },
      body: { model: MODEL, messages: [{ role: "user", content: prompt }] },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-svc-clearing-price-cents")).toBe("50");
    const ref = r.headers.get("x-svc-support-reference") ?? "";

    const spans = await traceOf(app, otlp, caller.traceId, (s) => s.name === "settlement");
    // the caller's span is the server span's parent: the trace is the caller's
    const server = one(spans, (s) => s.kind === "server", "server span");
    expect(server.parentSpanId).toBe(caller.parentId);
    expect(server.name).toBe("POST /v1/chat/completions");
    expect(server.service).toBe("svc-inference-market");
    expect(server.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/v1/chat/completions",
      "http.response.status_code": 200,
      "url.path": "/v1/chat/completions",
      "svc.support_reference": ref,
      "svc.request_id": r.headers.get("x-svc-request-id"),
    });
    expect(server.statusCode).not.toBe(2);

    const admission = one(spans, (s) => s.name === "admission", "admission span");
    expect(admission.parentSpanId).toBe(server.spanId);
    expect(admission.attributes).toMatchObject({ "gen_ai.request.model": MODEL, "svc.support_reference": ref });

    const tried = attempts(spans);
    expect(tried.map((a) => [a.attributes["svc.attempt"], a.attributes["svc.clearing_price_cents"]])).toEqual([
      [1, 35],
      [2, 50],
    ]);
    for (const a of tried) {
      expect(a.parentSpanId).toBe(server.spanId);
      expect(a.name).toBe(`chat ${MODEL}`);
      expect(a.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": MODEL,
        "gen_ai.provider.name": "venice",
        "svc.support_reference": ref,
      });
    }
    const [failed, answered] = tried as [ReceivedSpan, ReceivedSpan];
    expect(failed.attributes).toMatchObject({
      "svc.fall_forward.reason": "retryable",
      "http.response.status_code": 500,
      "error.type": "retryable",
    });
    expect(failed.statusCode).toBe(2);
    expect(answered.attributes["svc.fall_forward.reason"]).toBeUndefined();
    expect(answered.attributes).toMatchObject({
      "svc.outcome": "settled",
      "svc.cost_usdc": r.headers.get("x-svc-cost-usdc"),
    });
    const body = r.body as { id: string; model: string; usage: { prompt_tokens: number; completion_tokens: number } };
    const usage = body.usage;
    expect(answered.attributes["gen_ai.usage.input_tokens"]).toBe(usage.prompt_tokens);
    expect(answered.attributes["gen_ai.usage.output_tokens"]).toBe(usage.completion_tokens);
    // what the upstream said of its answer; a buffered call is not streaming: no stream flag, no first chunk
    expect(answered.attributes).toMatchObject({
      "gen_ai.response.id": body.id,
      "gen_ai.response.model": body.model,
      "gen_ai.response.finish_reasons": ["stop"],
      "gen_ai.output.type": "text",
    });
    for (const a of tried) {
      expect(a.attributes["gen_ai.request.stream"]).toBeUndefined();
      expect(a.attributes["gen_ai.system"]).toBeUndefined();
    }
    expect(answered.attributes["gen_ai.response.time_to_first_chunk"]).toBeUndefined();
    expect(failed.attributes["gen_ai.response.id"]).toBeUndefined();
    expect(answered.statusCode).not.toBe(2);
    // the failed attempt ended before the next began
    expect(failed.endNs <= answered.startNs).toBe(true);

    const settlement = one(spans, (s) => s.name === "settlement", "settlement span");
    expect(settlement.parentSpanId).toBe(server.spanId);
    expect(settlement.attributes).toMatchObject({
      "svc.ending": "settled",
      "svc.cost_usdc": r.headers.get("x-svc-cost-usdc"),
      "svc.clearing_price_cents": 50,
      "svc.support_reference": ref,
    });
    // every span of the trace hangs off the server span (or is it)
    for (const s of spans) {
      expect([caller.parentId, server.spanId], s.name).toContain(s.parentSpanId);
    }

    // the upstream got a traceparent on each attempt: this trace, that attempt's span
    const [cheapCall] = sim.state.listRequests({ key: cheap?.secret, route: "/chat/completions" });
    const [nextCall] = sim.state.listRequests({ key: next?.secret, route: "/chat/completions" });
    expect(traceIn(cheapCall?.traceparent ?? null)).toBe(caller.traceId);
    expect(parentIn(cheapCall?.traceparent ?? null)).toBe(failed.spanId);
    expect(traceIn(nextCall?.traceparent ?? null)).toBe(caller.traceId);
    expect(parentIn(nextCall?.traceparent ?? null)).toBe(answered.spanId);

    expectNoSecrets(otlp, [buyer.apiKey, cheap?.secret ?? "", next?.secret ?? "", prompt]);
  });

  test("a streamed chat: one trace from the server span to the settlement, the upstream in it", async ({
    app,
    sim,
    otlp,
  }) => {
    await freshBook(app, sim);
    const supply = await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(app, 5_000_000n);
    const prompt = `a streamed private prompt ${randomUUID()} [[sim:tokens=12]][[sim:chunks=3]][[sim:cached_tokens=5]][[sim:reasoning_tokens=4]]`;
    const r = await chat(app, buyer.apiKey, {
      model: MODEL,
      stream: true,
      messages: [{ role: "user", content: prompt }],
    });
    expect(r.status).toBe(200);
    const text = String(r.body);
    expect(text).toContain("data: [DONE]");
    const cost = /"object":"svc\.cost".*?"costUsdc":"([0-9.]+)".*?"supportReference":"([0-9a-f-]+)"/.exec(text);
    expect(cost).not.toBeNull();
    const [, costUsdc, ref] = cost as RegExpExecArray;

    // no traceparent sent: the server span is a root; find the trace by the attempt's support reference
    const byRef = () => otlp.spans.find((s) => s.attributes["svc.support_reference"] === ref);
    await flushUntil(app, () => byRef() !== undefined, `spans of ${ref}`);
    const traceId = byRef()?.traceId ?? "";
    const spans = await traceOf(app, otlp, traceId, (s) => s.name === "settlement");
    const server = one(spans, (s) => s.kind === "server", "server span");
    expect(server.parentSpanId).toBe("");
    expect(server.name).toBe("POST /v1/chat/completions");
    expect(server.attributes["http.response.status_code"]).toBe(200);
    const admission = one(spans, (s) => s.name === "admission", "admission span");
    expect(admission.parentSpanId).toBe(server.spanId);
    expect(admission.attributes["svc.stream"]).toBe(true);
    const [attempt, ...more] = attempts(spans);
    expect(more).toHaveLength(0);
    expect(attempt?.parentSpanId).toBe(server.spanId);
    expect(attempt?.attributes).toMatchObject({
      "gen_ai.request.stream": true,
      "svc.outcome": "settled",
      "svc.cost_usdc": costUsdc,
      "svc.clearing_price_cents": 40,
    });
    // every GenAI attribute of a streamed chat, against what the buyer's stream carried
    const chunks = text
      .split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
    const content = chunks.find((c) => c.object === "chat.completion.chunk") as { id: string; model: string };
    const final = chunks.find((c) => c.usage !== undefined) as {
      usage: {
        prompt_tokens: number;
        completion_tokens: number;
        prompt_tokens_details: { cached_tokens: number; cache_creation_input_tokens: number };
        completion_tokens_details: { reasoning_tokens: number };
      };
    };
    expect(final.usage.prompt_tokens_details.cached_tokens).toBe(5);
    expect(final.usage.completion_tokens_details.reasoning_tokens).toBe(4);
    const attrs = attempt?.attributes ?? {};
    expect(attrs).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.output.type": "text",
      "gen_ai.provider.name": "venice",
      "gen_ai.request.model": MODEL,
      "gen_ai.request.stream": true,
      "gen_ai.response.id": content.id,
      "gen_ai.response.model": content.model,
      "gen_ai.response.finish_reasons": ["stop"],
      "gen_ai.usage.input_tokens": final.usage.prompt_tokens,
      "gen_ai.usage.output_tokens": final.usage.completion_tokens,
      "gen_ai.usage.cache_read.input_tokens": 5,
      "gen_ai.usage.cache_creation.input_tokens": final.usage.prompt_tokens_details.cache_creation_input_tokens,
      "gen_ai.usage.reasoning.output_tokens": 4,
    });
    expect(content.id).toMatch(/^chatcmpl-/);
    expect(Number(attrs["gen_ai.usage.output_tokens"])).toBeGreaterThan(0);
    expect(Number(attrs["gen_ai.request.max_tokens"])).toBeGreaterThan(0);
    // seconds from the upstream call to its first chunk: within the attempt's span
    const ttfc = attrs["gen_ai.response.time_to_first_chunk"];
    expect(typeof ttfc).toBe("number");
    expect(ttfc as number).toBeGreaterThan(0);
    const spanSeconds = Number((attempt?.endNs ?? 0n) - (attempt?.startNs ?? 0n)) / 1e9;
    expect(ttfc as number).toBeLessThanOrEqual(spanSeconds);
    // the deprecated attribute is gone (gen_ai.provider.name replaces it)
    expect(attrs["gen_ai.system"]).toBeUndefined();
    const settlement = one(spans, (s) => s.name === "settlement", "settlement span");
    expect(settlement.parentSpanId).toBe(server.spanId);
    expect(settlement.attributes["svc.cost_usdc"]).toBe(costUsdc);

    const [upstreamCall] = sim.state.listRequests({ key: supply.keys[0]?.secret, route: "/chat/completions" });
    expect(traceIn(upstreamCall?.traceparent ?? null)).toBe(traceId);
    expect(parentIn(upstreamCall?.traceparent ?? null)).toBe(attempt?.spanId);

    expectNoSecrets(otlp, [buyer.apiKey, supply.keys[0]?.secret ?? "", prompt]);
  });
});

describe("a streamed Responses call", () => {
  test("its attempt span names the response, its final status and its reasoning tokens", async ({ app, sim, otlp }) => {
    await freshBook(app, sim);
    await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(app, 5_000_000n);
    const r = await responses(app, buyer.apiKey, {
      model: MODEL,
      stream: true,
      input: `a responses prompt ${randomUUID()} [[sim:tokens=9]][[sim:chunks=3]][[sim:reasoning_tokens=2]]`,
    });
    expect(r.status).toBe(200);
    const text = String(r.body);
    const done = text
      .split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)) as { type: string; supportReference?: string; response?: { id: string } })
      .find((e) => e.type === "response.completed");
    expect(done?.response?.id).toMatch(/^resp_/);
    const ref = done?.supportReference ?? "";
    const attempt = () => otlp.spans.find((s) => s.kind === "client" && s.attributes["svc.support_reference"] === ref);
    await flushUntil(app, () => attempt() !== undefined, `the attempt of ${ref}`);
    expect(attempt()?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.stream": true,
      "gen_ai.response.id": done?.response?.id,
      "gen_ai.response.model": MODEL,
      "gen_ai.response.finish_reasons": ["completed"],
      "gen_ai.usage.reasoning.output_tokens": 2,
      "gen_ai.usage.output_tokens": 9,
    });
    expect(attempt()?.attributes["gen_ai.response.time_to_first_chunk"]).toBeGreaterThan(0);
  });
});

describe("what is not traced", () => {
  test("probes and the scrape make no span; the request after them does", async ({ app, otlp }) => {
    for (const path of ["/healthz", "/readyz", "/metrics"]) {
      expect((await call(app, { method: "GET", path })).status).toBe(200);
    }
    const caller = callerContext();
    const r = await call(app, { method: "GET", path: "/v1/models", headers: { traceparent: caller.traceparent } });
    expect(r.status).toBe(200);
    const [models] = await traceOf(app, otlp, caller.traceId, (s) => s.kind === "server");
    expect(models?.name).toBe("GET /v1/models");
    const probed = otlp.spans.filter((s) =>
      ["/healthz", "/readyz", "/metrics"].includes(String(s.attributes["url.path"])),
    );
    expect(probed).toEqual([]);
  });
});

describe("jobs continue the trace that queued them", () => {
  test("a webhook delivery queued by a traced request is a consumer span in that request's trace", async ({
    app,
    agent,
    otlp,
  }) => {
    const receiver = await startReceiver();
    try {
      const cookie = { cookie: agent.user.cookie };
      const hook = await webhookFor(app, cookie, { url: receiver.url, events: ["credit.confirmed"] });
      const caller = callerContext();
      const r = await call(app, {
        method: "POST",
        path: `/v1/webhooks/${hook.id}/test`,
        headers: { ...cookie, traceparent: caller.traceparent },
      });
      expect(r.status).toBe(202);
      const eventId = (r.body as { id: string }).id;
      await receiver.waitFor((h) => h.headers["webhook-id"] === eventId);

      const spans = await traceOf(app, otlp, caller.traceId, (s) => s.kind === "consumer");
      // Express's route pattern names the server span (never the raw path with the id)
      const server = one(spans, (s) => s.kind === "server", "server span");
      expect(server.name).toBe("POST /v1/webhooks/:id/test");
      expect(server.parentSpanId).toBe(caller.parentId);
      expect(server.attributes["http.response.status_code"]).toBe(202);
      const job = one(spans, (s) => s.kind === "consumer", "consumer span");
      expect(job.name).toBe("process webhooks");
      expect(job.parentSpanId).toBe(server.spanId);
      expect(job.attributes).toMatchObject({
        "messaging.system": "bullmq",
        "messaging.destination.name": "webhooks",
        "messaging.operation.type": "process",
        "svc.job.name": "deliver",
      });
      expect(job.statusCode).not.toBe(2);
      expectNoSecrets(otlp, [agent.apiKey, hook.secret, agent.user.cookie]);
    } finally {
      await receiver.close();
    }
  });

  test("a job queued outside any trace starts its own (a scheduler's run has no parent)", async ({ app, otlp }) => {
    const before = otlp.spans.length;
    await app.rt.queues.webhooks.add("sweep", {}, { removeOnComplete: true, removeOnFail: true });
    const sweep = () =>
      otlp.spans.slice(before).find((s) => s.kind === "consumer" && s.attributes["svc.job.name"] === "sweep");
    await flushUntil(app, () => sweep() !== undefined, "the sweep's span");
    expect(sweep()?.parentSpanId).toBe("");
    expect(sweep()?.name).toBe("process webhooks");
  });
});
