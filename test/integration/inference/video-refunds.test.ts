// Video refunds under stress (issue 16): exactly one refund across two API processes racing
// sweeps, polls and buyer retrieves; a refund transaction that dies before its commit leaves
// nothing behind and the next sweep refunds once (failed and finished-without-media paths); one
// job whose refund keeps failing holds up no other; the BullMQ `video` worker refunds on its own
// (a deterministic job id runs once; the scheduler's ticks refund once); the supplier's share comes
// off its held balance (never payable before the job is final, so a payout cannot have taken it) and
// the platform gives back only its fee; a refund on a cancelled offer gives no DIEM back to it. Against real Postgres and Redis and the upstream simulator.
import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect } from "vitest";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import type { TestApp } from "../../../testkit/harness.js";
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

/** A clock tests can move forward (both apps' and the simulator's). */
let offsetMs = 0;
const clock = { now: () => new Date(Date.now() + offsetMs) };

// `app` runs the BullMQ workers (without schedules: a test adds the jobs); `peer` is a second API
// process of the same deployment (same database, Redis prefix and clock)
test.override("appOptions", {
  syncCatalog: true,
  clock,
  sim: { now: () => clock.now() },
  peer: true,
  workers: true,
});
const world = fileWorld(test);

// wan-2.6 at 720p with audio: 5 s × (0.10 + 0.02) DIEM = 0.6 DIEM upstream; + 5% markup = 0.63;
// at 40 cents that is 0.252 USDC: 0.2268 to the supplier, 0.0252 platform fee (10%)
const JOB = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };
const UPSTREAM_QUOTE = 600_000n;
const JOB_DIEM = 630_000n;
const OFFER_DIEM = 10_000_000n;
const FUNDED = 1_000_000n;
const GROSS = 252_000n;
const SHARE = 226_800n;
const AFTER_CHARGE = FUNDED - GROSS;

const TRIGGER = "test_video_refund_crash";

beforeEach(async () => {
  // each test starts from an empty market and no live job of another test
  await emptyBook(world.app, { peers: [world.peer] });
  await expireLiveVideoJobs(world.app);
  world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
});

afterEach(async () => {
  offsetMs = 0;
  await world.app.rt.db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS ${TRIGGER} ON ledger_transactions`);
});

/**
 * The crash: every refund journal (or only those of `clearIds`) fails to insert, so the refund's
 * transaction rolls back after the job was claimed and the offer and key were credited in it.
 * Returns the undo.
 */
async function failRefundJournals(clearIds?: string[]): Promise<() => Promise<void>> {
  const db = world.app.rt.db;
  await db.$executeRawUnsafe(
    `CREATE OR REPLACE FUNCTION ${TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'simulated crash before the refund commits'; END $$`,
  );
  const only = clearIds ? ` AND NEW.clear_id IN (${clearIds.map((id) => `'${id}'::uuid`).join(", ")})` : "";
  await db.$executeRawUnsafe(
    `CREATE TRIGGER ${TRIGGER} BEFORE INSERT ON ledger_transactions FOR EACH ROW
       WHEN (NEW.kind = 'refund'${only}) EXECUTE FUNCTION ${TRIGGER}()`,
  );
  return async () => {
    await db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS ${TRIGGER} ON ledger_transactions`);
  };
}

/** One supplier with one key and one offer of OFFER_DIEM at 40 cents. */
async function market() {
  const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: OFFER_DIEM }]);
  world.app.rt.services.inference.invalidateBook();
  world.peer.rt.services.inference.invalidateBook();
  const key = supply.keys[0];
  if (!key) throw new Error("no key");
  return { supply, key };
}

async function queue(apiKey: string, prompt: string) {
  const r = await call(world.app, {
    method: "POST",
    path: "/v1/video/queue",
    headers: { authorization: `Bearer ${apiKey}` },
    body: { ...JOB, prompt },
  });
  const body = r.body as { queue_id: string };
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const job = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId: body.queue_id } });
  const clear = await world.app.rt.db.clear.findFirstOrThrow({ where: { requestId: job.requestId } });
  return { queueId: body.queue_id, job, clear };
}

/** POST /v1/video/retrieve on one of the two processes. */
async function retrieve(app: TestApp, apiKey: string, queueId: string) {
  const res = await fetch(`${app.baseUrl}/v1/video/retrieve`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ queue_id: queueId }),
  });
  const json = (await res.json()) as Record<string, unknown> & { error?: { code: string } };
  return { status: res.status, json };
}

function jobById(id: string) {
  return world.app.rt.db.videoJob.findUniqueOrThrow({ where: { id } });
}

async function offerOf(offerId: string) {
  return world.app.rt.db.offer.findUniqueOrThrow({ where: { id: offerId } });
}

async function keyBalanceOf(upstreamKeyId: string) {
  return (await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: upstreamKeyId } })).lastBalanceMicroDiem;
}

/** The refund journals of one clear, with their postings by book. */
async function refundJournals(clearId: string) {
  const rows = await world.app.rt.db.ledgerTransaction.findMany({
    where: { kind: "refund", clearId },
    include: { entries: true },
  });
  return rows.map((r) => ({
    idempotencyKey: r.idempotencyKey,
    postings: Object.fromEntries(r.entries.map((e) => [e.book, e.amountMicroUsdc])),
  }));
}

/** Everything a refund moves, for "nothing changed" checks. */
async function moneyState(o: {
  jobId: string;
  clearId: string;
  buyerId: string;
  supplierId: string;
  offerId: string;
  upstreamKeyId: string;
}) {
  const db = world.app.rt.db;
  const job = await jobById(o.jobId);
  const clear = await db.clear.findFirstOrThrow({ where: { id: o.clearId } });
  const offer = await offerOf(o.offerId);
  return {
    job: [job.status, job.refundedAt, job.failureReason, job.upstreamRefunded],
    clearRefundedAt: clear.refundedAt,
    buyer: await confirmedOf(world.app, o.buyerId),
    supplier: [await payableOf(world.app, o.supplierId), await heldOf(world.app, o.supplierId)],
    offer: [offer.status, offer.remainingMicroDiem],
    key: await keyBalanceOf(o.upstreamKeyId),
    journals: await db.ledgerTransaction.count(),
    // every ledger line: the written entries and the lines the clears imply (function ledger_lines)
    lines: (
      await db.$queryRaw<{ n: bigint; total: bigint }[]>`
      SELECT count(*)::bigint AS n, COALESCE(SUM(abs(amount_micro_usdc)), 0)::bigint AS total FROM ledger_lines()`
    )[0],
  };
}

describe("exactly once across two API processes", () => {
  test.each([
    ["failed", "provider_failed"],
    ["content_policy", "content_policy"],
  ] as const)(
    "a %s job: 10 concurrent sweeps, polls and retrieves on app and peer refund it once",
    async (outcome, reason) => {
      const { supply, key } = await market();
      const buyer = await fundedBuyerKey(world.app, FUNDED);
      const { queueId, job, clear } = await queue(buyer.apiKey, `a fox [[sim:video=${outcome}]]`);
      // charged up front everywhere; the supplier's share on hold until the job is final
      expect(await confirmedOf(world.app, buyer.accountId)).toBe(AFTER_CHARGE);
      expect([
        await payableOf(world.app, supply.supplierAccountId),
        await heldOf(world.app, supply.supplierAccountId),
      ]).toEqual([0n, SHARE]);
      expect((await offerOf(key.offerId)).remainingMicroDiem).toBe(OFFER_DIEM - JOB_DIEM);
      const keyAfterCharge = await keyBalanceOf(key.upstreamKeyId);

      const a = world.app.rt.services.videoJobs;
      const b = world.peer.rt.services.videoJobs;
      const [sweeps, retrieves] = await Promise.all([
        Promise.all([a.sweep(), b.sweep(), a.pollDue(), b.pollDue(), b.sweep(), a.sweep()]),
        Promise.all([
          retrieve(world.app, buyer.apiKey, queueId),
          retrieve(world.peer, buyer.apiKey, queueId),
          retrieve(world.peer, buyer.apiKey, queueId),
          retrieve(world.app, buyer.apiKey, queueId),
        ]),
      ]);
      // no worker call refunded more than the one job; every retrieve saw it refunded or gone
      expect(sweeps.reduce((n, s) => n + s.refunded, 0)).toBeLessThanOrEqual(1);
      for (const r of retrieves) {
        if (r.status === 200) expect([r.json.state, r.json.refunded]).toEqual(["refunded", true]);
        else expect([r.status, r.json.error?.code]).toEqual([410, "gone"]);
      }

      const done = await jobById(job.id);
      expect([done.status, done.failureReason, done.upstreamRefunded]).toEqual(["refunded", reason, true]);
      // one journal: the whole charge back to the buyer, the supplier's held credit and the fee reversed
      expect(await refundJournals(clear.id)).toEqual([
        {
          idempotencyKey: `refund:${clear.id}`,
          postings: { buyer_confirmed: GROSS, supplier_held: -SHARE, platform_fee: -(GROSS - SHARE) },
        },
      ]);
      expect(await confirmedOf(world.app, buyer.accountId)).toBe(FUNDED);
      expect([
        await payableOf(world.app, supply.supplierAccountId),
        await heldOf(world.app, supply.supplierAccountId),
      ]).toEqual([0n, 0n]);
      // the upstream refunded the key: the offer and the key's balance get the DIEM back, once
      expect((await offerOf(key.offerId)).remainingMicroDiem).toBe(OFFER_DIEM);
      expect(await keyBalanceOf(key.upstreamKeyId)).toBe((keyAfterCharge ?? 0n) + UPSTREAM_QUOTE);
      expect(simVideoBurn(world.sim, key.secret)).toMatchObject({
        chargedMicro: UPSTREAM_QUOTE,
        refundedMicro: UPSTREAM_QUOTE,
        netMicro: 0n,
      });

      // a second wave on both processes moves nothing
      const again = await Promise.all([a.sweep(), b.sweep(), retrieve(world.peer, buyer.apiKey, queueId)]);
      expect(again[0].refunded + again[1].refunded).toBe(0);
      expect(again[2].status).toBe(410);
      expect(await confirmedOf(world.app, buyer.accountId)).toBe(FUNDED);
      expect((await offerOf(key.offerId)).remainingMicroDiem).toBe(OFFER_DIEM);
      expect(await refundJournals(clear.id)).toHaveLength(1);
      await assertBooksBalance(world.app.rt.db);
    },
  );
});

describe("a crash inside the refund transaction", () => {
  test("failed job: the sweep's refund dies before its commit, nothing moves; the next sweep refunds once", async () => {
    const { supply, key } = await market();
    const buyer = await fundedBuyerKey(world.app, FUNDED);
    const { job, clear } = await queue(buyer.apiKey, "a fox [[sim:video=failed]]");
    const ids = {
      jobId: job.id,
      clearId: clear.id,
      buyerId: buyer.accountId,
      supplierId: supply.supplierAccountId,
      offerId: key.offerId,
      upstreamKeyId: key.upstreamKeyId,
    };
    const before = await moneyState(ids);
    expect(before.job).toEqual(["rendering", null, null, null]);

    const undo = await failRefundJournals();
    // the poller sees the failure (the upstream refunds its key now) and its refund rolls back: logged, not thrown
    const first = await world.app.rt.services.videoJobs.sweep();
    expect(first).toMatchObject({ polled: 1, refunded: 0 });
    expect(await moneyState(ids)).toEqual(before);
    expect(await refundJournals(clear.id)).toEqual([]);
    expect(simVideoBurn(world.sim, key.secret).netMicro).toBe(0n);
    await undo();

    // the job is polled again once its next poll is due (VIDEO_POLL_EVERY_MS after the claim)
    offsetMs += 11_000;
    const sweeps = await Promise.all([
      world.app.rt.services.videoJobs.sweep(),
      world.peer.rt.services.videoJobs.sweep(),
    ]);
    expect(sweeps.reduce((n, s) => n + s.refunded, 0)).toBe(1);
    const done = await jobById(job.id);
    expect([done.status, done.failureReason, done.upstreamRefunded]).toEqual(["refunded", "provider_failed", true]);
    expect(await refundJournals(clear.id)).toHaveLength(1);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(FUNDED);
    expect(await payableOf(world.app, supply.supplierAccountId)).toBe(0n);
    expect((await offerOf(key.offerId)).remainingMicroDiem).toBe(OFFER_DIEM);
    expect(await keyBalanceOf(key.upstreamKeyId)).toBe((before.key ?? 0n) + UPSTREAM_QUOTE);
    await assertBooksBalance(world.app.rt.db);
  });

  test("finished without media: the due refund dies before its commit, nothing moves; the next sweep refunds once", async () => {
    const { supply, key } = await market();
    const buyer = await fundedBuyerKey(world.app, FUNDED);
    const { queueId, job, clear } = await queue(buyer.apiKey, "a fox [[sim:video=completed_no_media]]");
    const seen = await retrieve(world.peer, buyer.apiKey, queueId);
    expect([seen.status, seen.json.state]).toEqual([200, "completed_no_media"]);
    const ids = {
      jobId: job.id,
      clearId: clear.id,
      buyerId: buyer.accountId,
      supplierId: supply.supplierAccountId,
      offerId: key.offerId,
      upstreamKeyId: key.upstreamKeyId,
    };
    const before = await moneyState(ids);
    expect(before.job).toEqual(["completed_no_media", null, null, null]);

    offsetMs += 2 * 3600_000; // past the refund's due time
    const undo = await failRefundJournals();
    // the refund rolls back: logged, not thrown out of the sweep, and nothing moved
    expect(await world.app.rt.services.videoJobs.sweep()).toMatchObject({ refunded: 0 });
    expect(await moneyState(ids)).toEqual(before);
    expect(await refundJournals(clear.id)).toEqual([]);
    await undo();

    const sweeps = await Promise.all([
      world.peer.rt.services.videoJobs.sweep(),
      world.app.rt.services.videoJobs.sweep(),
    ]);
    expect(sweeps.reduce((n, s) => n + s.refunded, 0)).toBe(1);
    const done = await jobById(job.id);
    expect([done.status, done.failureReason, done.upstreamRefunded]).toEqual([
      "refunded",
      "completed_without_media",
      false,
    ]);
    expect(await refundJournals(clear.id)).toHaveLength(1);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(FUNDED);
    expect(await payableOf(world.app, supply.supplierAccountId)).toBe(0n);
    // the upstream kept its charge: neither the offer nor the key gets DIEM back
    expect((await offerOf(key.offerId)).remainingMicroDiem).toBe(OFFER_DIEM - JOB_DIEM);
    expect(await keyBalanceOf(key.upstreamKeyId)).toBe(before.key);
    expect(simVideoBurn(world.sim, key.secret).netMicro).toBe(UPSTREAM_QUOTE);
    await assertBooksBalance(world.app.rt.db);
  });

  test("one job whose refund keeps failing holds up no other: due refunds and never-finished jobs alike", async () => {
    await market();
    const buyer = await fundedBuyerKey(world.app, 4n * GROSS);
    const noMedia = "a fox [[sim:video=completed_no_media]]";
    const stuck = "a fox [[sim:polls=9999]]";
    // queued in this order: the failing ones come first in any scan
    const badDue = await queue(buyer.apiKey, noMedia);
    const badStale = await queue(buyer.apiKey, stuck);
    const goodDue = await queue(buyer.apiKey, noMedia);
    const goodStale = await queue(buyer.apiKey, stuck);
    await world.app.rt.services.videoJobs.pollDue(); // both no-media finishes get their due time
    expect((await jobById(goodDue.job.id)).status).toBe("completed_no_media");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(0n);

    offsetMs += 25 * 3600_000; // every refund is due and the never-finished jobs are stale
    const undo = await failRefundJournals([badDue.clear.id, badStale.clear.id]);
    // both good jobs in ONE sweep, whatever order the failing ones are met in
    expect(await world.app.rt.services.videoJobs.sweep()).toMatchObject({ refunded: 2 });
    expect((await jobById(goodDue.job.id)).status).toBe("refunded");
    expect((await jobById(goodStale.job.id)).status).toBe("refunded");
    expect((await jobById(badDue.job.id)).status).toBe("completed_no_media");
    expect((await jobById(badStale.job.id)).status).toBe("rendering");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(2n * GROSS);
    await undo();

    // the failing ones are refunded by a later sweep, once
    await world.app.rt.services.videoJobs.sweep();
    expect((await jobById(badDue.job.id)).status).toBe("refunded");
    expect((await jobById(badStale.job.id)).status).toBe("refunded");
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(4n * GROSS);
    for (const j of [badDue, badStale, goodDue, goodStale]) expect(await refundJournals(j.clear.id)).toHaveLength(1);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("the BullMQ video worker", () => {
  test("a video-sweep job refunds a failed job with no buyer retrieve; the same job id added twice runs once", async () => {
    const { supply, key } = await market();
    const buyer = await fundedBuyerKey(world.app, FUNDED);
    const { job, clear } = await queue(buyer.apiKey, "a fox [[sim:video=failed]]");
    const q = world.app.rt.queues.video;
    const jobId = `video-sweep-${randomUUID()}`;
    const [first, second] = await Promise.all([
      q.add("video-sweep", {}, { jobId }),
      q.add("video-sweep", {}, { jobId }),
    ]);
    expect([first.id, second.id]).toEqual([jobId, jobId]);
    await expect.poll(async () => (await jobById(job.id)).status, { timeout: 15_000, interval: 100 }).toBe("refunded");
    await expect.poll(async () => q.getJobState(jobId), { timeout: 15_000, interval: 100 }).toBe("completed");
    const ran = await q.getJob(jobId);
    expect(ran?.returnvalue).toMatchObject({ polled: 1, refunded: 1 });
    expect(ran?.attemptsMade).toBe(1);
    // added again after it finished: the id is taken, nothing runs
    await q.add("video-sweep", {}, { jobId });
    expect(await q.getJobCounts("waiting", "active", "delayed")).toEqual({ waiting: 0, active: 0, delayed: 0 });
    expect((await q.getJob(jobId))?.finishedOn).toBe(ran?.finishedOn);

    const done = await jobById(job.id);
    expect([done.failureReason, done.upstreamRefunded]).toEqual(["provider_failed", true]);
    expect(await refundJournals(clear.id)).toHaveLength(1);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(FUNDED);
    expect(await payableOf(world.app, supply.supplierAccountId)).toBe(0n);
    expect((await offerOf(key.offerId)).remainingMicroDiem).toBe(OFFER_DIEM);
    await assertBooksBalance(world.app.rt.db);
  });

  test("the video-sweep scheduler (every 5 s) refunds a content-policy job, once over several ticks", async () => {
    const { supply, key } = await market();
    const buyer = await fundedBuyerKey(world.app, FUNDED);
    const { job, clear } = await queue(buyer.apiKey, "a fox [[sim:video=content_policy]]");
    const q = world.app.rt.queues.video;
    const completedBefore = (await q.getJobCounts("completed")).completed ?? 0;
    // the same scheduler workers/index.ts upserts on start (the test harness starts none)
    await q.upsertJobScheduler("video-sweep", { every: 5_000 }, { name: "video-sweep", data: {} });
    try {
      await expect
        .poll(async () => (await jobById(job.id)).status, { timeout: 15_000, interval: 100 })
        .toBe("refunded");
      // a later tick finds nothing more to do
      await expect
        .poll(async () => (await q.getJobCounts("completed")).completed ?? 0, { timeout: 15_000, interval: 200 })
        .toBeGreaterThanOrEqual(completedBefore + 2);
    } finally {
      await q.removeJobScheduler("video-sweep");
    }
    expect(await q.getJobCounts("failed")).toEqual({ failed: 0 });
    expect(await refundJournals(clear.id)).toHaveLength(1);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(FUNDED);
    expect(await payableOf(world.app, supply.supplierAccountId)).toBe(0n);
    expect((await offerOf(key.offerId)).remainingMicroDiem).toBe(OFFER_DIEM);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("who bears the refund", () => {
  test("a rendering job's share is held, not payable; its refund takes it off the hold, the platform gives back only its fee", async () => {
    const { supply, key } = await market();
    const buyer = await fundedBuyerKey(world.app, FUNDED);
    const { job, clear } = await queue(buyer.apiKey, "a fox [[sim:video=failed]]");
    expect([
      await payableOf(world.app, supply.supplierAccountId),
      await heldOf(world.app, supply.supplierAccountId),
    ]).toEqual([0n, SHARE]);
    const swept = await world.peer.rt.services.videoJobs.sweep();
    expect(swept.refunded).toBe(1);
    expect((await jobById(job.id)).status).toBe("refunded");
    // the buyer whole; the supplier's held share reversed; the platform gives back its fee, no more
    expect(await refundJournals(clear.id)).toEqual([
      {
        idempotencyKey: `refund:${clear.id}`,
        postings: { buyer_confirmed: GROSS, supplier_held: -SHARE, platform_fee: -(GROSS - SHARE) },
      },
    ]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(FUNDED);
    expect([
      await payableOf(world.app, supply.supplierAccountId),
      await heldOf(world.app, supply.supplierAccountId),
    ]).toEqual([0n, 0n]);
    expect((await offerOf(key.offerId)).remainingMicroDiem).toBe(OFFER_DIEM);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a content-policy job whose offer was cancelled meanwhile: refunded, the offer stays cancelled with no DIEM back", async () => {
    const { supply, key } = await market();
    const buyer = await fundedBuyerKey(world.app, FUNDED);
    const { queueId, job, clear } = await queue(buyer.apiKey, "a fox [[sim:video=content_policy]]");
    await world.app.rt.services.offers.cancelOffer({ accountId: supply.supplierAccountId, offerId: key.offerId });
    const cancelled = await offerOf(key.offerId);
    expect([cancelled.status, cancelled.remainingMicroDiem]).toEqual(["cancelled", OFFER_DIEM - JOB_DIEM]);
    // the supplier lists a new offer on the same key: the refund's DIEM is not its either
    const fresh = await world.app.rt.db.offer.create({
      data: {
        accountId: supply.supplierAccountId,
        upstreamKeyId: key.upstreamKeyId,
        priceCentsPerDollar: 45,
        quantityMicroDiem: 5_000_000n,
        remainingMicroDiem: 5_000_000n,
        expiresAt: cancelled.expiresAt,
      },
    });
    const keyBefore = await keyBalanceOf(key.upstreamKeyId);

    const r = await retrieve(world.peer, buyer.apiKey, queueId);
    expect([r.status, r.json.state, r.json.reason]).toEqual([200, "refunded", "content_policy"]);
    const done = await jobById(job.id);
    expect([done.status, done.upstreamRefunded]).toEqual(["refunded", true]);
    expect(await refundJournals(clear.id)).toHaveLength(1);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(FUNDED);
    expect(await payableOf(world.app, supply.supplierAccountId)).toBe(0n);
    const dead = await offerOf(key.offerId);
    expect([dead.status, dead.remainingMicroDiem, dead.endedAt]).toEqual([
      "cancelled",
      OFFER_DIEM - JOB_DIEM,
      cancelled.endedAt,
    ]);
    expect((await offerOf(fresh.id)).remainingMicroDiem).toBe(5_000_000n);
    // the upstream did refund the key itself
    expect(await keyBalanceOf(key.upstreamKeyId)).toBe((keyBefore ?? 0n) + UPSTREAM_QUOTE);
    expect(simVideoBurn(world.sim, key.secret).netMicro).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});
