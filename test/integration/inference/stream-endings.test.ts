import { beforeEach, describe, expect, test } from "vitest";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  addSupply,
  confirmedOf,
  endedRequest,
  fundedBuyerKey,
  openSession,
  type SupplierKey,
} from "../../../testkit/market.js";
import { expectHoldsReleased } from "../../support/holds.js";
import { useMarketWorld } from "../../support/market-world.js";

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

const world = useMarketWorld({ env: { KEY_MAX_IN_FLIGHT: "64" }, syncCatalog: true });

beforeEach(async () => {
  await world.app.rt.db.offer.updateMany({
    where: { status: { in: ["active", "paused"] } },
    data: { status: "cancelled", endedAt: new Date() },
  });
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
      const clear = await world.app.rt.db.clear.findUniqueOrThrow({ where: { requestId: req.id } });
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
