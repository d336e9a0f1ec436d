import { beforeEach, describe, expect } from "vitest";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import {
  addSupply,
  confirmedOf,
  emptyBook,
  endedRequest,
  fundedBuyerKey,
  openSession,
  type SupplierKey,
} from "../../../testkit/market.js";

/**
 * How a stream ends when it cannot end normally (SPEC "Events" Chat SSE 5–6, Responses SSE 5): an
 * incomplete stream billed at most the supplier's pre-call balance as the upstream reported it on
 * the attempt (less what other requests in flight on the key may burn), and a settlement that does
 * not commit after content streamed.
 */

const MODEL = "zai-org-glm-5-1";
/** the simulator's rates of MODEL, micro-DIEM per million tokens */
const INPUT_RATE = 1_540_000n;
const OUTPUT_RATE = 4_840_000n;

test.override("appOptions", { sim: {}, env: { KEY_MAX_IN_FLIGHT: "64" }, syncCatalog: true });
const world = fileWorld(test);

beforeEach(async () => {
  await emptyBook(world.app);
  world.sim.state.clearFaults();
});

async function stream(apiKey: string, path: string, body: Record<string, unknown>) {
  const res = await fetch(`${world.app.baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const text = await res.text();
  return { status: res.status, reference: res.headers.get("x-svc-support-reference") ?? "", text };
}

/** The `data:` payloads of an SSE body, in order (`[DONE]` as the string). */
function dataOf(text: string): unknown[] {
  return text
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => (l === "data: [DONE]" ? "[DONE]" : JSON.parse(l.slice(6))));
}

describe("an incomplete stream is capped at the supplier's pre-call balance (Chat SSE 6)", () => {
  test("the balance the upstream reported on the attempt, less another request's in-flight share, not the cached balance", async () => {
    // the cached balance (last_balance_micro_diem, synced every 30 s) says 100 DIEM
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 40, quantityMicroDiem: 50_000_000n, keyBalanceMicroDiem: 100_000_000n },
    ]);
    const key = supply.keys[0] as SupplierKey;
    // another request in flight on the same key: its admitted maximum may still burn
    const other = await fundedBuyerKey(world.app, 5_000_000n);
    const inFlight = await openSession(world.app, other.accountId, { stream: true, promptEstimate: 40, maxTokens: 20 });
    try {
      expect(inFlight.attempt?.upstreamKeyId).toBe(key.upstreamKeyId);
      const otherShare = inFlight.plan.maxBurnMicroDiem;
      expect(otherShare).toBeGreaterThan(0n);
      // the key really holds far less than the cache says: the upstream reports it on the attempt
      const reported = otherShare + 50n;
      world.sim.state.setBalance(key.secret, { diemMicro: reported });
      world.sim.state.injectFault(key.secret, { kind: "truncate_stream", afterChunks: 2 });

      const buyer = await fundedBuyerKey(world.app, 5_000_000n);
      const before = await confirmedOf(world.app, buyer.accountId);
      const r = await stream(buyer.apiKey, "/v1/chat/completions", {
        model: MODEL,
        messages: [{ role: "user", content: `${"long prompt ".repeat(170)}[[sim:tokens=60]]` }],
        max_tokens: 100,
      });
      expect(r.status).toBe(200);
      const frames = dataOf(r.text);
      expect(frames.at(-1)).toMatchObject({ error: { code: "stream_incomplete" } });
      expect(frames).not.toContain("[DONE]");

      const req = await endedRequest(world.app, r.reference);
      expect(req.status).toBe("incomplete");
      // the estimate alone (capped at max_tokens) is above the reported balance…
      const estimate =
        (BigInt(req.promptTokens ?? 0) * INPUT_RATE + BigInt(req.completionTokens ?? 0) * OUTPUT_RATE) / 1_000_000n;
      expect(estimate).toBeGreaterThan(reported);
      // …so the burn is the reported balance less what the other request in flight may burn, to the micro
      const clear = await world.app.rt.db.clear.findFirstOrThrow({ where: { requestId: req.id } });
      expect(clear.burnMicroDiem).toBe(reported - otherShare);
      // and the buyer paid exactly what the cost frame said
      const cost = frames.find((f) => (f as { object?: string }).object === "svc.cost") as { costUsdc: string };
      const after = await confirmedOf(world.app, buyer.accountId);
      expect(cost.costUsdc).toBe(formatDecimal6(before - after));
      expect(clear.grossMicroUsdc).toBe(before - after);
    } finally {
      await world.app.rt.services.inference.abort(inFlight, "test_done");
    }
    await expectHoldsReleased(world.app, other.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});

/** Runs `fn` while the settlement's clear cannot be written (a real database failure at commit). */
async function withClearsFailing<T>(fn: () => Promise<T>): Promise<T> {
  const db = world.app.rt.db;
  await db.$executeRawUnsafe(`
    CREATE FUNCTION test_fail_clear() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'injected database failure'; END $$`);
  await db.$executeRawUnsafe(
    "CREATE TRIGGER test_fail_clear BEFORE INSERT ON clears FOR EACH ROW EXECUTE FUNCTION test_fail_clear()",
  );
  try {
    return await fn();
  } finally {
    await db.$executeRawUnsafe("DROP TRIGGER test_fail_clear ON clears");
    await db.$executeRawUnsafe("DROP FUNCTION test_fail_clear()");
  }
}

describe("a settlement that does not commit after content streamed (Chat SSE 5, Responses SSE 5)", () => {
  test("chat: content frames, then an error object in a data: frame; no usage, no svc.cost, no [DONE]; nothing charged", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await withClearsFailing(() =>
      stream(buyer.apiKey, "/v1/chat/completions", {
        model: MODEL,
        messages: [{ role: "user", content: "hello [[sim:tokens=12]] [[sim:chunks=3]]" }],
      }),
    );
    expect(r.status).toBe(200);
    expect(r.reference).toMatch(/^[0-9a-f-]{36}$/);
    const frames = dataOf(r.text) as Record<string, unknown>[];
    const content = frames.filter((f) => {
      const delta = (f.choices as { delta?: { content?: string } }[] | undefined)?.[0]?.delta;
      return typeof delta?.content === "string" && delta.content.length > 0;
    });
    expect(content.length).toBeGreaterThan(0);
    const last = frames.at(-1);
    expect(last).toEqual({
      error: { code: "settle_failed", message: expect.any(String), supportReference: r.reference },
    });
    expect(frames.indexOf(last as Record<string, unknown>)).toBeGreaterThan(frames.indexOf(content.at(-1) ?? {}));
    expect(frames.filter((f) => f.error !== undefined)).toHaveLength(1);
    expect(frames.some((f) => f.usage !== undefined && f.usage !== null)).toBe(false);
    expect(frames.some((f) => f.object === "svc.cost")).toBe(false);
    expect(frames).not.toContain("[DONE]");
    expect(r.text).not.toContain("[DONE]");
    expect(r.text).not.toMatch(/^event: /m);

    const req = await endedRequest(world.app, r.reference);
    expect(req).toMatchObject({ status: "failed", errorCode: "settle_failed" });
    expect(await world.app.rt.db.clear.count({ where: { requestId: req.id } })).toBe(0);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("chat, a truncated stream whose estimated bill does not commit: settle_failed, no svc.cost, no stream_incomplete", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.sim.state.injectFault(supply.keys[0]?.secret ?? "", { kind: "truncate_stream", afterChunks: 2 });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await withClearsFailing(() =>
      stream(buyer.apiKey, "/v1/chat/completions", {
        model: MODEL,
        messages: [{ role: "user", content: "hello [[sim:tokens=30]]" }],
      }),
    );
    const frames = dataOf(r.text) as Record<string, unknown>[];
    expect(frames.length).toBeGreaterThan(1);
    expect(frames.at(-1)).toMatchObject({ error: { code: "settle_failed", supportReference: r.reference } });
    expect(frames.filter((f) => f.error !== undefined)).toHaveLength(1);
    expect(frames.some((f) => f.object === "svc.cost")).toBe(false);
    expect(frames).not.toContain("[DONE]");
    const req = await endedRequest(world.app, r.reference);
    expect(req).toMatchObject({ status: "failed", errorCode: "settle_failed" });
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("responses: content events, then response.failed (nested status failed, no error); nothing charged", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await withClearsFailing(() =>
      stream(buyer.apiKey, "/v1/responses", { model: MODEL, input: "hello [[sim:tokens=12]] [[sim:chunks=3]]" }),
    );
    expect(r.status).toBe(200);
    const events = r.text
      .split("\n\n")
      .filter(Boolean)
      .map((block) => {
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "null") as Record<string, unknown>;
        return { event, data };
      });
    const deltas = events.filter((e) => e.event === "response.output_text.delta");
    expect(deltas.length).toBeGreaterThan(0);
    const last = events.at(-1);
    expect(last?.event).toBe("response.failed");
    expect(last?.data.type).toBe("response.failed");
    expect(last?.data.response).toMatchObject({ status: "failed" });
    expect(last?.data.response).not.toHaveProperty("error");
    expect(last?.data).not.toHaveProperty("costUsdc");
    expect(events.some((e) => e.event === "response.completed" || e.event === "error")).toBe(false);
    expect(r.text).not.toContain("[DONE]");

    const req = await endedRequest(world.app, r.reference);
    expect(req).toMatchObject({ status: "failed", errorCode: "settle_failed" });
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});
