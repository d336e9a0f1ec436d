import OpenAI from "openai";
import { beforeEach, describe, expect } from "vitest";
import { burnMicroDiem, computeCharge, formatDecimal6 } from "../../../src/lib/money.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import {
  addSupply,
  confirmedOf,
  emptyBook,
  endedRequest,
  fundedBuyerKey,
  requestByReference,
  responses,
} from "../../../testkit/market.js";

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

/** Each test starts from an empty book: earlier offers are cancelled. */
beforeEach(async () => {
  await emptyBook(world.app);
  world.sim.state.clearFaults();
});

type Json = Record<string, unknown>;

interface Frame {
  event: string | undefined;
  data: string;
  json: Json;
}

/** Streams through raw fetch and splits the SSE wire into frames (event line + JSON data). */
async function streamRaw(apiKey: string, body: Json): Promise<{ res: Response; raw: string; frames: Frame[] }> {
  const res = await fetch(`${world.app.baseUrl}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const raw = await res.text();
  const frames = raw
    .split("\n\n")
    .filter((b) => b.trim().length > 0)
    .map((block) => {
      const lines = block.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))?.slice(7);
      const data = lines
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6))
        .join("\n");
      let json: Json = {};
      try {
        json = JSON.parse(data) as Json;
      } catch {}
      return { event, data, json };
    });
  return { res, raw, frames };
}

/** SPEC "Responses SSE" 1–2: every frame is named on both lines, no [DONE], no svc.cost, ordered. */
function expectResponsesWire(raw: string, frames: Frame[]) {
  expect(frames.length).toBeGreaterThan(0);
  expect(raw).not.toContain("[DONE]");
  expect(raw).not.toContain("svc.cost");
  let last = -1;
  for (const f of frames) {
    expect(f.event).toMatch(/^response\./);
    expect(f.json.type).toBe(f.event);
    expect(f.json).not.toHaveProperty("error");
    const seq = f.json.sequence_number as number;
    expect(seq).toBeGreaterThan(last);
    last = seq;
  }
}

async function pricing() {
  const model = await world.app.rt.services.catalog.getModel(MODEL);
  return {
    inputMicroPerM: model.inputMicroPerM ?? 0n,
    outputMicroPerM: model.outputMicroPerM ?? 0n,
    cacheMicroPerM: model.cacheMicroPerM,
  };
}

async function withFailingClears<T>(fn: () => Promise<T>): Promise<T> {
  await world.app.rt.db.$executeRawUnsafe(
    `CREATE FUNCTION test_fail_clear() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$`,
  );
  await world.app.rt.db.$executeRawUnsafe(
    `CREATE TRIGGER test_fail_clear BEFORE INSERT ON clears FOR EACH ROW EXECUTE FUNCTION test_fail_clear()`,
  );
  try {
    return await fn();
  } finally {
    await world.app.rt.db.$executeRawUnsafe("DROP TRIGGER test_fail_clear ON clears");
    await world.app.rt.db.$executeRawUnsafe("DROP FUNCTION test_fail_clear()");
  }
}

describe("buffered responses", () => {
  test("clears at the cheapest offer; cost headers equal the balance change; the books balance", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 55, quantityMicroDiem: 50_000_000n },
      { priceCents: 40, quantityMicroDiem: 50_000_000n },
    ]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await responses(world.app, buyer.apiKey, {
      model: `svc/${MODEL}`,
      input: "Hello there [[sim:tokens=40]]",
      store: true,
      previous_response_id: "resp_nothing",
      metadata: { a: "b" },
    });
    expect(r.status).toBe(200);
    const body = r.body as Json & {
      usage: { input_tokens: number; output_tokens: number; total_tokens: number };
      output: { type: string; content: { text: string }[] }[];
    };
    expect(body).toMatchObject({ object: "response", status: "completed" });
    expect(String(body.id)).toMatch(/^resp_/);
    expect(body.output[0]?.content[0]?.text.length).toBeGreaterThan(0);
    expect(body.usage.output_tokens).toBe(40);
    expect(body.usage.total_tokens).toBe(body.usage.input_tokens + body.usage.output_tokens);
    expect(body).not.toHaveProperty("cost");
    expect(body).not.toHaveProperty("venice_parameters");

    expect(r.headers.get("x-svc-clearing-price-cents")).toBe("40");
    expect(r.headers.get("x-svc-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const ref = r.headers.get("x-svc-support-reference") ?? "";
    expect(ref).toMatch(/^[0-9a-f-]{36}$/);
    const after = await confirmedOf(world.app, buyer.accountId);
    const cost = r.headers.get("x-svc-cost-usdc");
    expect(cost).toBe(formatDecimal6(before - after));
    expect(r.headers.get("x-balance-remaining")).toBe(formatDecimal6(after));
    // burn × price, exactly, and the same burn the simulator booked on the supplier's key
    const burn = burnMicroDiem(await pricing(), {
      promptTokens: body.usage.input_tokens,
      completionTokens: body.usage.output_tokens,
    });
    expect(world.sim.state.listRequests({ key: supply.keys[1]?.secret }).at(-1)?.burnMicroDiem).toBe(burn);
    expect(before - after).toBe(computeCharge(burn, 40, 1000).grossMicroUsdc);

    const req = await requestByReference(world.app, ref);
    expect(req.route).toBe("responses");
    expect(req.status).toBe("succeeded");
    const detail = await call(world.app, {
      method: "GET",
      path: `/v1/agent/requests/${ref}`,
      headers: { authorization: `Bearer ${buyer.apiKey}` },
    });
    expect(detail.body).toMatchObject({ status: "succeeded", clearingPriceCents: 40, costUsdc: cost });
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("an upstream `incomplete` response (cut at max_output_tokens) is settled on its usage", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await responses(world.app, buyer.apiKey, {
      model: MODEL,
      input: [{ role: "user", content: "long please [[sim:tokens=60]]" }],
      max_output_tokens: 20,
    });
    expect(r.status).toBe(200);
    const body = r.body as { status: string; usage: { output_tokens: number } };
    expect(body.status).toBe("incomplete");
    expect(body.usage.output_tokens).toBe(20);
    const after = await confirmedOf(world.app, buyer.accountId);
    expect(r.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(before - after));
    expect(before - after).toBeGreaterThan(0n);
    const req = await requestByReference(world.app, r.headers.get("x-svc-support-reference") ?? "");
    expect(req.admittedMaxTokens).toBe(20);
    expect(req.completionTokens).toBe(20);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a 500 on the cheapest key falls forward to the next; the buyer pays that key's price", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 35, quantityMicroDiem: 50_000_000n },
      { priceCents: 50, quantityMicroDiem: 50_000_000n },
    ]);
    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "http_500" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await responses(world.app, buyer.apiKey, { model: MODEL, input: "hello" });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-svc-clearing-price-cents")).toBe("50");
    expect(r.headers.get("x-svc-cost-usdc")).toBe(
      formatDecimal6(before - (await confirmedOf(world.app, buyer.accountId))),
    );
    const req = await requestByReference(world.app, r.headers.get("x-svc-support-reference") ?? "");
    expect(req.attempts.map((a) => [a.priceCents, a.outcome])).toEqual([
      [35, "retryable_failure"],
      [50, "succeeded"],
    ]);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a settlement that does not commit: 500 settle_failed, nothing charged", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await withFailingClears(() => responses(world.app, buyer.apiKey, { model: MODEL, input: "hello" }));
    expect(r.status).toBe(500);
    expect((r.body as { error: { code: string } }).error.code).toBe("settle_failed");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("the official OpenAI SDK", () => {
  test("responses.create buffered and streaming; the cost it reports equals the balance change", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 45, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = new OpenAI({ baseURL: `${world.app.baseUrl}/v1`, apiKey: buyer.apiKey, maxRetries: 0 });

    let before = await confirmedOf(world.app, buyer.accountId);
    const { data, response } = await client.responses
      .create({ model: MODEL, input: "hi [[sim:tokens=20]]" })
      .withResponse();
    expect(data.output_text.length).toBeGreaterThan(0);
    expect(data.usage?.output_tokens).toBe(20);
    let after = await confirmedOf(world.app, buyer.accountId);
    expect(response.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(before - after));

    before = after;
    const stream = await client.responses.create({
      model: MODEL,
      input: "stream please [[sim:tokens=30]]",
      stream: true,
    });
    let text = "";
    const types: string[] = [];
    let completed: (Json & { response: { id: string; usage: Json } }) | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.completed") completed = event as unknown as typeof completed;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    after = await confirmedOf(world.app, buyer.accountId);
    expect(completed?.costUsdc).toBe(formatDecimal6(before - after));
    expect(completed?.clearingPriceCents).toBe(45);
    expect(completed?.supportReference).toMatch(/^[0-9a-f-]{36}$/);
    expect(completed?.response.id).toMatch(/^resp_/);
    expect(completed?.response.usage).toMatchObject({ output_tokens: 30 });
    expect(before - after).toBeGreaterThan(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("Responses SSE", () => {
  test("wire: event names match JSON type, no [DONE], no svc.cost; completed carries usage and cost", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { res, raw, frames } = await streamRaw(buyer.apiKey, {
      model: MODEL,
      input: "wire check [[sim:tokens=30]]",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(res.headers.get("x-svc-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const ref = res.headers.get("x-svc-support-reference");
    expect(ref).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.get("x-svc-cost-usdc")).toBeNull();
    expect(res.headers.get("x-svc-clearing-price-cents")).toBeNull();
    expect(res.headers.get("x-balance-remaining")).toBeNull();
    expectResponsesWire(raw, frames);
    expect(frames[0]?.event).toBe("response.created");
    expect(frames.some((f) => f.event === "response.output_text.delta")).toBe(true);
    expect(frames.filter((f) => f.event === "response.completed")).toHaveLength(1);
    const last = frames.at(-1);
    expect(last?.event).toBe("response.completed");
    const completed = last?.json as Json & { response: Json & { usage: Json } };
    expect(completed.response.status).toBe("completed");
    expect(String(completed.response.id)).toMatch(/^resp_/);
    expect(completed.response.usage).toMatchObject({ output_tokens: 30 });
    const u = completed.response.usage as { input_tokens: number; output_tokens: number; total_tokens: number };
    expect(u.total_tokens).toBe(u.input_tokens + u.output_tokens);
    const after = await confirmedOf(world.app, buyer.accountId);
    expect(completed.costUsdc).toBe(formatDecimal6(before - after));
    expect(completed.costUsdc).toMatch(/^\d+\.\d{6}$/);
    expect(completed.clearingPriceCents).toBe(40);
    expect(completed.supportReference).toBe(ref);
    const burn = burnMicroDiem(await pricing(), { promptTokens: u.input_tokens, completionTokens: u.output_tokens });
    expect(before - after).toBe(computeCharge(burn, 40, 1000).grossMicroUsdc);
    expect((await requestByReference(world.app, ref ?? "")).status).toBe("succeeded");
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a stream that closes before its first content falls forward invisibly", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 35, quantityMicroDiem: 50_000_000n },
      { priceCents: 45, quantityMicroDiem: 50_000_000n },
    ]);
    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "close_before_content" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { res, raw, frames } = await streamRaw(buyer.apiKey, { model: MODEL, input: "hello [[sim:tokens=20]]" });
    expect(res.status).toBe(200);
    expectResponsesWire(raw, frames);
    expect(frames.filter((f) => f.event === "response.created")).toHaveLength(1);
    const last = frames.at(-1)?.json as Json;
    expect(last.type).toBe("response.completed");
    expect(last.clearingPriceCents).toBe(45);
    expect(last.costUsdc).toBe(formatDecimal6(before - (await confirmedOf(world.app, buyer.accountId))));
    const req = await requestByReference(world.app, res.headers.get("x-svc-support-reference") ?? "");
    expect(req.attempts.map((a) => [a.priceCents, a.outcome])).toEqual([
      [35, "retryable_failure"],
      [45, "succeeded"],
    ]);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("an upstream `response.failed` before content and a 500 both fall forward", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 33, quantityMicroDiem: 50_000_000n },
      { priceCents: 36, quantityMicroDiem: 50_000_000n },
      { priceCents: 47, quantityMicroDiem: 50_000_000n },
    ]);
    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "http_500" });
    world.sim.state.injectFault(supply.keys[1]?.secret ?? "", { kind: "midstream_error", afterChunks: 0 });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { res, raw, frames } = await streamRaw(buyer.apiKey, { model: MODEL, input: "hello" });
    expect(res.status).toBe(200);
    expectResponsesWire(raw, frames);
    expect(frames.some((f) => f.event === "response.failed")).toBe(false);
    const last = frames.at(-1)?.json as Json;
    expect(last.type).toBe("response.completed");
    expect(last.clearingPriceCents).toBe(47);
    expect(last.costUsdc).toBe(formatDecimal6(before - (await confirmedOf(world.app, buyer.accountId))));
    const req = await requestByReference(world.app, res.headers.get("x-svc-support-reference") ?? "");
    expect(req.attempts.map((a) => [a.priceCents, a.outcome])).toEqual([
      [33, "retryable_failure"],
      [36, "retryable_failure"],
      [47, "succeeded"],
    ]);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a truncated stream is billed on estimated usage: response.incomplete with cost, no usage key", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "truncate_stream", afterChunks: 2 });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { res, raw, frames } = await streamRaw(buyer.apiKey, {
      model: MODEL,
      input: "hello [[sim:tokens=60]]",
      max_output_tokens: 100,
    });
    expect(res.status).toBe(200);
    expectResponsesWire(raw, frames);
    expect(frames.some((f) => f.event === "response.completed")).toBe(false);
    const last = frames.at(-1);
    expect(last?.event).toBe("response.incomplete");
    const incomplete = last?.json as Json & { response: Json };
    expect(incomplete.response.status).toBe("incomplete");
    expect(incomplete.response).not.toHaveProperty("usage");
    expect(incomplete.response).not.toHaveProperty("error");
    const after = await confirmedOf(world.app, buyer.accountId);
    expect(before - after).toBeGreaterThan(0n);
    expect(incomplete.costUsdc).toBe(formatDecimal6(before - after));
    expect(incomplete.clearingPriceCents).toBe(40);
    expect(incomplete.supportReference).toBe(res.headers.get("x-svc-support-reference"));
    const req = await requestByReference(world.app, res.headers.get("x-svc-support-reference") ?? "");
    expect(req.status).toBe("incomplete");
    expect(req.completionTokens).toBeGreaterThan(0);
    expect(req.completionTokens).toBeLessThanOrEqual(100);
    // the estimate is ceil(relayed chars / 4)
    const chars = frames
      .filter((f) => f.event === "response.output_text.delta")
      .reduce((a, f) => a + String(f.json.delta).length, 0);
    expect(req.completionTokens).toBe(Math.ceil(chars / 4));
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("an upstream failure after content is billed as incomplete, never relayed as response.failed", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "midstream_error", afterChunks: 2 });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { raw, frames } = await streamRaw(buyer.apiKey, { model: MODEL, input: "hello [[sim:tokens=60]]" });
    expectResponsesWire(raw, frames);
    expect(frames.some((f) => f.event === "response.failed")).toBe(false);
    const last = frames.at(-1)?.json as Json & { response: Json };
    expect(last.type).toBe("response.incomplete");
    expect(last.response).not.toHaveProperty("usage");
    expect(last.costUsdc).toBe(formatDecimal6(before - (await confirmedOf(world.app, buyer.accountId))));
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("an upstream response.incomplete (max_output_tokens) is settled on its usage and sent without usage", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { res, raw, frames } = await streamRaw(buyer.apiKey, {
      model: MODEL,
      input: "hello [[sim:tokens=60]]",
      max_output_tokens: 20,
    });
    expectResponsesWire(raw, frames);
    const last = frames.at(-1)?.json as Json & { response: Json };
    expect(last.type).toBe("response.incomplete");
    expect(last.response.status).toBe("incomplete");
    expect(last.response).not.toHaveProperty("usage");
    expect(last.costUsdc).toBe(formatDecimal6(before - (await confirmedOf(world.app, buyer.accountId))));
    const req = await requestByReference(world.app, res.headers.get("x-svc-support-reference") ?? "");
    expect(req.status).toBe("succeeded");
    expect(req.completionTokens).toBe(20);
    await assertBooksBalance(world.app.rt.db);
  });

  test("the buyer leaving after content: billed on estimated usage (incomplete), holds released", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const ac = new AbortController();
    const res = await fetch(`${world.app.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${buyer.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        input: "slow [[sim:tokens=60]] [[sim:chunks=20]] [[sim:chunk_delay_ms=150]]",
        stream: true,
      }),
      signal: ac.signal,
    });
    const ref = res.headers.get("x-svc-support-reference") ?? "";
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let seen = "";
    while (!seen.includes("response.output_text.delta")) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += new TextDecoder().decode(value);
    }
    ac.abort();
    const req = await endedRequest(world.app, ref);
    expect(req.status).toBe("incomplete");
    const after = await confirmedOf(world.app, buyer.accountId);
    expect(req.costMicroUsdc).toBe(before - after);
    expect(before - after).toBeGreaterThan(0n);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("settlement failure after content: response.failed, no error key, nothing charged", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const { res, raw, frames } = await withFailingClears(() =>
      streamRaw(buyer.apiKey, { model: MODEL, input: "hello [[sim:tokens=40]]" }),
    );
    expect(res.status).toBe(200);
    expectResponsesWire(raw, frames);
    expect(frames.some((f) => f.event === "response.output_text.delta")).toBe(true);
    expect(frames.some((f) => f.event === "response.completed")).toBe(false);
    expect(raw).not.toContain("event: error");
    const last = frames.at(-1);
    expect(last?.event).toBe("response.failed");
    const failed = last?.json as Json & { response: Json };
    expect(failed.response.status).toBe("failed");
    expect(failed.response).not.toHaveProperty("error");
    expect(failed).not.toHaveProperty("costUsdc");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    const req = await requestByReference(world.app, res.headers.get("x-svc-support-reference") ?? "");
    expect(req.status).toBe("failed");
    expect(req.errorCode).toBe("settle_failed");
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("errors", () => {
  test.each([
    { label: "no model", body: { input: "x" } },
    { label: "model suffix", body: { model: `${MODEL}:enable_web_search=on`, input: "x" } },
    { label: "no input", body: { model: MODEL } },
    { label: "empty input", body: { model: MODEL, input: "" } },
    { label: "input not string or items", body: { model: MODEL, input: 42 } },
    { label: "input items not objects", body: { model: MODEL, input: ["x"] } },
    { label: "stream not boolean", body: { model: MODEL, input: "x", stream: "yes" } },
    { label: "max_output_tokens zero", body: { model: MODEL, input: "x", max_output_tokens: 0 } },
    { label: "max_output_tokens fractional", body: { model: MODEL, input: "x", max_output_tokens: 1.5 } },
    { label: "web_search: true", body: { model: MODEL, input: "x", web_search: true } },
    { label: "web search tool", body: { model: MODEL, input: "x", tools: [{ type: "web_search" }] } },
    { label: "web search preview tool", body: { model: MODEL, input: "x", tools: [{ type: "web_search_preview" }] } },
    {
      label: "venice_parameters.enable_web_search",
      body: { model: MODEL, input: "x", venice_parameters: { enable_web_search: "on" } },
    },
    {
      label: "streaming with web search",
      body: { model: MODEL, input: "x", stream: true, venice_parameters: { enable_web_search: "auto" } },
    },
  ])("400 invalid_request: $label; nothing charged, no record", async ({ body }) => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await responses(world.app, buyer.apiKey, body);
    expect(r.status).toBe(400);
    expect((r.body as { error: { code: string } }).error.code).toBe("invalid_request");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    expect(await world.app.rt.db.inferenceRequest.count({ where: { accountId: buyer.accountId } })).toBe(0);
  });

  test("unknown model 404; image model 400 unsupported_modality", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const unknown = await responses(world.app, buyer.apiKey, { model: "nope-model", input: "x" });
    expect(unknown.status).toBe(404);
    expect((unknown.body as { error: { code: string } }).error.code).toBe("model_not_found");
    const image = await responses(world.app, buyer.apiKey, { model: "venice-sd35", input: "x" });
    expect(image.status).toBe(400);
    expect((image.body as { error: { code: string } }).error.code).toBe("unsupported_modality");
  });

  test("401 without a Bearer key", async () => {
    const r = await call(world.app, { method: "POST", path: "/v1/responses", body: { model: MODEL, input: "x" } });
    expect(r.status).toBe(401);
  });

  test("503 pool_empty with the support reference, buffered and streaming", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    for (const stream of [false, true]) {
      const r = await responses(world.app, buyer.apiKey, { model: MODEL, input: "hello", stream });
      expect(r.status).toBe(503);
      expect((r.body as { error: { code: string } }).error.code).toBe("pool_empty");
      const ref = r.headers.get("x-svc-support-reference");
      expect(ref).toMatch(/^[0-9a-f-]{36}$/);
      expect((r.body as { error: { supportReference: string } }).error.supportReference).toBe(ref);
      const req = await world.app.rt.db.inferenceRequest.findFirstOrThrow({ where: { id: ref ?? "" } });
      expect(req.route).toBe("responses");
    }
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
  });

  test("GET /v1/responses and /v1/responses/{id} stay 404", async () => {
    const buyer = await fundedBuyerKey(world.app, 0n);
    for (const path of ["/v1/responses", "/v1/responses/resp_123"]) {
      const r = await call(world.app, { method: "GET", path, headers: { authorization: `Bearer ${buyer.apiKey}` } });
      expect(r.status).toBe(404);
    }
  });
});
