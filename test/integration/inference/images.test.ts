// Images on the inference pipeline (issue 16): POST /v1/image/generate and the OpenAI-compatible
// POST /v1/images/generations. Every charge is cross-checked against what the upstream simulator
// burned on the supplier keys, and the books balance after every scenario.
import OpenAI from "openai";
import { afterEach, describe, expect } from "vitest";
import { storedAttempts } from "../../../src/domain/inference/pipeline/session.js";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import type { TestApp } from "../../../testkit/harness.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import { addSupply, confirmedOf, fundedBuyerKey, type SupplierKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true, peer: true });
const world = fileWorld(test);

let offers: { supplierAccountId: string; keys: SupplierKey[] }[] = [];

/** Supply for one test (withdrawn after it: tests share one database). */
async function supply(priceCents: number, n = 1) {
  const s = await addSupply(
    world.app,
    world.sim,
    Array.from({ length: n }, () => ({ priceCents, quantityMicroDiem: 10_000_000n })),
  );
  offers.push(s);
  world.app.rt.services.inference.invalidateBook();
  world.peer.rt.services.inference.invalidateBook();
  return s;
}

afterEach(async () => {
  for (const s of offers) {
    for (const k of s.keys) {
      await world.app.rt.services.offers
        .cancelOffer({ accountId: s.supplierAccountId, offerId: k.offerId })
        .catch(() => undefined);
    }
  }
  offers = [];
  world.sim.state.clearFaults();
});

const spentOn = (keys: SupplierKey[]) =>
  keys.reduce((a, k) => a + (world.sim.state.getKey(k.secret)?.spentDiemEpochMicro ?? 0n), 0n);

interface Answer {
  id?: string;
  images?: string[];
  created?: number;
  data?: { b64_json?: string; url?: string }[];
  field?: string;
  error?: { code?: string; field?: string };
}

async function generate(app: TestApp, apiKey: string, body: Record<string, unknown>, path = "/v1/image/generate") {
  const r = await call(app, { method: "POST", path, headers: { authorization: `Bearer ${apiKey}` }, body });
  return { status: r.status, body: (r.body ?? {}) as Answer, headers: Object.fromEntries(r.headers.entries()) };
}

const micro = (usdc: string) => BigInt(usdc.replace(".", ""));

describe("POST /v1/image/generate: priced by the service from the catalog", () => {
  // per image in micro-DIEM (the simulator's published prices), and the job the request asks for
  const cases: [string, Record<string, unknown>, bigint][] = [
    ["flat price × variants", { model: "venice-sd35", variants: 3 }, 3n * 10_000n],
    ["flat price, n as variants", { model: "venice-sd35", n: 2 }, 2n * 10_000n],
    ["by resolution, default 1K", { model: "nano-banana-pro" }, 180_000n],
    ["by resolution, 2K × 2", { model: "nano-banana-pro", resolution: "2K", variants: 2 }, 2n * 230_000n],
    ["quality × resolution, defaults (1K, high)", { model: "gpt-image-2" }, 260_000n],
    [
      "quality × resolution, 4K low × 4",
      { model: "gpt-image-2", resolution: "4K", quality: "low", variants: 4 },
      4n * 70_000n,
    ],
  ];
  for (const [name, body, job] of cases) {
    test(`${name}: the charge is the job at the clearing price, and the upstream burned exactly the job`, async () => {
      const s = await supply(40);
      const buyer = await fundedBuyerKey(world.app, 5_000_000n);
      const r = await generate(world.app, buyer.apiKey, { prompt: "a red fox", ...body });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const variants = Number(body.variants ?? body.n ?? 1);
      expect(r.body.images).toHaveLength(variants);
      expect(typeof r.body.id).toBe("string");
      expect(r.headers["x-svc-clearing-price-cents"]).toBe("40");
      const cost = micro(String(r.headers["x-svc-cost-usdc"]));
      expect(cost).toBe((job * 40n) / 100n);
      expect(spentOn(s.keys)).toBe(job);
      expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n - cost);
      expect(r.headers["x-balance-remaining"]).toBe((Number(5_000_000n - cost) / 1e6).toFixed(6));
      expect(r.headers["x-svc-support-reference"]).toBeTruthy();
      // one clear, with the image modality, on the request's record
      const clears = await world.app.rt.db.clear.findMany({ where: { buyerAccountId: buyer.accountId } });
      expect(clears.map((c) => [c.modality, c.burnMicroDiem, c.grossMicroUsdc])).toEqual([["image", job, cost]]);
      const rec = await world.app.rt.db.inferenceRequest.findFirstOrThrow({ where: { accountId: buyer.accountId } });
      expect([rec.route, rec.modality, rec.status]).toEqual(["image", "image", "succeeded"]);
      await expectHoldsReleased(world.app, buyer.accountId);
      await assertBooksBalance(world.app.rt.db);
    });
  }

  test("bad input is a 400 naming the field (or 404 for an unknown model), and nothing changes", async () => {
    await supply(40);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const bad: [Record<string, unknown>, number, string][] = [
      [{ model: "zai-org-glm-5-1", prompt: "x" }, 400, "unsupported_modality"],
      [{ model: "wan-2.6-text-to-video", prompt: "x" }, 400, "unsupported_modality"],
      [{ model: "no-such-model", prompt: "x" }, 404, "model_not_found"],
      [{ model: "venice-sd35" }, 400, "invalid_request"],
      [{ model: "venice-sd35", prompt: "x", variants: 5 }, 400, "invalid_request"],
      [{ model: "venice-sd35", prompt: "x", n: 0 }, 400, "invalid_request"],
      [{ model: "venice-sd35", prompt: "x", variants: 2, n: 3 }, 400, "invalid_request"],
      [{ model: "venice-sd35", prompt: "x", enable_web_search: true }, 400, "invalid_request"],
      [{ model: "venice-sd35", prompt: "x", resolution: "2K" }, 400, "invalid_request"],
      [{ model: "nano-banana-pro", prompt: "x", resolution: "8K" }, 400, "invalid_request"],
      [{ model: "nano-banana-pro", prompt: "x", quality: "high" }, 400, "invalid_request"],
      [{ model: "gpt-image-2", prompt: "x", quality: "ultra" }, 400, "invalid_request"],
      [{ model: "venice-sd35", prompt: "x", stream: true }, 400, "invalid_request"],
      [{ model: "venice-sd35", prompt: "x", return_binary: true }, 400, "invalid_request"],
    ];
    for (const [body, status, code] of bad) {
      const r = await generate(world.app, buyer.apiKey, body);
      expect([r.status, r.body.error?.code], JSON.stringify(body)).toEqual([status, code]);
    }
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("402 only when the balance cannot pay the job where it clears; a balance short of the ceiling's price still buys it", async () => {
    await supply(40);
    // 3 × 0.35 DIEM = 1.05 DIEM: 0.84 USDC at the 80¢ ceiling, 0.42 at the 40¢ offer it clears on
    const job = { model: "nano-banana-pro", prompt: "x", resolution: "4K", variants: 3 };
    const short = await fundedBuyerKey(world.app, 419_999n);
    const r = await generate(world.app, short.apiKey, job);
    expect([r.status, r.body.error?.code]).toEqual([402, "insufficient_balance"]);
    await expectHoldsReleased(world.app, short.accountId);
    const enough = await fundedBuyerKey(world.app, 420_000n);
    const ok = await generate(world.app, enough.apiKey, job);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.headers["x-svc-cost-usdc"]).toBe("0.420000");
    expect(await confirmedOf(world.app, enough.accountId)).toBe(0n);
    await expectHoldsReleased(world.app, enough.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  // Issue 39 item 5: a content-policy answer is charged what the provider burned on the key for it
  // (its pre-call balance header less the key's balance after), never above the admitted maximum
  test("a content-policy answer the provider did not bill is delivered and not charged (no clear)", async () => {
    const s = await supply(40);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await generate(world.app, buyer.apiKey, {
      model: "venice-sd35",
      prompt: "x [[sim:content_violation_free]]",
    });
    expect(r.status).toBe(200);
    expect(r.body.images).toHaveLength(1);
    expect(r.headers["x-svc-cost-usdc"]).toBe("0.000000");
    expect(r.headers["x-svc-uncharged"]).toBe("content_violation");
    expect(r.headers["x-svc-flagged"]).toBeUndefined();
    expect(spentOn(s.keys)).toBe(0n);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n);
    expect(await world.app.rt.db.clear.count({ where: { buyerAccountId: buyer.accountId } })).toBe(0);
    const rec = await world.app.rt.db.inferenceRequest.findFirstOrThrow({ where: { accountId: buyer.accountId } });
    expect([rec.status, rec.errorCode, rec.costMicroUsdc]).toEqual(["succeeded", "content_violation", null]);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test.each([
    ["x-venice-is-content-violation", "[[sim:content_violation]]"],
    ["x-venice-is-adult-model-content-violation", "[[sim:adult_content_violation]]"],
  ])(
    "a content-policy answer (%s) the provider billed is charged its burn at the clearing price",
    async (_h, directive) => {
      const s = await supply(40);
      const buyer = await fundedBuyerKey(world.app, 5_000_000n);
      const r = await generate(world.app, buyer.apiKey, { model: "venice-sd35", prompt: `x ${directive}` });
      expect(r.status).toBe(200);
      expect(r.body.images).toHaveLength(1);
      // the key burned the image's price (0.01 DIEM = 10 000 micro-DIEM): at 40 cents, 4 000 micro-USDC
      expect(spentOn(s.keys)).toBe(10_000n);
      expect(r.headers["x-svc-cost-usdc"]).toBe("0.004000");
      expect(r.headers["x-svc-flagged"]).toBe("content_violation");
      expect(r.headers["x-svc-uncharged"]).toBeUndefined();
      expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n - 4_000n);
      const rec = await world.app.rt.db.inferenceRequest.findFirstOrThrow({ where: { accountId: buyer.accountId } });
      expect([rec.status, rec.errorCode, rec.burnMicroDiem, rec.costMicroUsdc]).toEqual([
        "succeeded",
        "content_violation",
        10_000n,
        4_000n,
      ]);
      expect(await world.app.rt.db.clear.count({ where: { buyerAccountId: buyer.accountId } })).toBe(1);
      await expectHoldsReleased(world.app, buyer.accountId);
      await assertBooksBalance(world.app.rt.db);
    },
  );

  test("a content-policy charge never exceeds the admitted maximum, whatever else the key burned meanwhile", async () => {
    const s = await supply(40);
    const key = s.keys[0];
    if (!key) throw new Error("one key");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    // the balance is read after the answer: hold that read back while the key burns 1 DIEM elsewhere
    world.sim.state.injectFault(key.secret, { kind: "latency", ms: 400, route: "/api_keys/rate_limits" });
    const pending = generate(world.app, buyer.apiKey, { model: "venice-sd35", prompt: "x [[sim:content_violation]]" });
    for (let i = 0; i < 100; i++) {
      if (world.sim.state.listRequests({ key: key.secret, route: "/image/generate" }).some((q) => q.status === 200))
        break;
      await new Promise((res) => setTimeout(res, 10));
    }
    const now = world.sim.state.getKey(key.secret)?.diemMicro ?? 0n;
    world.sim.state.setBalance(key.secret, { diemMicro: now - 1_000_000n });
    const r = await pending;
    expect(r.status).toBe(200);
    // capped at the image's price (the admitted maximum): 10 000 micro-DIEM at 40 cents
    expect(r.headers["x-svc-cost-usdc"]).toBe("0.004000");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n - 4_000n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a content-policy answer whose burn cannot be read (no balance after) is not charged", async () => {
    const s = await supply(40);
    const key = s.keys[0];
    if (!key) throw new Error("one key");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    world.sim.state.injectFault(key.secret, { kind: "http_500", route: "/api_keys/rate_limits" });
    const r = await generate(world.app, buyer.apiKey, { model: "venice-sd35", prompt: "x [[sim:content_violation]]" });
    expect(r.status).toBe(200);
    expect(r.headers["x-svc-uncharged"]).toBe("content_violation");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("falls forward across supplier keys like chat: one clear, on the key that answered", async () => {
    const s = await supply(40, 3);
    const [k1, k2, k3] = s.keys;
    if (!k1 || !k2 || !k3) throw new Error("three keys");
    world.sim.state.injectFault(k1.secret, { kind: "http_500", route: "/image/generate" });
    world.sim.state.injectFault(k2.secret, { kind: "http_402_balance", route: "/image/generate" });
    world.sim.state.injectFault(k3.secret, { kind: "http_503", route: "/image/generate" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const more = await supply(45);
    const r = await generate(world.app, buyer.apiKey, { model: "venice-sd35", prompt: "x", variants: 2 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.headers["x-svc-clearing-price-cents"]).toBe("45");
    expect(spentOn(s.keys)).toBe(0n);
    expect(spentOn(more.keys)).toBe(20_000n);
    const rec = await world.app.rt.db.inferenceRequest.findFirstOrThrow({ where: { accountId: buyer.accountId } });
    expect(storedAttempts(rec.attempts).map((a) => a.outcome)).toEqual([
      "retryable_failure",
      "supplier_exhausted",
      "retryable_failure",
      "succeeded",
    ]);
    expect(await world.app.rt.db.clear.count({ where: { buyerAccountId: buyer.accountId } })).toBe(1);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("one image job in flight per wallet across two API processes: 10 at once → 1 runs, 9 get 429", async () => {
    const s = await supply(40);
    // the one job runs long enough that all ten arrive while it is in flight, even on a loaded
    // machine (a request delayed past the end of a 400 ms job was rightly admitted: a flake in CI)
    world.sim.state.injectFault("*", { kind: "latency", ms: 2_500, route: "/image/generate" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const both = [world.app, world.peer];
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        generate(both[i % 2] as TestApp, buyer.apiKey, { model: "venice-sd35", prompt: `x ${i}` }),
      ),
    );
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 429);
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(9);
    for (const r of refused) {
      expect(r.body.error?.code).toBe("buyer_concurrency_limit");
      expect(r.headers["retry-after"]).toBe("1");
    }
    expect(spentOn(s.keys)).toBe(10_000n);
    // the slot is released on every path: the next job runs (on either process)
    world.sim.state.clearFaults();
    const again = await generate(world.peer, buyer.apiKey, { model: "venice-sd35", prompt: "after" });
    expect(again.status).toBe(200);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("the wallet's image slot is released on every path", () => {
  test("after a 402, an upstream 400, a 503 and exhausted fall-forward, the next image job runs at once", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const job = { model: "venice-sd35", prompt: "x" };
    // 503: no supply at all
    const none = await generate(world.app, buyer.apiKey, job);
    expect(none.status).toBe(503);
    const s = await supply(40, 5);
    // the upstream's own 400 for a value it refuses (a width past its limit): relayed, nothing charged
    const refused = await generate(world.app, buyer.apiKey, { ...job, width: 5000 });
    expect([refused.status, refused.body.error?.code]).toEqual([400, "invalid_request"]);
    // 402: more than the balance
    const poor = await fundedBuyerKey(world.app, 10_000n); // one image at the 80¢ ceiling: 8,000; four: 32,000
    expect((await generate(world.app, poor.apiKey, { ...job, variants: 4 })).status).toBe(402);
    expect((await generate(world.app, poor.apiKey, job)).status).toBe(200);
    // 502: five keys failing
    for (const k of s.keys)
      world.sim.state.injectFault(k.secret, { kind: "http_500", route: "/image/generate", count: 1 });
    const exhausted = await generate(world.app, buyer.apiKey, job);
    expect([exhausted.status, exhausted.body.error?.code]).toEqual([502, "upstream_error"]);
    // each ending gave the slot back: no 429 now, on either process
    expect((await generate(world.peer, buyer.apiKey, job)).status).toBe(200);
    expect((await generate(world.app, buyer.apiKey, job)).status).toBe(200);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("image history and market figures", () => {
  test("the buyer's image history (GraphQL, REST) and today's clears by modality include the image", async () => {
    await supply(40);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await call(world.app, { method: "GET", path: "/v1/market/stats" });
    const imageBefore = (before.body as { today: { byModality: { image: { clears: number } } } }).today.byModality
      .image;
    expect((await generate(world.app, buyer.apiKey, { model: "venice-sd35", prompt: "x" })).status).toBe(200);
    const res = await fetch(`${world.app.baseUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${buyer.apiKey}` },
      body: JSON.stringify({
        query: `{ image: myInferenceHistory(modality: "image") { items { route modality model status cost } }
                  text: myInferenceHistory(modality: "text") { items { requestId } } }`,
      }),
    });
    const body = (await res.json()) as {
      data?: { image: { items: Record<string, unknown>[] }; text: { items: unknown[] } };
      errors?: unknown;
    };
    expect(body.errors).toBeUndefined();
    expect(body.data?.image.items).toEqual([
      { route: "image", modality: "image", model: "venice-sd35", status: "succeeded", cost: "4000" },
    ]);
    expect(body.data?.text.items).toEqual([]);
    const after = await call(world.app, { method: "GET", path: "/v1/market/stats" });
    const imageAfter = (after.body as { today: { byModality: { image: { clears: number; burnDiem: string } } } }).today
      .byModality.image;
    expect(imageAfter.clears).toBe(imageBefore.clears + 1);
    const bad = await call(world.app, {
      method: "GET",
      path: "/v1/account/inference-history?modality=audio",
      headers: { cookie: buyer.user.cookie },
    });
    expect(bad.status).toBe(400);
  });
});

describe("POST /v1/images/generations: OpenAI's shape on the same engine and prices", () => {
  test("n 1-4 as variants; b64_json by default, url as a data URL; same price rules", async () => {
    const s = await supply(40);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await generate(
      world.app,
      buyer.apiKey,
      { model: "gpt-image-2", prompt: "a lighthouse", n: 2, quality: "low", size: "1024x1024" },
      "/v1/images/generations",
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(typeof r.body.created).toBe("number");
    expect(r.body.data).toHaveLength(2);
    expect(typeof r.body.data?.[0]?.b64_json).toBe("string");
    // 1K low = 0.02 DIEM per image
    expect(spentOn(s.keys)).toBe(40_000n);
    expect(micro(String(r.headers["x-svc-cost-usdc"]))).toBe((40_000n * 40n) / 100n);

    const u = await generate(
      world.app,
      buyer.apiKey,
      { model: "venice-sd35", prompt: "a lighthouse", response_format: "url" },
      "/v1/images/generations",
    );
    expect(u.status).toBe(200);
    expect(u.body.data?.[0]?.url).toMatch(/^data:image\/png;base64,/);
    const rec = await world.app.rt.db.inferenceRequest.findMany({ where: { accountId: buyer.accountId } });
    expect(rec.map((q) => q.route)).toEqual(["images_openai", "images_openai"]);
    await assertBooksBalance(world.app.rt.db);
  });

  test("the official openai SDK's images.generate works unmodified, n > 1 included", async () => {
    const s = await supply(40);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const client = new OpenAI({ baseURL: `${world.app.baseUrl}/v1`, apiKey: buyer.apiKey });
    const { data: img, response } = await client.images
      .generate({ model: "nano-banana-pro", prompt: "a harbour at dawn", n: 3, size: "1536x1024" })
      .withResponse();
    expect(img.data).toHaveLength(3);
    expect(Buffer.from(img.data?.[0]?.b64_json ?? "", "base64").length).toBeGreaterThan(0);
    // 3 × 1K (the default resolution) = 3 × 0.18 DIEM
    expect(spentOn(s.keys)).toBe(540_000n);
    expect(response.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6((540_000n * 40n) / 100n));
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n - (540_000n * 40n) / 100n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("bad OpenAI fields are a 400 naming the field", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    for (const [body, field] of [
      [{ model: "venice-sd35", prompt: "x", n: 5 }, "n"],
      [{ model: "venice-sd35", prompt: "x", size: "999x999" }, "size"],
      [{ model: "venice-sd35", prompt: "x", response_format: "file" }, "response_format"],
      [{ model: "venice-sd35", prompt: "x", output_format: "gif" }, "output_format"],
    ] as const) {
      const r = await generate(world.app, buyer.apiKey, body, "/v1/images/generations");
      expect([r.status, r.body.error?.field ?? r.body.field], JSON.stringify(body)).toEqual([400, field]);
    }
  });
});
