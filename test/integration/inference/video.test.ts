// Video jobs (issue 16): queue → retrieve (JSON … then mp4) → 410, charged exactly the quote's
// estimate; refunds exactly once for every failure outcome (provider failure, content policy,
// finished without media, never finished), under concurrent pollers, retried sweeps and a poller
// that died after seeing the failure; the offer's DIEM back only when the upstream refunded it;
// every charge and refund cross-checked against what the upstream simulator burned.
import { beforeEach, describe, expect } from "vitest";
import { parseVideoRequest } from "../../../src/contract/inference.js";
import { videoQueueModality } from "../../../src/domain/inference/modalities/video/video-queue.js";
import { InferenceEndpoint } from "../../../src/domain/inference/pipeline/endpoint.js";
import { call, postWithKey } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  addSupply,
  confirmedOf,
  emptyBook,
  expireLiveVideoJobs,
  fundedBuyerKey,
  heldOf,
  payableOf,
  simVideoBurn,
} from "../../../testkit/market.js";

/** A clock tests can move forward (the services' and the simulator's). */
let offsetMs = 0;
const clock = { now: () => new Date(Date.now() + offsetMs) };

test.override("appOptions", { syncCatalog: true, clock, sim: { now: () => clock.now() } });
const world = fileWorld(test);

// wan-2.6 at 720p with audio: 5 s × (0.10 + 0.02) DIEM = 0.6 DIEM upstream; + 5% markup = 0.63
const JOB = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };
const UPSTREAM_QUOTE = 600_000n;
const JOB_DIEM = 630_000n;

async function rawRetrieve(apiKey: string, queueId: string) {
  const res = await fetch(`${world.app.baseUrl}/v1/video/retrieve`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ queue_id: queueId }),
  });
  const type = res.headers.get("content-type") ?? "";
  if (type.startsWith("video/")) return { status: res.status, type, bytes: Buffer.from(await res.arrayBuffer()) };
  return {
    status: res.status,
    type,
    json: (await res.json()) as Record<string, unknown> & { error?: { code: string } },
  };
}

// each test starts from an empty market and no live job of another test
beforeEach(async () => {
  await emptyBook(world.app);
  await expireLiveVideoJobs(world.app);
});

/** One supplier with one key and one offer holding `quantity` at `priceCents`. */
async function market(priceCents = 40, quantity = 10_000_000n) {
  const s = await addSupply(world.app, world.sim, [{ priceCents, quantityMicroDiem: quantity }]);
  world.app.rt.services.inference.invalidateBook();
  return s;
}

async function offerRemaining(offerId: string) {
  return (await world.app.rt.db.offer.findUniqueOrThrow({ where: { id: offerId } })).remainingMicroDiem;
}

async function queue(apiKey: string, body: Record<string, unknown> = JOB) {
  const r = await postWithKey(world.app, apiKey, "/v1/video/queue", body);
  return r as {
    status: number;
    headers: Headers;
    body: Record<string, unknown> & { queue_id: string; error?: { code: string } };
  };
}

describe("POST /v1/video/queue → retrieve → 410", () => {
  test("quote, queue (charged the estimate up front), JSON while rendering, the mp4 exactly once, then 410", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 2, renderMs: 0, defaultOutcome: "mp4" });
    const supply = await market(40);
    const key = supply.keys[0];
    if (!key) throw new Error("no key");
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);

    const quote = await postWithKey(world.app, buyer.apiKey, "/v1/video/quote", JOB);
    expect(quote.status).toBe(200);
    const q = quote.body as { estimated_usdc: string; quote_diem: string; clears_now: boolean };
    expect([q.quote_diem, q.estimated_usdc, q.clears_now]).toEqual(["0.630000", "0.252000", true]);

    const queued = await queue(buyer.apiKey);
    expect(queued.status, JSON.stringify(queued.body)).toBe(200);
    expect(queued.headers.get("x-svc-cost-usdc")).toBe(q.estimated_usdc);
    expect(queued.headers.get("x-svc-clearing-price-cents")).toBe("40");
    expect(queued.headers.get("x-balance-remaining")).toBe("0.748000");
    const ref = queued.headers.get("x-svc-support-reference");
    expect(ref).toMatch(/^[0-9a-f-]{36}$/);
    expect(queued.body).toMatchObject({
      queue_id: expect.any(String),
      model: "wan-2.6-text-to-video",
      svc: { cost_usdc: "0.252000", clearing_price_cents: 40, quote_diem: "0.630000", support_reference: ref },
    });
    // charged up front: buyer, supplier, offer; the upstream charged its quote on the supplier's key
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(748_000n);
    // the supplier's share (0.252 − 10% fee) is held until the job is final
    expect([
      await payableOf(world.app, supply.supplierAccountId),
      await heldOf(world.app, supply.supplierAccountId),
    ]).toEqual([0n, 226_800n]);
    expect(await offerRemaining(key.offerId)).toBe(10_000_000n - JOB_DIEM);
    expect(simVideoBurn(world.sim, key.secret)).toMatchObject({
      chargedMicro: UPSTREAM_QUOTE,
      refundedMicro: 0n,
      jobs: 1,
    });
    // the request resolves by its support reference
    const detail = await call(world.app, {
      method: "GET",
      path: `/v1/agent/requests/${ref}`,
      headers: { authorization: `Bearer ${buyer.apiKey}` },
    });
    expect(detail.status).toBe(200);

    // rendering: JSON (two PROCESSING polls), then the mp4, then 410
    const first = await rawRetrieve(buyer.apiKey, queued.body.queue_id);
    expect([first.status, first.type.startsWith("application/json"), first.json?.status]).toEqual([
      200,
      true,
      "PROCESSING",
    ]);
    expect(first.json?.state).toBe("rendering");
    await rawRetrieve(buyer.apiKey, queued.body.queue_id);
    const media = await rawRetrieve(buyer.apiKey, queued.body.queue_id);
    expect([media.status, media.type]).toEqual([200, "video/mp4"]);
    expect(media.bytes?.subarray(4, 8).toString()).toBe("ftyp");
    const again = await rawRetrieve(buyer.apiKey, queued.body.queue_id);
    expect([again.status, again.json?.error?.code]).toEqual([410, "gone"]);
    // delivered and the provider's media deleted; complete after delivery is a 400
    const job = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId: queued.body.queue_id } });
    expect(job.status).toBe("delivered");
    // delivered is final: the share is payable
    expect([
      await payableOf(world.app, supply.supplierAccountId),
      await heldOf(world.app, supply.supplierAccountId),
    ]).toEqual([226_800n, 0n]);
    await expect
      .poll(async () => (await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { id: job.id } })).mediaDeletedAt)
      .not.toBeNull();
    const complete = await postWithKey(world.app, buyer.apiKey, "/v1/video/complete", {
      queue_id: queued.body.queue_id,
    });
    expect(complete.status).toBe(400);
    // the charge is exactly the quote's estimate and nothing moved afterwards
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(748_000n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("two concurrent retrieves of a finished render: one gets the mp4, the other 410", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
    await market(40);
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const queued = await queue(buyer.apiKey);
    const results = await Promise.all(Array.from({ length: 6 }, () => rawRetrieve(buyer.apiKey, queued.body.queue_id)));
    expect(results.filter((r) => r.type === "video/mp4")).toHaveLength(1);
    expect(results.filter((r) => r.status === 410)).toHaveLength(5);
  });

  test("another buyer's job is 404 on retrieve and complete; an unknown queue id is 404; no queue_id is 400", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 5, renderMs: 0, defaultOutcome: "mp4" });
    await market(40);
    const owner = await fundedBuyerKey(world.app, 1_000_000n);
    const other = await fundedBuyerKey(world.app, 1_000_000n);
    const queued = await queue(owner.apiKey);
    for (const path of ["/v1/video/retrieve", "/v1/video/complete"]) {
      const r = await postWithKey(world.app, other.apiKey, path, { queue_id: queued.body.queue_id });
      expect([path, r.status]).toEqual([path, 404]);
      const unknown = await postWithKey(world.app, owner.apiKey, path, {
        queue_id: "7c1a8f0e-0000-4000-8000-000000000000",
      });
      expect(unknown.status).toBe(404);
      const missing = await postWithKey(world.app, owner.apiKey, path, {});
      expect((missing.body as { error: { code: string } }).error.code).toBe("invalid_request");
      expect(missing.status).toBe(400);
    }
    const job = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId: queued.body.queue_id } });
    expect(job.status).toBe("rendering");
  });

  test("complete while rendering deletes the provider's media: the job expires (410 after)", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 5, renderMs: 0, defaultOutcome: "mp4" });
    await market(40);
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const queued = await queue(buyer.apiKey);
    const done = await postWithKey(world.app, buyer.apiKey, "/v1/video/complete", { queue_id: queued.body.queue_id });
    expect([done.status, (done.body as { success: boolean }).success]).toEqual([200, true]);
    const r = await rawRetrieve(buyer.apiKey, queued.body.queue_id);
    expect(r.status).toBe(410);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("queue admission", () => {
  test("with nothing posted: 503 pool_empty with a support reference that resolves (SPEC Errors rule 2)", async () => {
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const r = await queue(buyer.apiKey);
    expect([r.status, r.body.error?.code]).toEqual([503, "pool_empty"]);
    const ref = r.headers.get("x-svc-support-reference");
    expect(ref).toMatch(/^[0-9a-f-]{36}$/);
    expect((r.body.error as { supportReference?: string }).supportReference).toBe(ref);
    const detail = await call(world.app, {
      method: "GET",
      path: `/v1/agent/requests/${ref}`,
      headers: { authorization: `Bearer ${buyer.apiKey}` },
    });
    expect([detail.status, detail.body]).toMatchObject([
      200,
      { supportReference: ref, route: "video_queue", status: "failed", errorCode: "pool_empty", costUsdc: null },
    ]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("402 when confirmed USDC is below the price; nothing charged, nothing queued upstream", async () => {
    const supply = await market(40);
    const key = supply.keys[0];
    if (!key) throw new Error("no key");
    const buyer = await fundedBuyerKey(world.app, 200_000n); // the job costs 0.252
    const before = simVideoBurn(world.sim, key.secret).jobs;
    const r = await queue(buyer.apiKey);
    expect([r.status, r.body.error?.code]).toEqual([402, "insufficient_balance"]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(200_000n);
    expect(simVideoBurn(world.sim, key.secret).jobs).toBe(before);
  });

  test("a balance that covers the clearing price but not the ceiling's still queues (charged the clearing price)", async () => {
    await market(40);
    // 0.63 DIEM at the 80-cent ceiling would be 0.504; at the 40-cent offer it is 0.252
    const buyer = await fundedBuyerKey(world.app, 260_000n);
    const r = await queue(buyer.apiKey);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(8_000n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("reference videos are quoted at the most their clips can run: the job covers what the upstream charges", async () => {
    const supply = await market(40);
    const key = supply.keys[0];
    if (!key) throw new Error("no key");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    // two clips, their total understated: the upstream charges the clips it fetches (the simulator's:
    // 10 s each), not the total a caller states
    const body = {
      model: "vidu-q2-reference-to-video",
      prompt: "the two clips, blended",
      duration: "5s",
      resolution: "720p",
      reference_image_urls: ["https://example.com/a.png"],
      reference_video_urls: ["https://example.com/a.mp4", "https://example.com/b.mp4"],
      reference_video_total_duration: 4,
    };
    // 5 s × 0.05 DIEM + 60 s of reference (two clips at their 30 s most) × 0.05, + 5 % markup
    const quote = await postWithKey(world.app, buyer.apiKey, "/v1/video/quote", body);
    expect(quote.status, JSON.stringify(quote.body)).toBe(200);
    expect((quote.body as { quote_diem: string }).quote_diem).toBe("3.412500");
    const queued = await queue(buyer.apiKey, body);
    expect(queued.status, JSON.stringify(queued.body)).toBe(200);
    // the upstream charged 5 s + 20 s of fetched clips; the job the offer sold covers it
    expect(simVideoBurn(world.sim, key.secret).chargedMicro).toBe(1_250_000n);
    expect(10_000_000n - (await offerRemaining(key.offerId))).toBe(3_412_500n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("503 insufficient_routable_at_price when no single offer holds the whole job", async () => {
    // 0.5 + 0.5 DIEM is more than the 0.63 job, but no one offer holds it
    await addSupply(world.app, world.sim, [
      { priceCents: 40, quantityMicroDiem: 500_000n },
      { priceCents: 45, quantityMicroDiem: 500_000n },
    ]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const r = await queue(buyer.apiKey);
    expect([r.status, r.body.error?.code]).toEqual([503, "insufficient_routable_at_price"]);
    expect(r.headers.get("x-svc-support-reference")).toMatch(/^[0-9a-f-]{36}$/);
    expect((r.body.error as { supportReference?: string }).supportReference).toBe(
      r.headers.get("x-svc-support-reference"),
    );
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
  });

  test("a lost queue answer is never re-queued on another key: 502, nothing charged", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 30, quantityMicroDiem: 10_000_000n },
      { priceCents: 31, quantityMicroDiem: 10_000_000n },
    ]);
    world.app.rt.services.inference.invalidateBook();
    const [k1, k2] = supply.keys;
    if (!k1 || !k2) throw new Error("keys");
    world.sim.state.injectFault(k1.secret, { kind: "drop", route: "/video/queue", count: 1 });
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const r = await queue(buyer.apiKey);
    expect([r.status, r.body.error?.code]).toEqual([502, "upstream_error"]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    // the second key was never asked to queue
    expect(simVideoBurn(world.sim, k2.secret).jobs).toBe(0);
    const ref = r.headers.get("x-svc-support-reference");
    const rec = await world.app.rt.db.inferenceRequest.findFirstOrThrow({ where: { id: ref ?? "" } });
    expect([rec.status, rec.errorCode, rec.attemptCount]).toEqual(["failed", "upstream_answer_lost", 1]);
    // an upstream 5xx is an answer: that falls forward to the next key, charged once
    world.sim.state.injectFault(k1.secret, { kind: "http_500", route: "/video/queue", count: 1 });
    const ok = await queue(buyer.apiKey);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(simVideoBurn(world.sim, k2.secret).jobs).toBe(1);
    expect(ok.headers.get("x-svc-clearing-price-cents")).toBe("31");
    await assertBooksBalance(world.app.rt.db);
  });

  test("a buyer gone before the queue call is made does not cut it: the job is queued, charged once, kept", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
    const supply = await market(40);
    const key = supply.keys[0];
    if (!key) throw new Error("no key");
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const { rt } = world.app;
    const endpoint = new InferenceEndpoint(
      rt.services.inference,
      rt.upstream,
      videoQueueModality({ quotes: rt.services.videoQuotes, markupBps: rt.config.fees.videoMarkupBps }),
    );
    // the buyer's signal has already fired: a chat would end `closed`, uncharged
    const gone = new AbortController();
    gone.abort();
    const apiKeyId = (await rt.db.apiKey.findFirstOrThrow({ where: { accountId: buyer.accountId } })).id;
    const out = await endpoint.serve({ accountId: buyer.accountId, apiKeyId }, parseVideoRequest(JOB), {
      signal: gone.signal,
    });
    expect(out.body.quoteMicroDiem).toBe(JOB_DIEM);
    expect(simVideoBurn(world.sim, key.secret).jobs).toBe(1);
    const job = await rt.db.videoJob.findUniqueOrThrow({ where: { queueId: out.body.queueId } });
    expect([job.quoteMicroDiem, job.upstreamQuoteMicroDiem, job.chargeMicroUsdc]).toEqual([
      JOB_DIEM,
      UPSTREAM_QUOTE,
      out.cost.costMicroUsdc,
    ]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n - out.cost.costMicroUsdc);
    await assertBooksBalance(rt.db);
  });
});

describe("refunds", () => {
  test.each([
    ["failed", "provider_failed"],
    ["content_policy", "content_policy"],
  ] as const)(
    "a %s job is refunded at once, exactly once, and its offer gets its DIEM back",
    async (outcome, reason) => {
      world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
      const supply = await market(40);
      const key = supply.keys[0];
      if (!key) throw new Error("no key");
      const buyer = await fundedBuyerKey(world.app, 1_000_000n);
      const queued = await queue(buyer.apiKey, { ...JOB, prompt: `a fox [[sim:video=${outcome}]]` });
      expect(queued.status).toBe(200);
      expect(await offerRemaining(key.offerId)).toBe(10_000_000n - JOB_DIEM);

      // the buyer's retrieves and three pollers at once: one refund
      const jobs = world.app.rt.services.videoJobs;
      const results = await Promise.all([
        rawRetrieve(buyer.apiKey, queued.body.queue_id),
        rawRetrieve(buyer.apiKey, queued.body.queue_id),
        jobs.pollDue(),
        jobs.pollDue(),
        jobs.sweep(),
      ]);
      const statuses = results.slice(0, 2).map((r) => (r as { status: number }).status);
      expect(statuses.every((s) => s === 200 || s === 410)).toBe(true);
      const job = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId: queued.body.queue_id } });
      expect([job.status, job.failureReason, job.upstreamRefunded]).toEqual(["refunded", reason, true]);
      const journals = await world.app.rt.db.ledgerTransaction.count({
        where: { kind: "refund", clearId: { not: null } },
      });
      const clear = await world.app.rt.db.clear.findFirstOrThrow({ where: { requestId: job.requestId } });
      const mine = await world.app.rt.db.ledgerTransaction.count({ where: { kind: "refund", clearId: clear.id } });
      expect(mine).toBe(1);
      expect(journals).toBeGreaterThanOrEqual(1);
      // everyone whole: buyer, supplier, offer; the upstream refunded the key too
      expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
      expect(await payableOf(world.app, supply.supplierAccountId)).toBe(0n);
      expect(await offerRemaining(key.offerId)).toBe(10_000_000n);
      expect(simVideoBurn(world.sim, key.secret)).toMatchObject({
        chargedMicro: UPSTREAM_QUOTE,
        refundedMicro: UPSTREAM_QUOTE,
        netMicro: 0n,
      });
      // later: a retried sweep changes nothing; retrieve is 410
      await jobs.sweep();
      expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
      const after = await rawRetrieve(buyer.apiKey, queued.body.queue_id);
      expect(after.status).toBe(410);
      await assertBooksBalance(world.app.rt.db);
    },
  );

  test("a poller that died after seeing the failure: the next sweep refunds (once)", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
    const supply = await market(40);
    const key = supply.keys[0];
    if (!key) throw new Error("no key");
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const queued = await queue(buyer.apiKey, { ...JOB, prompt: "a fox [[sim:video=failed]]" });
    const job = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId: queued.body.queue_id } });
    // the "crashed" poller: asked the upstream (which refunded its key) and died before its refund committed
    const seen = await fetch(`${world.sim.baseUrl}/video/retrieve`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
      body: JSON.stringify({ model: job.model, queue_id: job.upstreamQueueId }),
    });
    expect(((await seen.json()) as { status: string }).status).toBe("failed");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(748_000n);
    const sweeps = await Promise.all([
      world.app.rt.services.videoJobs.sweep(),
      world.app.rt.services.videoJobs.sweep(),
    ]);
    expect(sweeps.reduce((a, s) => a + s.refunded, 0)).toBe(1);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    expect(simVideoBurn(world.sim, key.secret).netMicro).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("finished without media: COMPLETED JSON, refunded automatically when due (within 6 h), offer DIEM kept", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
    const supply = await market(40);
    const key = supply.keys[0];
    if (!key) throw new Error("no key");
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const queued = await queue(buyer.apiKey, { ...JOB, prompt: "a fox [[sim:video=completed_no_media]]" });
    const r = await rawRetrieve(buyer.apiKey, queued.body.queue_id);
    expect([r.status, r.json?.status, r.json?.state, r.json?.media]).toEqual([
      200,
      "COMPLETED",
      "completed_no_media",
      false,
    ]);
    const job = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId: queued.body.queue_id } });
    expect(job.refundDueAt).not.toBeNull();
    expect((job.refundDueAt?.getTime() ?? 0) - (job.completedAt?.getTime() ?? 0)).toBeLessThanOrEqual(6 * 3600_000);
    // not due yet: nothing refunded
    await world.app.rt.services.videoJobs.sweep();
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(748_000n);
    // later than the due time
    offsetMs += 2 * 3600_000;
    try {
      const [a, b] = await Promise.all([
        world.app.rt.services.videoJobs.sweep(),
        world.app.rt.services.videoJobs.refundDue(),
      ]);
      expect(a.refunded + b.refunded).toBe(1);
    } finally {
      offsetMs -= 2 * 3600_000;
    }
    const done = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { id: job.id } });
    expect([done.status, done.failureReason, done.upstreamRefunded]).toEqual([
      "refunded",
      "completed_without_media",
      false,
    ]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    // the upstream kept its charge: the offer does not get the DIEM back
    expect(await offerRemaining(key.offerId)).toBe(10_000_000n - JOB_DIEM);
    expect(simVideoBurn(world.sim, key.secret).netMicro).toBe(UPSTREAM_QUOTE);
    expect((await rawRetrieve(buyer.apiKey, queued.body.queue_id)).status).toBe(410);
    await assertBooksBalance(world.app.rt.db);
  });

  test("jobs never delivered expire: a finished one as it is, one never finished is refunded", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
    await market(40);
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const finished = await queue(buyer.apiKey);
    world.sim.state.setVideoConfig({ processingPolls: 100_000, renderMs: 0, defaultOutcome: "mp4" });
    const stuck = await queue(buyer.apiKey);
    // the worker sees the first one's media ready (and leaves it for its buyer)
    await world.app.rt.services.videoJobs.pollDue();
    const f = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId: finished.body.queue_id } });
    expect([f.status, f.completedAt !== null]).toEqual(["rendering", true]);
    offsetMs += 25 * 3600_000;
    try {
      const r = await world.app.rt.services.videoJobs.expireStale();
      expect(r).toEqual({ expired: 1, refunded: 1 });
      expect(await world.app.rt.services.videoJobs.expireStale()).toEqual({ expired: 0, refunded: 0 });
    } finally {
      offsetMs -= 25 * 3600_000;
    }
    expect((await rawRetrieve(buyer.apiKey, finished.body.queue_id)).status).toBe(410);
    expect((await rawRetrieve(buyer.apiKey, stuck.body.queue_id)).status).toBe(410);
    // one charge kept (the finished render), one refunded
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(748_000n);
    await assertBooksBalance(world.app.rt.db);
  });
});
