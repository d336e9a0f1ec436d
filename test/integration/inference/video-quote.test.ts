// POST /v1/video/quote (issue 16): the upstream's quote plus the markup, the market's depth at the
// buyer's ceiling, and whether the whole job clears on one offer now. No charge, no job, no record.
import { describe, expect } from "vitest";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, confirmedOf, fundedBuyerKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

interface Quote {
  quote_diem?: string;
  estimated_usdc?: string;
  max_price_cents?: number;
  max_eligible_offer_diem?: string;
  eligible_routable_diem?: string;
  clears_now?: boolean;
  svc?: { cost_usdc: string; clearing_price_cents: number | null; upstream_quote_diem: string; markup_bps: number };
  error?: { code?: string; field?: string };
}

async function quote(apiKey: string, body: Record<string, unknown>) {
  const r = await call(world.app, {
    method: "POST",
    path: "/v1/video/quote",
    headers: { authorization: `Bearer ${apiKey}` },
    body,
  });
  return { status: r.status, body: r.body as Quote, headers: r.headers };
}

// wan-2.6 at 720p with audio: 5 s × (0.10 + 0.02) DIEM = 0.6 DIEM upstream; + 5% markup = 0.63
const JOB = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };

describe("POST /v1/video/quote", () => {
  test("with nothing posted at any price: 503 pool_empty", async () => {
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const r = await quote(buyer.apiKey, JOB);
    expect([r.status, r.body.error?.code]).toEqual([503, "pool_empty"]);
  });

  test("the upstream quote plus the markup; clears on the cheapest offer that holds the whole job", async () => {
    // a thin offer (cheaper, too small for the job) and one that holds it
    await addSupply(world.app, world.sim, [
      { priceCents: 35, quantityMicroDiem: 500_000n },
      { priceCents: 40, quantityMicroDiem: 10_000_000n },
    ]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const r = await quote(buyer.apiKey, JOB);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({
      model: "wan-2.6-text-to-video",
      quote_diem: "0.630000",
      estimated_usdc: "0.252000",
      max_price_cents: 80,
      max_eligible_offer_diem: "10.000000",
      eligible_routable_diem: "10.500000",
      clears_now: true,
      svc: { cost_usdc: "0.252000", clearing_price_cents: 40, upstream_quote_diem: "0.600000", markup_bps: 500 },
    });
    // no charge, no job, no record, no support reference
    expect(r.headers.get("x-svc-support-reference")).toBeNull();
    expect(r.headers.get("x-svc-request-id")).toBeTruthy();
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    expect(await world.app.rt.db.inferenceRequest.count({ where: { accountId: buyer.accountId } })).toBe(0);
    expect(await world.app.rt.db.videoJob.count()).toBe(0);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a job larger than any one offer does not clear now; the estimate is at the ceiling", async () => {
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    // 15 s at 1080p with audio: 15 × 0.17 = 2.55 DIEM upstream, 2.6775 with the markup
    const big = await quote(buyer.apiKey, { ...JOB, duration: "15s", resolution: "1080p" });
    expect(big.status).toBe(200);
    expect(big.body.quote_diem).toBe("2.677500");
    expect(big.body.clears_now).toBe(true);
    const thin = await fundedBuyerKey(world.app, 1_000_000n, 35);
    const r = await quote(thin.apiKey, { ...JOB });
    // at a 35 cent ceiling only the 0.5 DIEM offer is eligible: too small for 0.63
    expect(r.body).toMatchObject({
      quote_diem: "0.630000",
      max_price_cents: 35,
      max_eligible_offer_diem: "0.500000",
      eligible_routable_diem: "0.500000",
      clears_now: false,
      estimated_usdc: "0.220500",
      svc: { clearing_price_cents: null },
    });
  });

  test("a ceiling below every posted price still gets a quote, with nothing eligible", async () => {
    const low = await fundedBuyerKey(world.app, 1_000_000n, 30);
    const r = await quote(low.apiKey, JOB);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      eligible_routable_diem: "0.000000",
      max_eligible_offer_diem: "0.000000",
      clears_now: false,
    });
  });

  test("503 keys_busy while every eligible key is at its in-flight limit", async () => {
    const buyer = await fundedBuyerKey(world.app, 1_000_000n, 35);
    // the only key at or below 35 cents: take all of its slots
    const { services, keys } = world.app.rt;
    const at35 = (await services.inference.book.current()).filter((e) => e.priceCentsPerDollar <= 35);
    expect(new Set(at35.map((e) => e.upstreamKeyId)).size).toBe(1);
    const gate = keys.upstreamKeyInFlight(at35[0]?.upstreamKeyId ?? "");
    for (let i = 0; i < 16; i++) expect(await services.inference.gates.acquire(gate, 16)).toBe(true);
    const busy = await quote(buyer.apiKey, JOB);
    expect([busy.status, busy.body.error?.code, busy.headers.get("retry-after")]).toEqual([503, "keys_busy", "1"]);
    // answered at once, and a quote has no support reference, not even on a 503
    expect(busy.headers.get("x-svc-support-reference")).toBeNull();
    expect(JSON.stringify(busy.body)).not.toContain("supportReference");
    for (let i = 0; i < 16; i++) services.inference.gates.release(gate);
    expect((await quote(buyer.apiKey, JOB)).status).toBe(200);
  });

  test("the body is checked against the row before the upstream is asked", async () => {
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const cases: [Record<string, unknown>, number, string, string | undefined][] = [
      [{ ...JOB, model: "zai-org-glm-5-1" }, 400, "unsupported_modality", undefined],
      [{ ...JOB, model: "venice-sd35" }, 400, "unsupported_modality", undefined],
      [{ ...JOB, model: "no-such-video" }, 404, "model_not_found", undefined],
      [{ ...JOB, duration: undefined }, 400, "invalid_request", "duration"],
      [{ ...JOB, resolution: "4k" }, 400, "invalid_request", "resolution"],
      [{ model: "kling-2.6-pro-image-to-video", prompt: "x", duration: "5s" }, 400, "invalid_request", "image_url"],
    ];
    const before = world.sim.state.listRequests({ route: "/video/quote" }).length;
    for (const [body, status, code, field] of cases) {
      const r = await quote(buyer.apiKey, body);
      expect([r.status, r.body.error?.code, r.body.error?.field], JSON.stringify(body)).toEqual([status, code, field]);
    }
    expect(world.sim.state.listRequests({ route: "/video/quote" }).length).toBe(before);
  });

  test("a key the upstream refuses for lack of balance (402) is cooled down, and the next key quotes", async () => {
    // the cheapest key is asked first; its upstream account is out of balance
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 31, quantityMicroDiem: 10_000_000n },
      { priceCents: 32, quantityMicroDiem: 10_000_000n },
    ]);
    world.app.rt.services.inference.invalidateBook();
    const [broke] = supply.keys;
    world.sim.state.injectFault(broke?.secret ?? "", { kind: "http_402_balance", route: "/video/quote" });
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const r = await quote(buyer.apiKey, JOB);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(world.sim.state.listRequests({ key: broke?.secret, route: "/video/quote" })).toHaveLength(1);
    expect(world.sim.state.listRequests({ key: supply.keys[1]?.secret, route: "/video/quote" })).toHaveLength(1);
    // like an attempt's key (routing.test.ts "an upstream 402 … cools that key down")
    const key = await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: broke?.upstreamKeyId } });
    expect(key.cooldownUntil?.getTime()).toBeGreaterThan(Date.now());
  });
});
