// The service on a real Redis Cluster (issue 42 item 6; docs/decisions.md "Redis Cluster (issue 42)"):
// 3 masters + 3 replicas on loopback (testkit/redis-cluster.ts), two API processes and the workers on
// `REDIS_URL=redis+cluster://…`. Every script's keys share one slot; paid chats (the gate scripts),
// the capacity cache, pub/sub fan-out between the processes, BullMQ jobs and the webhook lanes work;
// then the gates' master fails over (CLUSTER FAILOVER on its replica) while chats run, and then it
// is killed outright (SIGKILL; its replica promoted) during chats and queued jobs, then restarted:
// every chat answered with a 200 or a documented 503, the jobs run, subscriptions hear events again,
// the books balance, and the service closes within its drain.

import { randomUUID } from "node:crypto";
import { QueueEvents } from "bullmq";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AccountEvent } from "../../../src/adapters/pubsub.js";
import { createQueueRedis } from "../../../src/adapters/redis/client.js";
import { createDeliveryLanes } from "../../../src/adapters/redis/delivery-lanes.js";
import { redisKeys } from "../../../src/adapters/redis/keys.js";
import { setLogLevel } from "../../../src/lib/logger.js";
import type { UpstreamSimulator } from "../../../src/local/upstream-sim/index.js";
import { bearer, call, type Res } from "../../../testkit/actors.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { isolatedWorld, type TestApp } from "../../../testkit/harness.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";
import { type RedisCluster, startRedisCluster } from "../../../testkit/redis-cluster.js";
import { startWorld, type World } from "../../../testkit/world.js";

// an unexpected 500 logs its cause (the harness silences the logs)
setLogLevel("error");
let cluster: RedisCluster;
let started: World | undefined;
let dropDatabase: (() => Promise<void>) | undefined;
beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  // a prefix whose gates share a master with the maintenance queue: killing that one master then
  // hits both the chats' gate scripts and the jobs
  const db = await isolatedWorld();
  dropDatabase = db.drop;
  const maintenanceMaster = await cluster.masterOf(`${redisKeys("x", { cluster: true }).queuePrefix("maintenance")}:m`);
  let prefix = db.prefix;
  while ((await cluster.masterOf(redisKeys(prefix, { cluster: true }).gateHolders())) !== maintenanceMaster) {
    prefix = `test-${randomUUID().slice(0, 8)}`;
  }
  started = await startWorld(
    { sim: {}, syncCatalog: true, peer: true, workers: true, env: { REDIS_URL: cluster.url } },
    { databaseUrl: db.databaseUrl, prefix },
  );
  // supply for every test's chats (a test may run alone)
  await addSupply(started.app, started.sim as UpstreamSimulator, [{ priceCents: 40, quantityMicroDiem: 500_000_000n }]);
  started.app.rt.services.inference.invalidateBook();
  started.peer?.rt.services.inference.invalidateBook();
}, 120_000);
afterAll(async () => {
  // the last test closes the world itself (and fails when that takes too long); this is for a failure before it
  await started?.close().catch(() => undefined);
  await dropDatabase?.();
  await cluster?.stop();
}, 120_000);
const world = {
  get app(): TestApp {
    return started?.app as TestApp;
  },
  get peer(): TestApp {
    return started?.peer as TestApp;
  },
  get sim(): UpstreamSimulator {
    return started?.sim as UpstreamSimulator;
  },
};

const chat = (app: TestApp, apiKey: string): Promise<Res> =>
  call(app, {
    method: "POST",
    path: "/v1/chat/completions",
    headers: bearer(apiKey),
    body: { model: "llama-3.3-70b", messages: [{ role: "user", content: "hi" }], max_tokens: 50 },
  });

/** CLUSTER KEYSLOT through the service's own cluster client. */
const slotOf = async (key: string) => Number(await world.app.rt.redis.command.call("CLUSTER", "KEYSLOT", key));

/**
 * An event of `accountId`'s balance topic published by `from` and heard by `to` (another process).
 * The service publishes on it too (a chat's `clear`): only the event with `kind` counts.
 */
async function fanOut(from: TestApp, to: TestApp, accountId: string, kind: string): Promise<AccountEvent> {
  const iter = to.rt.bus.subscribe("balanceChanged", accountId)[Symbol.asyncIterator]();
  let next = iter.next();
  try {
    // the subscription reaches Redis asynchronously: publish until it is heard
    const deadline = Date.now() + 10_000;
    for (;;) {
      from.rt.bus.publish("balanceChanged", accountId, { accountId, kind, at: new Date().toISOString() });
      const waitUntil = Date.now() + 200;
      while (Date.now() < waitUntil) {
        const got = await Promise.race([next, new Promise<null>((r) => setTimeout(() => r(null), 50))]);
        if (!got) continue;
        next = iter.next();
        if ((got.value as AccountEvent).kind === kind) return got.value as AccountEvent;
      }
      if (Date.now() > deadline) throw new Error(`no ${kind} event within 10 s`);
    }
  } finally {
    await iter.return?.();
  }
}

async function maintenanceJobRuns(app: TestApp): Promise<unknown> {
  const prefix = app.rt.keys.queuePrefix("maintenance");
  const connection = createQueueRedis(app.rt.config.redis.url, `${prefix}:maintenance`);
  const events = new QueueEvents("maintenance", { connection, prefix });
  try {
    await events.waitUntilReady();
    const job = await app.rt.queues.maintenance.add("purge-expired", {});
    return await job.waitUntilFinished(events, 60_000);
  } finally {
    await events.close();
    connection.disconnect();
  }
}

describe("on a Redis Cluster", () => {
  test("the keys each script or transaction touches together share one slot", async () => {
    const k = world.app.rt.keys;
    expect(world.app.rt.config.redis.cluster).toBe(true);
    // gates: the grow script reads the holders' set; shrink and assert touch many gates at once
    const gateSlots = new Set(
      await Promise.all(
        [
          k.gateHolders(),
          k.apiKeyInFlight("a"),
          k.upstreamKeyInFlight("b"),
          k.smallModelGate(),
          k.walletImageGate("c"),
        ].map(slotOf),
      ),
    );
    expect(gateSlots.size).toBe(1);
    // webhook lanes: one slot per account, and accounts spread over slots
    for (const account of ["acct-1", "acct-2", "acct-3"]) {
      expect(await slotOf(k.webhookEndpointLane(account, "ep-9"))).toBe(await slotOf(k.webhookAccountLane(account)));
    }
    const laneSlots = new Set(
      await Promise.all(["acct-1", "acct-2", "acct-3", "acct-4"].map((a) => slotOf(k.webhookAccountLane(a)))),
    );
    expect(laneSlots.size).toBeGreaterThan(1);
    // BullMQ: every key of one queue in one slot, the queues spread over slots
    const queueSlots = new Set<number>();
    for (const q of Object.keys(world.app.rt.queues)) {
      const base = `${k.queuePrefix(q)}:${q}`;
      const slots = new Set(
        await Promise.all(["wait", "meta", "id", "events", "delayed", "job-1"].map((s) => slotOf(`${base}:${s}`))),
      );
      expect(slots.size, q).toBe(1);
      queueSlots.add([...slots][0] as number);
    }
    expect(queueSlots.size).toBeGreaterThan(1);
  });

  test("chats, the capacity cache, pub/sub, jobs and webhook lanes work", async () => {
    const buyer = await fundedBuyerKey(world.app, 50_000_000n, 50);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => chat(i % 2 ? world.peer : world.app, buyer.apiKey)),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));

    const capacity = await call(world.app, { method: "GET", path: "/v1/capacity?maxPriceCents=70" });
    expect(capacity.status).toBe(200);
    expect(await world.app.rt.redis.command.ttl(world.app.rt.keys.capacityCache(70))).toBeGreaterThan(0);

    const heard = await fanOut(world.app, world.peer, buyer.user.accountId, "before");
    expect(heard.kind).toBe("before");
    expect(await maintenanceJobRuns(world.app)).toMatchObject({ siweNonces: expect.any(Number) });

    const lanes = createDeliveryLanes(world.app.rt.redis.command, world.app.rt.keys, 2);
    const a = await lanes.take("acct-lanes", "ep-1", 10_000);
    expect(a).not.toBeNull();
    expect(await lanes.take("acct-lanes", "ep-1", 10_000)).toBeNull(); // one attempt per endpoint
    const b = await lanes.take("acct-lanes", "ep-2", 10_000);
    expect(await lanes.take("acct-lanes", "ep-3", 10_000)).toBeNull(); // two per account
    expect((await lanes.busyEndpoints("acct-lanes")).sort()).toEqual(["ep-1", "ep-2"]);
    if (a) await lanes.release(a);
    if (b) await lanes.release(b);
    expect(await lanes.busyEndpoints("acct-lanes")).toEqual([]);
  });

  test("a master fails over during traffic; afterwards everything still works", async () => {
    const buyer = await fundedBuyerKey(world.app, 50_000_000n, 50);
    let running = true;
    const during: Res[] = [];
    const traffic = (async () => {
      for (let i = 0; running; i++) {
        const pair = await Promise.all([chat(world.app, buyer.apiKey), chat(world.peer, buyer.apiKey)]);
        during.push(...pair);
        void i;
      }
    })();
    await new Promise((r) => setTimeout(r, 500));
    // the gates' master (every chat's grow script runs there) fails over gracefully
    const gateMaster = await cluster.masterOf(world.app.rt.keys.gateHolders());
    const { newMaster } = await cluster.failover(gateMaster);
    expect(newMaster).not.toBe(gateMaster);
    expect(await cluster.masterOf(world.app.rt.keys.gateHolders())).toBe(newMaster);
    await new Promise((r) => setTimeout(r, 1000));
    running = false;
    await traffic;

    // during it all: chats served or refused with a documented status, never a 500
    const statuses = during.map((r) => r.status);
    expect(
      statuses.filter((s) => s >= 500 && s !== 503),
      JSON.stringify(
        during
          .filter((r) => r.status >= 500)
          .map((r) => r.body)
          .slice(0, 3),
      ),
    ).toEqual([]);
    expect(statuses.filter((s) => s === 200).length, JSON.stringify(countBy(statuses))).toBeGreaterThan(0);
    // measured here: 440-480 chats in ~7 s, every one a 200

    // afterwards: chats on both processes, pub/sub both ways, a job, the books
    const after = await Promise.all(
      Array.from({ length: 6 }, (_, i) => chat(i % 2 ? world.peer : world.app, buyer.apiKey)),
    );
    expect(
      after.map((r) => r.status),
      JSON.stringify(after.map((r) => r.body).slice(0, 2)),
    ).toEqual(Array(6).fill(200));
    expect((await fanOut(world.app, world.peer, buyer.user.accountId, "after-1")).kind).toBe("after-1");
    expect((await fanOut(world.peer, world.app, buyer.user.accountId, "after-2")).kind).toBe("after-2");
    expect(await maintenanceJobRuns(world.app)).toMatchObject({ siweNonces: expect.any(Number) });
    await assertBooksBalance(world.app.rt.db);
  }, 120_000);
  test("a master is killed during traffic and jobs; afterwards everything works and the service closes", async () => {
    const buyer = await fundedBuyerKey(world.app, 50_000_000n, 50);
    const maintenance = world.app.rt.queues.maintenance;
    const queueMaster = () => cluster.masterOf(`${world.app.rt.keys.queuePrefix("maintenance")}:maintenance:wait`);
    // a subscription open before the kill (an SSE client's) must hear events after it
    const longLived = world.peer.rt.bus.subscribe("balanceChanged", buyer.user.accountId)[Symbol.asyncIterator]();
    await fanOut(world.app, world.peer, buyer.user.accountId, "before-kill");

    // the master of the gates (every chat's grow script) and of the maintenance queue (the workers'
    // blocking connection) dies
    const victim = await queueMaster();
    expect(await cluster.masterOf(world.app.rt.keys.gateHolders())).toBe(victim);
    const jobIds: string[] = [];
    // queued before the kill: delayed, so they are still waiting when it happens
    for (let i = 0; i < 3; i++)
      jobIds.push((await maintenance.add("purge-expired", {}, { delay: 1500 + i * 500 })).id as string);
    await cluster.replicated(victim);

    const t0 = Date.now();
    let running = true;
    const during: Timed[] = [];
    const traffic = (async () => {
      while (running)
        during.push(
          ...(await Promise.all([timedChat(world.app, buyer.apiKey, t0), timedChat(world.peer, buyer.apiKey, t0)])),
        );
    })();
    // and jobs queued by producers while the slot has no master (refused fast, retried by the caller)
    const producing = (async () => {
      for (let i = 0; i < 3; i++) {
        const deadline = Date.now() + 60_000;
        for (;;) {
          try {
            jobIds.push((await maintenance.add("purge-expired", {})).id as string);
            break;
          } catch (e) {
            if (Date.now() > deadline) throw e;
            await sleep(200);
          }
        }
        await sleep(1000);
      }
    })();
    await sleep(500);
    const killedAt = Date.now() - t0;
    const { newMaster } = await cluster.kill(victim, { waitForPromotion: true });
    const promotedAt = Date.now() - t0;
    expect(newMaster).toBeDefined();
    expect(await queueMaster()).toBe(newMaster);
    await producing;
    await sleep(2000);
    running = false;
    await traffic;

    // during it all: every chat answered, a 200 or a 503 with the JSON error body; never a hang or a 500
    const refused = during.filter((r) => r.status !== 200);
    expect(
      refused.filter(
        (r) => r.status !== 503 || (r.body as { error?: { code?: string } })?.error?.code !== "service_unavailable",
      ),
      JSON.stringify(refused.slice(0, 3)),
    ).toEqual([]);
    // and 200s again once the replica took over: the last second of traffic is all 200
    const tail = during.filter((r) => r.at > (during.at(-1)?.at ?? 0) - 1000);
    expect(tail.length).toBeGreaterThan(0);
    expect(tail.map((r) => r.status)).toEqual(tail.map(() => 200));
    const lastRefusal = refused.length > 0 ? Math.max(...refused.map((r) => r.at)) : undefined;
    const slowest = during.filter((r) => r.at > killedAt).reduce((m, r) => Math.max(m, r.tookMs), 0);
    report(
      `killed master ${victim} at +${killedAt} ms, replica ${newMaster} serving at +${promotedAt} ms; ` +
        `${during.length} chats, ${refused.length} answered 503 (the last at ${lastRefusal === undefined ? "-" : `+${lastRefusal}`} ms), ` +
        `the slowest answer after the kill ${slowest} ms`,
    );

    // every job queued before and during the failover runs (the workers resume on the new master)
    await eventually(`jobs ${jobIds.join(",")} completed`, 60_000, async () => {
      const states = await Promise.all(jobIds.map((id) => maintenance.getJobState(id)));
      return states.every((s) => s === "completed") ? true : `${states}`;
    });
    expect(await maintenanceJobRuns(world.app)).toMatchObject({ siweNonces: expect.any(Number) });

    // pub/sub: the subscription from before the kill, and new ones both ways
    const heardLate = (async () => {
      for (;;) {
        const got = await longLived.next();
        if (got.done) throw new Error("the subscription ended");
        if ((got.value as AccountEvent).kind === "after-kill") return got.value as AccountEvent;
      }
    })();
    let heard: AccountEvent | undefined;
    void heardLate.then((e) => {
      heard = e;
    });
    await eventually("the old subscription hears an event", 10_000, async () => {
      world.app.rt.bus.publish("balanceChanged", buyer.user.accountId, {
        accountId: buyer.user.accountId,
        kind: "after-kill",
        at: new Date().toISOString(),
      });
      await sleep(100);
      return heard ? true : "nothing heard";
    });
    await longLived.return?.();
    expect((await fanOut(world.app, world.peer, buyer.user.accountId, "after-kill-1")).kind).toBe("after-kill-1");
    expect((await fanOut(world.peer, world.app, buyer.user.accountId, "after-kill-2")).kind).toBe("after-kill-2");

    // the killed node comes back (a replica now) and chats carry on
    await cluster.restart(victim);
    const after = await Promise.all(
      Array.from({ length: 6 }, (_, i) => chat(i % 2 ? world.peer : world.app, buyer.apiKey)),
    );
    expect(
      after.map((r) => r.status),
      JSON.stringify(after.map((r) => r.body).slice(0, 2)),
    ).toEqual(Array(6).fill(200));
    await assertBooksBalance(world.app.rt.db);

    // and the service closes within its documented drain (a process exits by 25 s), never hangs
    const closing = started;
    started = undefined;
    const closeStart = Date.now();
    const outcome = await Promise.race([
      closing?.close().then(() => "closed"),
      sleep(25_000).then(() => "still closing after 25 s"),
    ]);
    report(`the world (two API processes, the workers) closed in ${Date.now() - closeStart} ms`);
    expect(outcome).toBe("closed");
  }, 240_000);
});

interface Timed {
  status: number;
  body: unknown;
  /** ms since the start of the traffic when the answer came */
  at: number;
  /** how long the answer took */
  tookMs: number;
}

/** A chat that never waits forever: no answer within 30 s is recorded as status 0. */
async function timedChat(app: TestApp, apiKey: string, t0: number): Promise<Timed> {
  const sent = Date.now();
  try {
    const res = await fetch(`${app.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(apiKey) },
      body: JSON.stringify({ model: "llama-3.3-70b", messages: [{ role: "user", content: "hi" }], max_tokens: 50 }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: res.status, body, at: Date.now() - t0, tookMs: Date.now() - sent };
  } catch (e) {
    return { status: 0, body: String(e), at: Date.now() - t0, tookMs: Date.now() - sent };
  }
}

/** The measured figures (docs/operations.md quotes them), on stderr. */
const report = (line: string) => process.stderr.write(`redis-cluster: ${line}\n`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it answers true; fails with its last answer after `timeoutMs`. */
async function eventually(what: string, timeoutMs: number, probe: () => Promise<true | string>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: true | string = "";
  for (;;) {
    last = await probe().catch((e: unknown) => String(e));
    if (last === true) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms (${last})`);
    await sleep(200);
  }
}

function countBy(xs: number[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}
