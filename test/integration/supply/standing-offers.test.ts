import { QueueEvents } from "bullmq";
import { afterAll, beforeAll, beforeEach, describe, expect } from "vitest";
import { createRedis } from "../../../src/adapters/redis/client.js";
import type { RepostRun } from "../../../src/domain/supply/standing-offers.js";
import { type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import { movableClock, type TestApp } from "../../../testkit/harness.js";
import {
  deleteKey,
  deleteOffer,
  msPastNextMidnight,
  myOffers,
  type OfferBody,
  patchOffer,
  pinToHour,
  postOfferCall,
  registerKey,
  sellOut,
  simKey,
} from "../../../testkit/supply.js";
import { startReceiver } from "../../../testkit/webhooks.js";
import { startAppBeside } from "../../../testkit/world.js";
import { startWorkers } from "../../../workers/index.js";

/**
 * Standing offers (issue 30): re-posted at UTC midnight exactly once, whatever runs at once (the
 * midnight job in two worker processes, a supplier's PATCH or POST). The apps, the simulator (whose
 * key balances reset at its midnight) and the test share one movable clock.
 */
const clock = movableClock();
beforeAll(() => {
  pinToHour(clock, 22);
});
test.override("appOptions", { catalogSyncKey: false, clock, workers: true, sim: { now: () => clock.now() } });
const world = fileWorld(test);

/** A second process of the deployment, running the workers too. */
let second: TestApp;
beforeAll(async () => {
  second = await startAppBeside(world.app, { workers: true, clock });
});
afterAll(async () => {
  await second?.close();
});

// every test starts at 22:00 UTC of a day after the last test's, with no offer of an earlier test standing
beforeEach(async () => {
  pinToHour(clock, 22);
  await world.app.rt.db.offer.updateMany({ data: { repostDaily: false } });
});

const SCHEDULE = [
  { fromUtc: "20:00", priceCentsPerDollar: 45 },
  { fromUtc: "23:00", priceCentsPerDollar: 30 },
];

interface Standing {
  user: SignedInUser;
  keyId: string;
  secret: string;
  offer: OfferBody;
}

/** A supplier whose key holds `diemMicro` (reset to that at each upstream midnight) and a standing offer. */
async function standing(
  body: Record<string, unknown> = {},
  diemMicro = 40_000_000n,
  user?: SignedInUser,
): Promise<Standing> {
  const u = user ?? (await signIn(world.app));
  const secret = simKey(world.sim, diemMicro);
  const key = await registerKey(world.app, u, secret);
  const res = await postOfferCall(world.app, u, {
    upstreamKeyId: key.id,
    priceCentsPerDollar: 55,
    quantityDiem: "10.000000",
    repostDaily: true,
    ...body,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { user: u, keyId: key.id, secret, offer: res.body as OfferBody };
}

function pastMidnight(extraMs = 30_000): void {
  clock.advance(msPastNextMidnight(clock.now(), extraMs));
}

/** The offers on a key, oldest first. */
function offersOn(keyId: string) {
  return world.app.rt.db.offer.findMany({ where: { upstreamKeyId: keyId }, orderBy: { createdAt: "asc" } });
}

async function liveOn(keyId: string): Promise<number> {
  return world.app.rt.db.offer.count({ where: { upstreamKeyId: keyId, status: { in: ["active", "paused"] } } });
}

/** Runs `name` on the expiry queue `n` times at once; the workers of both processes take them. */
async function runJobs(name: string, n: number): Promise<unknown[]> {
  const connection = createRedis(world.app.rt.config.redis.url, "worker");
  const events = new QueueEvents("expiry", { connection, prefix: world.app.rt.keys.bullPrefix() });
  await events.waitUntilReady();
  try {
    const jobs = await Promise.all(Array.from({ length: n }, () => world.app.rt.queues.expiry.add(name, {})));
    return await Promise.all(jobs.map((j) => j.waitUntilFinished(events, 20_000)));
  } finally {
    await events.close();
    connection.disconnect();
  }
}

const sum = (runs: RepostRun[], k: keyof RepostRun) => runs.reduce((a, r) => a + r[k], 0);

describe("standing offers at UTC midnight", () => {
  test("re-posted exactly once with two worker processes running: same price, schedule and settings, quantity = the fresh balance capped", async () => {
    const capped = await standing({ schedule: SCHEDULE, dailyQuantityDiem: "25.000000" }, 40_000_000n);
    const whole = await standing({}, 12_000_000n);
    // spent before midnight: the upstream resets the key's balance at its midnight
    world.sim.state.setBalance(whole.secret, { diemMicro: 1_000_000n });
    await world.app.rt.services.supply.syncKeyBalances();
    expect(capped.offer).toMatchObject({
      repostDaily: true,
      dailyQuantityDiem: "25.000000",
      schedule: SCHEDULE,
      priceCentsPerDollar: 55,
      effectivePriceCentsPerDollar: 45, // 22:00: the 20:00 step
      repostedFromId: null,
    });
    // the supplier hears of the repost and of the schedule's steps (webhooks, issue 30)
    const receiver = await startReceiver();
    await world.app.rt.services.webhooks.register({
      accountId: capped.user.accountId,
      credential: "session",
      url: receiver.url,
      events: ["offer.reposted", "offer.price_stepped"],
    });
    // before midnight nothing is due
    expect((await world.app.rt.services.standing.repostDue()).reposted).toBe(0);

    pastMidnight();
    const [jobRuns, direct] = await Promise.all([
      runJobs("repost-offers", 4),
      Promise.all([
        ...Array.from({ length: 3 }, () => world.app.rt.services.standing.repostDue()),
        ...Array.from({ length: 3 }, () => second.rt.services.standing.repostDue()),
      ]),
    ]);
    const runs = [...(jobRuns as RepostRun[]), ...direct];
    expect(sum(runs, "reposted")).toBe(2);

    for (const s of [capped, whole]) {
      const rows = await offersOn(s.keyId);
      expect(rows.map((o) => o.status)).toEqual(["expired", "active"]);
      expect(rows[1]?.repostedFromId).toBe(s.offer.id);
      expect(await liveOn(s.keyId)).toBe(1);
    }
    const [fresh] = await myOffers(world.app, capped.user);
    const now = clock.now();
    expect(fresh).toMatchObject({
      status: "active",
      priceCentsPerDollar: 55,
      effectivePriceCentsPerDollar: 55, // 00:00: before the first step
      schedule: SCHEDULE,
      repostDaily: true,
      dailyQuantityDiem: "25.000000",
      quantityDiem: "25.000000", // the key's 40 DIEM, capped
      remainingDiem: "25.000000",
      repostedFromId: capped.offer.id,
      expiresAt: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1)).toISOString(),
    });
    // one offer.reposted, written with the repost, whichever of the racing runs posted it
    const reposted = await receiver.waitFor((h) => h.json.type === "offer.reposted");
    expect(reposted.json.data).toMatchObject({
      id: fresh?.id,
      repostedFromId: capped.offer.id,
      quantityDiem: "25.000000",
      effectivePriceCentsPerDollar: 55,
    });
    // the day's first step (20:00) announced once, whichever process's job ran it
    await Promise.all([
      world.app.rt.services.standing.announcePriceSteps(),
      second.rt.services.standing.announcePriceSteps(),
    ]);
    const today = clock.now();
    clock.advance(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate(), 20, 1) - today.getTime());
    await Promise.all([
      world.app.rt.services.standing.announcePriceSteps(),
      second.rt.services.standing.announcePriceSteps(),
    ]);
    const stepped = await receiver.waitFor(
      (h) => h.json.type === "offer.price_stepped" && h.json.data.effectivePriceCentsPerDollar === 45,
    );
    expect(stepped.json.data).toMatchObject({ id: fresh?.id });
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.all((h) => h.json.type === "offer.reposted")).toHaveLength(1);
    expect(
      receiver.all((h) => h.json.type === "offer.price_stepped" && h.json.data.effectivePriceCentsPerDollar === 45),
    ).toHaveLength(1);
    await receiver.close();
    // the key's balance was read from the upstream after midnight (the sync had not run yet)
    expect((await myOffers(world.app, whole.user))[0]).toMatchObject({ quantityDiem: "12.000000", status: "active" });

    // later runs find nothing; the next midnight posts it again, once
    expect(await second.rt.services.standing.repostDue()).toEqual({ reposted: 0, waiting: 0, raced: 0 });
    pinToHour(clock, 0);
    clock.advance(60_000);
    const next = await Promise.all([
      world.app.rt.services.standing.repostDue(),
      second.rt.services.standing.repostDue(),
    ]);
    expect(sum(next, "reposted")).toBe(2);
    expect((await offersOn(capped.keyId)).map((o) => o.status)).toEqual(["expired", "expired", "active"]);
  });

  test("races: the job in two processes, the supplier's PATCH of the old offer and a POST on the key leave one live offer per key", async () => {
    const suppliers = await Promise.all(Array.from({ length: 6 }, () => standing({ schedule: SCHEDULE })));
    pastMidnight(5_000);
    const outcomes = await Promise.all([
      ...Array.from({ length: 2 }, () => world.app.rt.services.standing.repostDue()),
      ...Array.from({ length: 2 }, () => second.rt.services.standing.repostDue()),
      ...suppliers.map((s) => patchOffer(world.app, s.user, s.offer.id, { priceCentsPerDollar: 20 })),
      ...suppliers.map((s) =>
        postOfferCall(second, s.user, { upstreamKeyId: s.keyId, priceCentsPerDollar: 60, quantityDiem: "1.000000" }),
      ),
    ]);
    const patches = outcomes.slice(4, 10) as Awaited<ReturnType<typeof patchOffer>>[];
    const posts = outcomes.slice(10) as Awaited<ReturnType<typeof postOfferCall>>[];
    // past its midnight the old offer cannot change
    for (const p of patches) expectError(p, 409, "conflict");
    for (const [i, s] of suppliers.entries()) {
      expect(await liveOn(s.keyId), `key ${i}`).toBe(1);
      const rows = await offersOn(s.keyId);
      const reposts = rows.filter((o) => o.repostedFromId === s.offer.id);
      const post = posts[i];
      if (post?.status === 201) {
        // the supplier's own offer won the slot: no repost, and it supersedes the standing one
        expect(reposts).toHaveLength(0);
      } else {
        expectError(post as Awaited<ReturnType<typeof postOfferCall>>, 409, "conflict");
        expect(reposts).toHaveLength(1);
        expect(reposts[0]).toMatchObject({ priceCentsPerDollar: 55, status: "active" });
      }
      // the old offer kept its price
      expect(rows[0]?.priceCentsPerDollar).toBe(55);
    }
    // a PATCH of the new offer racing more runs: it changes, nothing is posted twice
    const s0 = suppliers[0] as Standing;
    const live = (await offersOn(s0.keyId)).find((o) => o.status === "active");
    const [patched] = await Promise.all([
      patchOffer(world.app, s0.user, live?.id ?? "", { schedule: null, dailyQuantityDiem: "3.000000" }),
      world.app.rt.services.standing.repostDue(),
      second.rt.services.standing.repostDue(),
    ]);
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ schedule: null, dailyQuantityDiem: "3.000000" });
    expect(await liveOn(s0.keyId)).toBe(1);
    expect((await offersOn(s0.keyId)).length).toBeLessThanOrEqual(2);
  });

  test("pausing, cancelling and revoking stop it; a sold-out one is re-posted unless its repostDaily was turned off", async () => {
    const paused = await standing();
    expect((await patchOffer(world.app, paused.user, paused.offer.id, { status: "paused" })).status).toBe(200);
    const cancelled = await standing();
    expect((await deleteOffer(world.app, cancelled.user, cancelled.offer.id)).status).toBe(200);
    const revoked = await standing();
    expect((await deleteKey(world.app, revoked.user, revoked.keyId)).status).toBe(200);
    const soldOut = await standing();
    await sellOut(world.app, soldOut.offer.id);
    expect(await world.app.rt.services.offers.markDepletedIfEmpty(soldOut.offer.id)).toBe(true);
    const stopped = await standing();
    await sellOut(world.app, stopped.offer.id);
    await world.app.rt.services.offers.markDepletedIfEmpty(stopped.offer.id);
    // a depleted offer still takes its standing settings (what tomorrow's repost would carry), not a price
    const off = await patchOffer(world.app, stopped.user, stopped.offer.id, { repostDaily: false });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect(off.body).toMatchObject({ status: "depleted", repostDaily: false });
    expectError(
      await patchOffer(world.app, stopped.user, stopped.offer.id, { priceCentsPerDollar: 40 }),
      409,
      "conflict",
    );
    const plain = await standing({ repostDaily: false });

    pastMidnight();
    const run = await world.app.rt.services.standing.repostDue();
    expect(run.reposted).toBe(1);
    expect((await offersOn(soldOut.keyId)).map((o) => o.status)).toEqual(["expired", "active"]);
    for (const s of [paused, cancelled, revoked, stopped, plain]) {
      expect((await offersOn(s.keyId)).length).toBe(1);
    }
    // the paused one's expired record no longer stands
    const pausedRow = (await offersOn(paused.keyId))[0];
    expect(pausedRow).toMatchObject({ status: "expired", repostDaily: false });
    expect((await offersOn(cancelled.keyId))[0]?.status).toBe("cancelled");
    expect((await offersOn(revoked.keyId))[0]?.status).toBe("cancelled");
  });

  test("a key whose balance is not known since midnight waits: upstream down, 0 DIEM, auth refused; a later run posts it", async () => {
    const down = await standing();
    const empty = await standing({}, 5_000_000n);
    const refused = await standing();
    pastMidnight();
    world.sim.state.injectFault(down.secret, { kind: "http_503", route: "/api_keys/rate_limits", count: 1 });
    world.sim.state.setBalance(empty.secret, { diemMicro: 0n, allocationMicro: 0n });
    world.sim.state.revokeKey(refused.secret);

    const first = await world.app.rt.services.standing.repostDue();
    expect(first).toMatchObject({ reposted: 0, waiting: 3 });
    expect(await liveOn(down.keyId)).toBe(0);
    expect(await liveOn(empty.keyId)).toBe(0);
    // the upstream refused the key: auth_failed, not a candidate until it authenticates again
    expect((await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: refused.keyId } })).status).toBe(
      "auth_failed",
    );

    // a key read with 0 DIEM is not asked again by the job (the balance sync reads it)
    const asked = world.sim.state.listRequests({ key: empty.secret, route: "/api_keys/rate_limits" }).length;
    const second = await world.app.rt.services.standing.repostDue();
    expect(second).toMatchObject({ reposted: 1, waiting: 1 });
    expect(world.sim.state.listRequests({ key: empty.secret, route: "/api_keys/rate_limits" }).length).toBe(asked);
    expect((await myOffers(world.app, down.user))[0]).toMatchObject({ status: "active", quantityDiem: "40.000000" });

    world.sim.state.setBalance(empty.secret, { diemMicro: 7_000_000n });
    world.sim.state.revokeKey(refused.secret, false);
    await world.app.rt.services.supply.syncKeyBalances();
    const third = await world.app.rt.services.standing.repostDue();
    expect(third).toMatchObject({ reposted: 2, waiting: 0 });
    expect((await myOffers(world.app, empty.user))[0]).toMatchObject({ status: "active", quantityDiem: "7.000000" });
    expect(await liveOn(refused.keyId)).toBe(1);
  });

  test("an offer that could not be posted again for a week stops standing", async () => {
    const s = await standing();
    pastMidnight();
    world.sim.state.revokeKey(s.secret);
    expect((await world.app.rt.services.standing.repostDue()).reposted).toBe(0);
    // six days later the key authenticates again: the offer is still standing
    clock.advance(6 * 86_400_000);
    world.sim.state.revokeKey(s.secret, false);
    await world.app.rt.services.supply.syncKeyBalances();
    expect((await world.app.rt.services.standing.repostDue()).reposted).toBe(1);
    expect(await liveOn(s.keyId)).toBe(1);

    const late = await standing();
    pastMidnight();
    world.sim.state.revokeKey(late.secret);
    await world.app.rt.services.standing.repostDue();
    // eight days later it does: too late
    clock.advance(8 * 86_400_000);
    world.sim.state.revokeKey(late.secret, false);
    await world.app.rt.services.supply.syncKeyBalances();
    await world.app.rt.services.standing.repostDue();
    expect(await liveOn(late.keyId)).toBe(0);
  });

  test("a worker process started after midnight catches up at once", async () => {
    const s = await standing();
    pastMidnight();
    // what the test means: the run a starting process queues once its workers are ready reposts the
    // offer. It waits on that run itself (its job, whichever process takes it), not on a wall clock
    // from before the process was ready: starting a process on a loaded machine is not the subject.
    const workers = await startWorkers(second.rt);
    const connection = createRedis(world.app.rt.config.redis.url, "worker");
    const events = new QueueEvents("expiry", { connection, prefix: world.app.rt.keys.bullPrefix() });
    try {
      await events.waitUntilReady();
      const catchUp = workers.catchUp.find((j) => j.name === "repost-offers");
      expect(catchUp).toBeDefined();
      const run = (await catchUp?.waitUntilFinished(events, 120_000)) as RepostRun;
      // on a failure, say what the run did and what the key's offers looked like
      const offers = await world.app.rt.db.offer.findMany({
        where: { upstreamKeyId: s.keyId },
        select: { status: true, expiresAt: true, repostedFromId: true, createdAt: true },
      });
      const why = JSON.stringify({ now: clock.now(), run, offers });
      // this run, or one that ran at the same instant (the scheduler's first run), reposted it: once
      expect(await liveOn(s.keyId), why).toBe(1);
      expect(
        offers.filter((o) => o.repostedFromId !== null),
        why,
      ).toHaveLength(1);
    } finally {
      await events.close();
      connection.disconnect();
      await workers.close();
    }
  });
});
