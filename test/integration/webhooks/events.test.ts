// Issue 30: the events, each written to the outbox in the transaction of what it tells, delivered
// by the worker to a receiver on loopback: credit.confirmed after the 20th block, offer.depleted
// when a settlement sells an offer out, balance.low, key.budget_exhausted, video.completed and
// video.refunded, upstream_key.unhealthy, offer.expired. Payloads carry the resource's id and
// amounts as six-decimal strings, never a secret or (in a buyer's event) the supplier.
import { afterAll, beforeAll, describe, expect } from "vitest";
import { textPricer } from "../../../src/domain/inference/pipeline/admission.js";
import { bearer, call } from "../../../testkit/actors.js";
import { chainEnv, fundedBuyer, post, signedPayment } from "../../../testkit/funding.js";
import { fundingTest } from "../../../testkit/funding-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import { addSupply, chat, fundedBuyerKey } from "../../../testkit/market.js";
import { type Receiver, startReceiver, verifies, webhookFor } from "../../../testkit/webhooks.js";

const test = fundingTest;
test.override("appOptions", ({ chain }) => ({
  env: chainEnv(chain, { CONFIRMATION_BLOCKS: "20", WEBHOOK_RETRY_SCHEDULE_MS: "50,50" }),
  workers: true,
  sim: {},
  syncCatalog: true,
}));

const MODEL = "zai-org-glm-5-1";

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

/** A supplier's endpoint for `events` (a supplier account made straight in the database has no session). */
async function supplierHook(app: TestApp, accountId: string, events: string[]) {
  const r = await app.rt.services.webhooks.register({ accountId, credential: "session", url: receiver.url, events });
  return { id: r.webhook.id, secret: r.secret };
}

const ofType =
  (type: string, match: (data: Record<string, unknown>) => boolean = () => true) =>
  (h: { json: { type: string; data: Record<string, unknown> } }) =>
    h.json.type === type && match(h.json.data);

describe("credit.confirmed", () => {
  test("arrives after the 20th block, not before, signed; nothing of it earlier", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = { path: "/v1/x402/signup" as const, body: { amountMicroUsdc: 3_000_000 } };
    const signup = await post(app, c, await signedPayment(app, buyer, c));
    expect(signup.status).toBe(200);
    const apiKey = String(signup.body.apiKey);
    const hook = await webhookFor(app, bearer(apiKey), { url: receiver.url, events: ["credit.confirmed"] });
    const payment = await app.rt.db.payment.findFirstOrThrow({ where: { payerAddress: buyer.address.toLowerCase() } });
    const mine = ofType("credit.confirmed", (d) => d.paymentId === payment.id);

    let depth = 0;
    for (let i = 0; i < 30; i++) {
      await chain.mine(1);
      const r = await app.rt.services.payments.confirmPending();
      const row = await app.rt.db.payment.findUniqueOrThrow({ where: { id: payment.id } });
      if (r.confirmed > 0) {
        depth = row.confirmations;
        break;
      }
      expect(row.status).toBe("pending");
      expect(receiver.all(mine)).toEqual([]);
    }
    expect(depth).toBe(20);
    const got = await receiver.waitFor(mine);
    expect(got.json.data).toEqual({
      paymentId: payment.id,
      kind: "signup",
      amountUsdc: "3.000000",
      transaction: payment.settlementTxHash,
      confirmations: 20,
      confirmedAt: expect.any(String),
    });
    expect(verifies(hook.secret, got)).toBe(true);
    // once, however often the confirmations job runs again
    await app.rt.services.payments.confirmPending();
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.all(mine)).toHaveLength(1);
  });
});

describe("settlement events", () => {
  test("offer.depleted when a settlement sells the offer out; balance.low when a charge crosses the threshold", async ({
    app,
    sim,
  }) => {
    const buyer = await fundedBuyerKey(app, 5_000_000n);
    const router = app.rt.services.inference;
    // what one request of this size may burn at most: its maximum, learned on a large offer
    const big = await addSupply(app, sim, [{ priceCents: 70, quantityMicroDiem: 100_000_000n }]);
    router.invalidateBook();
    const keyId = (await app.rt.db.apiKey.findFirstOrThrow({ where: { accountId: buyer.accountId } })).id;
    const request = {
      accountId: buyer.accountId,
      apiKeyId: keyId,
      route: "chat" as const,
      modality: "text" as const,
      model: MODEL,
      stream: false,
      price: (model: Parameters<typeof textPricer>[0]) => textPricer(model, 40, 20),
    };
    const probe = await router.open(request);
    const maxBurn = probe.plan.maxBurnMicroDiem;
    await router.abort(probe, "test_probe");

    // the supplier's offer holds exactly one such request, at a price below the other offer's
    const supply = await addSupply(app, sim, [{ priceCents: 30, quantityMicroDiem: maxBurn }]);
    const offerId = supply.keys[0]?.offerId as string;
    await supplierHook(app, supply.supplierAccountId, ["offer.depleted"]);
    // the buyer's endpoint fires below 5 USDC: the first charge crosses it, the second does not
    const low = await webhookFor(app, bearer(buyer.apiKey), {
      url: receiver.url,
      events: ["balance.low"],
      balanceLowThresholdUsdc: "5.000000",
    });
    router.invalidateBook();

    const session = await router.open(request);
    expect(session.attempt.offerId).toBe(offerId);
    const settled = await router.settle(session, {
      kind: "settled",
      usage: { promptTokens: session.plan.promptEstimate, completionTokens: session.plan.admittedMaxTokens },
    });
    expect(settled.burnMicroDiem).toBe(maxBurn);

    const depleted = await receiver.waitFor(ofType("offer.depleted", (d) => d.id === offerId));
    expect(depleted.json.data).toEqual({
      id: offerId,
      upstreamKeyId: supply.keys[0]?.upstreamKeyId,
      priceCentsPerDollar: 30,
      quantityDiem: expect.stringMatching(/^\d+\.\d{6}$/),
      remainingDiem: "0.000000",
      soldDiem: expect.stringMatching(/^\d+\.\d{6}$/),
      status: "depleted",
      expiresAt: expect.any(String),
      endedAt: expect.any(String),
    });
    expect(depleted.json.data.soldDiem).toBe(depleted.json.data.quantityDiem);
    expect((await app.rt.db.offer.findUniqueOrThrow({ where: { id: offerId } })).status).toBe("depleted");

    const crossing = await receiver.waitFor(ofType("balance.low"));
    const after = (await app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } })).confirmedMicroUsdc;
    expect(crossing.json.data).toEqual({
      confirmedUsdc: `${after / 1_000_000n}.${(after % 1_000_000n).toString().padStart(6, "0")}`,
      thresholdUsdc: "5.000000",
    });
    expect(verifies(low.secret, crossing)).toBe(true);
    // a buyer's event says nothing of the supplier
    expect(crossing.body).not.toContain(supply.supplierAccountId);
    expect(crossing.body).not.toContain(offerId);

    // below the threshold already: the next charge (on the other offer) sends nothing more
    const next = await router.open(request);
    expect(next.attempt.offerId).toBe(big.keys[0]?.offerId);
    await router.settle(next, { kind: "settled", usage: { promptTokens: 10, completionTokens: 5 } });
    await new Promise((r) => setTimeout(r, 400));
    expect(receiver.all(ofType("balance.low"))).toHaveLength(1);
    expect(receiver.all(ofType("offer.depleted", (d) => d.id === offerId))).toHaveLength(1);
  });

  test("a settlement nobody listens to commits in one statement; one with a listener, in a transaction", async ({
    app,
    sim,
  }) => {
    await addSupply(app, sim, [{ priceCents: 60, quantityMicroDiem: 50_000_000n }]);
    app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(app, 5_000_000n);
    // a connection checked out by promise (`pool.query` takes its own by callback) is the
    // transactional ending's: the only such caller on the settlement's pool
    const sql = app.rt.sql;
    const connect = sql.connect.bind(sql) as (...args: unknown[]) => unknown;
    let connects = 0;
    (sql as { connect: unknown }).connect = (...args: unknown[]) => {
      if (args.length === 0) connects++;
      return connect(...args);
    };
    try {
      const body = { model: MODEL, messages: [{ role: "user", content: "hi" }] };
      const quiet = await chat(app, buyer.apiKey, body);
      expect(quiet.status, JSON.stringify(quiet.body)).toBe(200);
      await expect.poll(() => app.rt.db.clear.count({ where: { buyerAccountId: buyer.accountId } })).toBe(1);
      expect(connects).toBe(0);

      await app.rt.services.webhooks.register({
        accountId: buyer.accountId,
        credential: "session",
        url: receiver.url,
        events: ["key.budget_exhausted"],
      });
      const heard = await chat(app, buyer.apiKey, body);
      expect(heard.status, JSON.stringify(heard.body)).toBe(200);
      await expect.poll(() => app.rt.db.clear.count({ where: { buyerAccountId: buyer.accountId } })).toBe(2);
      expect(connects).toBeGreaterThanOrEqual(1);
    } finally {
      (sql as { connect: unknown }).connect = connect;
    }
  });

  test("key.budget_exhausted: a request refused for the key's budget, once per period", async ({ app, sim }) => {
    await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 100_000_000n }]);
    app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(app, 5_000_000n);
    const minted = await call(app, {
      method: "POST",
      path: "/v1/account/api-keys",
      headers: { cookie: buyer.user.cookie },
      body: { name: "tiny", limitUsdc: "0.000001", limitReset: "daily" },
    });
    expect(minted.status).toBe(201);
    const key = minted.body as { id: string; apiKey: string };
    await webhookFor(app, bearer(buyer.apiKey), { url: receiver.url, events: ["key.budget_exhausted"] });
    const ask = () =>
      call(app, {
        method: "POST",
        path: "/v1/chat/completions",
        headers: bearer(key.apiKey),
        body: { model: MODEL, messages: [{ role: "user", content: "hi" }] },
      });
    const refused = await ask();
    expect([refused.status, (refused.body as { error: { code: string } }).error.code]).toEqual([
      402,
      "key_budget_exceeded",
    ]);
    const got = await receiver.waitFor(ofType("key.budget_exhausted", (d) => d.keyId === key.id));
    expect(got.json.data).toEqual({
      keyId: key.id,
      name: "tiny",
      limitUsdc: "0.000001",
      spentUsdc: "0.000000",
      remainingUsdc: "0.000001",
      limitReset: "daily",
      resetsAt: expect.any(String),
    });
    expect((await ask()).status).toBe(402);
    await new Promise((r) => setTimeout(r, 400));
    expect(receiver.all(ofType("key.budget_exhausted", (d) => d.keyId === key.id))).toHaveLength(1);
  });

  test("key.budget_exhausted names the parent whose budget a child key exhausted (issue 38)", async ({ app, sim }) => {
    await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 100_000_000n }]);
    app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(app, 5_000_000n);
    const minted = await call(app, {
      method: "POST",
      path: "/v1/account/api-keys",
      headers: { cookie: buyer.user.cookie },
      body: { name: "tiny parent", limitUsdc: "0.000001", limitReset: "daily", scopes: ["inference", "keys"] },
    });
    expect(minted.status).toBe(201);
    const parent = minted.body as { id: string; apiKey: string };
    const child = await call(app, {
      method: "POST",
      path: "/v1/agent/keys",
      headers: bearer(parent.apiKey),
      body: { name: "child" },
    });
    expect(child.status, JSON.stringify(child.body)).toBe(201);
    const childKey = child.body as { id: string; apiKey: string; parentId: string };
    expect(childKey.parentId).toBe(parent.id);
    await webhookFor(app, bearer(buyer.apiKey), { url: receiver.url, events: ["key.budget_exhausted"] });
    const refused = await call(app, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: bearer(childKey.apiKey),
      body: { model: MODEL, messages: [{ role: "user", content: "hi" }] },
    });
    expect((refused.body as { error: { code: string } }).error.code).toBe("key_budget_exceeded");
    const got = await receiver.waitFor(ofType("key.budget_exhausted", (d) => d.keyId === parent.id));
    expect(got.json.data).toMatchObject({ keyId: parent.id, name: "tiny parent", limitUsdc: "0.000001" });
  });
});

describe("supply events", () => {
  test("upstream_key.unhealthy when the upstream refuses a key; offer.expired at the offer's midnight", async ({
    app,
    sim,
  }) => {
    const supply = await addSupply(app, sim, [
      { priceCents: 50, quantityMicroDiem: 5_000_000n },
      { priceCents: 51, quantityMicroDiem: 5_000_000n },
    ]);
    const [sick, ending] = supply.keys;
    if (!sick || !ending) throw new Error("two keys");
    const hook = await supplierHook(app, supply.supplierAccountId, ["upstream_key.unhealthy", "offer.expired"]);
    expect(await app.rt.services.keyHealth.markAuthFailed(sick.upstreamKeyId)).toBe(true);
    const unhealthy = await receiver.waitFor(ofType("upstream_key.unhealthy", (d) => d.id === sick.upstreamKeyId));
    expect(unhealthy.json.data).toEqual({
      id: sick.upstreamKeyId,
      label: "key 50",
      status: "auth_failed",
      maskedKey: `…${sick.secret.slice(-4)}`,
      authFailedAt: expect.any(String),
    });
    expect(unhealthy.body).not.toContain(sick.secret);
    expect(verifies(hook.secret, unhealthy)).toBe(true);

    await app.rt.db.offer.update({ where: { id: ending.offerId }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect((await app.rt.services.offers.expireDue()).expired).toBeGreaterThanOrEqual(1);
    const expired = await receiver.waitFor(ofType("offer.expired", (d) => d.id === ending.offerId));
    expect(expired.json.data).toMatchObject({
      id: ending.offerId,
      status: "expired",
      quantityDiem: "5.000000",
      remainingDiem: "5.000000",
      soldDiem: "0.000000",
    });
  });
});

describe("video events", () => {
  test("video.completed when the render finishes; video.refunded when it fails", async ({ app, sim }) => {
    sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
    await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 10_000_000n }]);
    app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(app, 2_000_000n);
    await webhookFor(app, bearer(buyer.apiKey), { url: receiver.url, events: ["video.completed", "video.refunded"] });
    const queue = async (prompt: string) => {
      const r = await call(app, {
        method: "POST",
        path: "/v1/video/queue",
        headers: bearer(buyer.apiKey),
        body: { model: "wan-2.6-text-to-video", prompt, duration: "5s", resolution: "720p" },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return (r.body as { queue_id: string }).queue_id;
    };
    const ok = await queue("a fox [[sim:video=mp4]]");
    const bad = await queue("a fox [[sim:video=failed]]");
    await app.rt.services.videoJobs.pollDue();
    const completed = await receiver.waitFor(ofType("video.completed", (d) => d.queue_id === ok));
    expect(completed.json.data).toEqual({
      queue_id: ok,
      model: "wan-2.6-text-to-video",
      state: "rendering",
      completed_at: expect.any(String),
    });
    const refunded = await receiver.waitFor(ofType("video.refunded", (d) => d.queue_id === bad));
    const job = await app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId: bad } });
    expect(refunded.json.data).toEqual({
      queue_id: bad,
      model: "wan-2.6-text-to-video",
      state: "refunded",
      reason: job.failureReason,
      refunded_usdc: `0.${job.chargeMicroUsdc.toString().padStart(6, "0")}`,
      refunded_at: expect.any(String),
    });
    // a second poll completes nothing again
    await app.rt.services.videoJobs.pollDue();
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.all(ofType("video.completed", (d) => d.queue_id === ok))).toHaveLength(1);
  });
});
