// Issue 39 item 2: no buyer can take a supplier's key out of routing. Venice refuses some requests
// to perfectly valid keys — a region-restricted video model (403 on the video routes), the
// alpha-only /responses — and those refusals are answered to the buyer while every key stays
// routable; a truly revoked key still leaves routing at once, on every route.
import { beforeEach, describe, expect } from "vitest";
import { postWithKey } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  addSupply,
  chat,
  confirmedOf,
  emptyBook,
  fundedBuyerKey,
  requestByReference,
  responses,
  type SupplierKey,
} from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true, env: { KEY_MAX_IN_FLIGHT: "64" } });
const world = fileWorld(test);

const MODEL = "zai-org-glm-5-1";
/** restricted to US and GB in the simulator's catalog (`regionRestrictions`) */
const KLING_JOB = {
  model: "kling-2.6-pro-image-to-video",
  prompt: "a fox in the snow",
  duration: "5s",
  image_url: "https://example.com/fox.png",
};
const WAN_JOB = { model: "wan-2.6-text-to-video", prompt: "a fox", duration: "5s", resolution: "720p" };
const MSG = { model: MODEL, messages: [{ role: "user", content: "hello" }] };

beforeEach(async () => {
  await emptyBook(world.app);
  world.sim.state.clearFaults();
  world.sim.state.setCallerRegion("US");
});

async function market(prices = [35, 40, 45]) {
  const s = await addSupply(
    world.app,
    world.sim,
    prices.map((priceCents) => ({ priceCents, quantityMicroDiem: 50_000_000n })),
  );
  world.app.rt.services.inference.invalidateBook();
  return s.keys;
}

/** Each key's health as routing sees it. */
async function health(keys: SupplierKey[]) {
  const rows = await world.app.rt.db.upstreamKey.findMany({ where: { id: { in: keys.map((k) => k.upstreamKeyId) } } });
  return new Map(rows.map((r) => [r.id, { status: r.status, cooldownUntil: r.cooldownUntil }]));
}

async function expectAllRoutable(keys: SupplierKey[]) {
  for (const [id, h] of await health(keys)) expect(h, id).toEqual({ status: "active", cooldownUntil: null });
}

/** The upstream calls made with these keys on `route`. */
function upstreamCalls(keys: SupplierKey[], route: string) {
  const secrets = new Set(keys.map((k) => k.secret));
  return world.sim.state.listRequests({ route }).filter((r) => r.key !== null && secrets.has(r.key));
}

const errorOf = (body: unknown) => (body as { error: { code: string; reason?: string } }).error;

describe("refusals of the request leave every key routable", () => {
  test("100 buyer requests for a region-restricted video model: 403 model_region_restricted, no key marked, nothing charged", async () => {
    const keys = await market();
    world.sim.state.setCallerRegion("DE");
    const buyer = await fundedBuyerKey(world.app, 20_000_000n);
    for (let i = 0; i < 100; i++) {
      const path = i % 2 === 0 ? "/v1/video/quote" : "/v1/video/queue";
      const r = await postWithKey(world.app, buyer.apiKey, path, KLING_JOB);
      expect([r.status, errorOf(r.body).code], `${i} ${path}`).toEqual([403, "model_region_restricted"]);
    }
    await expectAllRoutable(keys);
    // each refusal was asked of one key only (no fall-forward) and no key needed confirming
    expect(upstreamCalls(keys, "/video/quote")).toHaveLength(100);
    expect(upstreamCalls(keys, "/video/queue")).toHaveLength(0);
    expect(upstreamCalls(keys, "/api_keys/rate_limits")).toHaveLength(0);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(20_000_000n);
    // still routed: the cheapest key answers the next chat at once, and an unrestricted video model
    const r = await chat(world.app, buyer.apiKey, MSG);
    expect(r.status).toBe(200);
    const rec = await requestByReference(world.app, r.headers.get("x-svc-support-reference") ?? "");
    expect(rec.attempts.map((a) => [a.upstreamKeyId, a.outcome])).toEqual([[keys[0]?.upstreamKeyId, "succeeded"]]);
    expect((await postWithKey(world.app, buyer.apiKey, "/v1/video/quote", WAN_JOB)).status).toBe(200);
    await assertBooksBalance(world.app.rt.db);
  });

  test("100 Responses calls refused as alpha-only: 403 upstream_access_denied, no key marked", async () => {
    const keys = await market();
    for (const k of keys) world.sim.state.setAlphaAccess(k.secret, false);
    const buyer = await fundedBuyerKey(world.app, 20_000_000n);
    for (let i = 0; i < 100; i++) {
      const r = await responses(world.app, buyer.apiKey, { model: MODEL, input: `hi ${i}`, stream: i % 3 === 0 });
      expect([r.status, errorOf(r.body).code, errorOf(r.body).reason], String(i)).toEqual([
        403,
        "upstream_access_denied",
        "alpha_only",
      ]);
    }
    await expectAllRoutable(keys);
    expect(upstreamCalls(keys, "/responses")).toHaveLength(100);
    expect(upstreamCalls(keys, "/api_keys/rate_limits")).toHaveLength(0);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(20_000_000n);
    expect((await chat(world.app, buyer.apiKey, MSG)).status).toBe(200);
    for (const k of keys) world.sim.state.setAlphaAccess(k.secret, true);
    expect((await responses(world.app, buyer.apiKey, { model: MODEL, input: "hi" })).status).toBe(200);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a 401/403 the reference does not document: the key is confirmed once with a rate-limits read and stays", async () => {
    const keys = await market([35, 45]);
    const [cheap, next] = keys as [SupplierKey, SupplierKey];
    world.sim.state.injectFault(cheap.secret, { kind: "http_403_unauthorized", count: 2 });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    for (let i = 0; i < 2; i++) {
      const r = await chat(world.app, buyer.apiKey, MSG);
      expect(r.status).toBe(200);
      expect(r.headers.get("x-svc-clearing-price-cents")).toBe(String(next.priceCents));
    }
    await expectAllRoutable(keys);
    // one read for both refusals (at most one per key per minute)
    expect(upstreamCalls([cheap], "/api_keys/rate_limits")).toHaveLength(1);
    const r = await chat(world.app, buyer.apiKey, MSG);
    expect(r.headers.get("x-svc-clearing-price-cents")).toBe(String(cheap.priceCents));
  });
});

describe("a truly revoked key leaves routing at once", () => {
  const routes: [string, (apiKey: string) => Promise<{ status: number; body: unknown }>][] = [
    ["chat", (k) => chat(world.app, k, MSG)],
    // /responses documents no alpha refusal, so its 401 is confirmed first: the read fails too
    ["responses", (k) => responses(world.app, k, { model: MODEL, input: "hi" })],
    ["video quote", (k) => postWithKey(world.app, k, "/v1/video/quote", WAN_JOB)],
  ];
  test.each(routes)("%s: the request is served by the next key; the revoked one is auth_failed", async (_, send) => {
    const keys = await market([35, 45]);
    const [revoked, next] = keys as [SupplierKey, SupplierKey];
    world.sim.state.revokeKey(revoked.secret);
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await send(buyer.apiKey);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const h = await health(keys);
    expect(h.get(revoked.upstreamKeyId)?.status).toBe("auth_failed");
    expect(h.get(next.upstreamKeyId)).toEqual({ status: "active", cooldownUntil: null });
    // out of routing: the next request never asks it
    const before = world.sim.state.listRequests({ key: revoked.secret }).length;
    expect((await send(buyer.apiKey)).status).toBe(200);
    expect(world.sim.state.listRequests({ key: revoked.secret })).toHaveLength(before);
  });
});
