// 503 key_wait_timeout after a real wait (issue 26 findings 2 and 11): the only eligible supplier key
// is held at its in-flight limit by real chat requests the upstream never answers; a chat, an image
// and a video queue request then each wait for a free key at least the key-wait period before 503
// key_wait_timeout, carrying a support reference (header and body) that resolves at
// GET /v1/agent/requests/{ref}, with nothing charged and the books balanced.
import { afterEach, describe, expect } from "vitest";
import { KEY_WAIT_MS, SUPPLIER_KEY_MAX_IN_FLIGHT } from "../../../src/domain/inference/routing/supplier-keys.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import { addSupply, confirmedOf, emptyBook, fundedBuyerKey, type SupplierKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

const CHAT = { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hello" }], max_tokens: 20 };
const IMAGE = { model: "venice-sd35", prompt: "a fox in the snow" };
const VIDEO = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };

let release: (() => Promise<void>) | null = null;

afterEach(async () => {
  await release?.();
  release = null;
  world.sim.state.clearFaults();
  await emptyBook(world.app);
});

/**
 * Takes every in-flight slot of `key` with real buffered chat requests that the upstream accepts and
 * never answers (buyer keys enough for the per-key limit); resolves once all of them hold a slot.
 * The returned function makes the buyers leave (nothing charged) and waits until the slots are free.
 */
async function holdKeyBusy(key: SupplierKey): Promise<() => Promise<void>> {
  world.sim.state.injectFault(key.secret, { kind: "timeout", route: "/chat/completions" });
  const perBuyerKey = world.app.rt.config.limits.keyMaxInFlight;
  const buyers: { apiKey: string; accountId: string }[] = [];
  for (let i = 0; i < Math.ceil(SUPPLIER_KEY_MAX_IN_FLIGHT / perBuyerKey); i++) {
    buyers.push(await fundedBuyerKey(world.app, 5_000_000n));
  }
  const leave = new AbortController();
  const held = Array.from({ length: SUPPLIER_KEY_MAX_IN_FLIGHT }, (_, i) =>
    fetch(`${world.app.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${buyers[Math.floor(i / perBuyerKey)]?.apiKey}`,
        "content-type": "application/json",
      },
      body: JSON.stringify(CHAT),
      signal: leave.signal,
    })
      .then((r) => r.text())
      .catch(() => undefined),
  );
  const { services, keys } = world.app.rt;
  const gate = keys.upstreamKeyInFlight(key.upstreamKeyId);
  const upstreamHolds = () =>
    world.sim.state.listRequests({ route: "/chat/completions" }).filter((r) => r.key === key.secret).length;
  // every slot taken, and every holder's call arrived upstream (where it stays unanswered)
  await expect.poll(() => services.inference.gates.inUse(gate), { timeout: 10_000 }).toBe(SUPPLIER_KEY_MAX_IN_FLIGHT);
  await expect.poll(upstreamHolds, { timeout: 10_000 }).toBe(SUPPLIER_KEY_MAX_IN_FLIGHT);
  return async () => {
    leave.abort();
    await Promise.all(held);
    await expect.poll(() => services.inference.gates.inUse(gate), { timeout: 10_000 }).toBe(0);
    for (const b of buyers) await expectHoldsReleased(world.app, b.accountId);
  };
}

/** One request while the key is busy: what it answered and how long it took (ms, wall clock). */
async function whileBusy(path: string, body: Record<string, unknown>) {
  const buyer = await fundedBuyerKey(world.app, 5_000_000n);
  const started = Date.now();
  const r = await call(world.app, {
    method: "POST",
    path,
    headers: { authorization: `Bearer ${buyer.apiKey}` },
    body,
  });
  const waitedMs = Date.now() - started;
  return { ...r, waitedMs, buyer, body: r.body as { error?: { code?: string; supportReference?: string } } };
}

describe("503 key_wait_timeout after a real wait for a busy supplier key", () => {
  for (const [route, path, body] of [
    ["chat", "/v1/chat/completions", CHAT],
    ["image", "/v1/image/generate", IMAGE],
    ["video_queue", "/v1/video/queue", VIDEO],
  ] as const) {
    test(`${route}: waits the key-wait period, then 503 with a support reference that resolves; nothing charged`, async () => {
      world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
      const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
      world.app.rt.services.inference.invalidateBook();
      const key = supply.keys[0];
      if (!key) throw new Error("no key");
      release = await holdKeyBusy(key);
      const upstreamBefore = world.sim.state.listRequests({ key: key.secret }).length;

      const r = await whileBusy(path, body);
      expect([r.status, r.body.error?.code], JSON.stringify(r.body)).toEqual([503, "key_wait_timeout"]);
      // a lower bound: it answered only once it had waited for a free key the whole period
      expect(r.waitedMs).toBeGreaterThanOrEqual(KEY_WAIT_MS);
      expect(r.headers.get("retry-after")).toBe("1");
      const ref = r.headers.get("x-svc-support-reference");
      expect(ref).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.body.error?.supportReference).toBe(ref);
      // nothing reached the upstream for it
      expect(world.sim.state.listRequests({ key: key.secret }).length).toBe(upstreamBefore);

      // the reference resolves to the failed request, on the buyer's account
      const detail = await call(world.app, {
        method: "GET",
        path: `/v1/agent/requests/${ref}`,
        headers: { authorization: `Bearer ${r.buyer.apiKey}` },
      });
      expect(detail.status).toBe(200);
      expect(detail.body).toMatchObject({
        supportReference: ref,
        route,
        status: "failed",
        errorCode: "key_wait_timeout",
        costUsdc: null,
      });

      await release();
      release = null;
      // nothing charged, nothing held, no clear; the books balance
      expect(await confirmedOf(world.app, r.buyer.accountId)).toBe(5_000_000n);
      await expectHoldsReleased(world.app, r.buyer.accountId);
      expect(await world.app.rt.db.clear.count({ where: { buyerAccountId: r.buyer.accountId } })).toBe(0);
      await assertBooksBalance(world.app.rt.db);
    });
  }
});
