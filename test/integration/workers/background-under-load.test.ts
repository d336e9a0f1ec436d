import { Job, type Queue, QueueEvents } from "bullmq";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { createRedis } from "../../../src/adapters/redis/client.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { startWorkers, type Workers } from "../../../workers/index.js";

/**
 * Issue 18 finding 7: with the API busy, the catalog-sync and maintenance jobs failed with Prisma's
 * "Unable to start a transaction in the given time": they waited on the API's connection pool.
 * Workers have their own pool (and patient transaction options), and every scheduled job retries
 * with backoff.
 */

// a small API pool, so holding all of it takes few of the server's connections
test.override("appOptions", { sim: {}, workers: true, env: { DB_POOL_SIZE: "4" } });
const world = fileWorld(test);
let events: Record<string, QueueEvents> = {};

beforeAll(async () => {
  const prefix = world.app.rt.keys.bullPrefix();
  for (const name of ["sync", "maintenance"]) {
    const e = new QueueEvents(name, { connection: createRedis(world.app.rt.config.redis.url, "worker"), prefix });
    await e.waitUntilReady();
    events[name] = e;
  }
});
afterAll(async () => {
  await Promise.all(Object.values(events).map((e) => e.close()));
  events = {};
});

/** Holds every connection of the API's Prisma pool (DB_POOL_SIZE) for `ms`. */
function holdApiPool(ms: number): Promise<unknown> {
  const { db, config } = world.app.rt;
  const seconds = ms / 1000;
  return Promise.allSettled(
    Array.from({ length: config.database.poolSize }, () => db.$queryRaw`SELECT pg_sleep(${seconds})`),
  );
}

async function runOnce(queue: Queue, name: string, eventsOf: QueueEvents) {
  const job = await queue.add(name, {});
  const result = await job.waitUntilFinished(eventsOf, 30_000);
  const done = await Job.fromId(queue, job.id ?? "");
  return { result, attemptsStarted: done?.attemptsStarted ?? -1 };
}

describe("background jobs while the API's pool is busy", () => {
  test("the API's pool is really exhausted: an API-side transaction cannot start meanwhile", async () => {
    const held = holdApiPool(5_000);
    await new Promise((r) => setTimeout(r, 300));
    const db = world.app.rt.db;
    await expect(db.$transaction([db.$queryRaw`SELECT 1`, db.$queryRaw`SELECT 2`])).rejects.toThrow(
      /Unable to start a transaction in the given time/,
    );
    await held;
  });

  test("catalog sync and purge-expired succeed at their first attempt while the API's pool is held", async () => {
    const held = holdApiPool(6_000);
    await new Promise((r) => setTimeout(r, 300));
    const [sync, purge] = await Promise.all([
      runOnce(world.app.rt.queues.sync, "sync-catalog", events.sync as QueueEvents),
      runOnce(world.app.rt.queues.maintenance, "purge-expired", events.maintenance as QueueEvents),
    ]);
    expect(sync.result).toMatchObject({ upserted: expect.any(Number) });
    expect((sync.result as { upserted: number }).upserted).toBeGreaterThan(0);
    expect(sync.attemptsStarted).toBe(1);
    expect(purge.result).toMatchObject({ siweNonces: expect.any(Number), sessions: expect.any(Number) });
    expect(purge.attemptsStarted).toBe(1);
    await held;
  }, 60_000);
});

describe("scheduled jobs retry", () => {
  test("every job scheduler's jobs carry attempts and a backoff", async () => {
    // a second worker set on the same queues, with its schedules (the harness starts none)
    let workers: Workers | undefined;
    try {
      workers = await startWorkers(world.app.rt, { schedules: true });
      const queues = Object.values(world.app.rt.queues);
      let schedulers = 0;
      for (const queue of queues) {
        for (const s of await queue.getJobSchedulers()) {
          schedulers++;
          expect(s.template?.opts?.attempts, `${queue.name}/${s.key}`).toBeGreaterThanOrEqual(3);
          expect(s.template?.opts?.backoff, `${queue.name}/${s.key}`).toMatchObject({ type: "exponential" });
        }
      }
      expect(schedulers).toBeGreaterThanOrEqual(9);
    } finally {
      for (const queue of Object.values(world.app.rt.queues)) {
        for (const s of await queue.getJobSchedulers()) await queue.removeJobScheduler(s.key);
      }
      await workers?.close();
    }
  });
});
