// The periodic jobs (confirmations, the escrow sweeper, video sweeps, reconciliation, sync…) are
// BullMQ job schedulers kept in Redis. A Redis that restarts empty (no persistence, a failover, a
// flush) loses them; the worker processes must put them back, not only when they start (found by
// the soak, issue 18: after a Redis restart no periodic job ran until a worker process restarted).
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { QUEUES } from "../../../src/adapters/queues.js";
import { isolatedWorld, startTestApp, type TestApp } from "../../../testkit/harness.js";
import { startWorkers, type Workers } from "../../../workers/index.js";

let app: TestApp;
let workers: Workers;
let drop: () => Promise<void>;

beforeAll(async () => {
  const w = await isolatedWorld();
  drop = w.drop;
  app = await startTestApp({ databaseUrl: w.databaseUrl, prefix: w.prefix });
  workers = await startWorkers(app.rt, { scheduleCheckMs: 200 });
});
afterAll(async () => {
  await workers?.close();
  await app?.close();
  await drop?.();
});

async function schedulerIds(): Promise<string[]> {
  const ids: string[] = [];
  for (const q of Object.values(QUEUES)) {
    for (const s of await app.rt.queues[q].getJobSchedulers()) ids.push(`${q}/${s.key}`);
  }
  return ids.sort();
}

/**
 * Everything under this test's Redis prefix gone at once (one script: the workers' check sees all of
 * it or none of it), as after a restart of a Redis without persistence. Returns how many keys went.
 */
async function loseRedisData(): Promise<number> {
  const script = `local ks = redis.call('KEYS', ARGV[1])
for i = 1, #ks, 500 do redis.call('DEL', unpack(ks, i, math.min(i + 499, #ks))) end
return #ks`;
  return Number(await app.rt.redis.command.eval(script, 0, `${app.rt.keys.prefix}:*`));
}

describe("job schedulers", () => {
  test("a Redis that lost its data gets every periodic job back from the running workers", async () => {
    const before = await schedulerIds();
    expect(before).toContain("confirmations/confirm-pending");
    expect(before).toContain("maintenance/release-expired-holds");
    expect(before).toContain("video/video-sweep");

    expect(await loseRedisData()).toBeGreaterThan(before.length);

    const end = Date.now() + 5_000;
    let after = await schedulerIds();
    while (after.length < before.length && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      after = await schedulerIds();
    }
    expect(after).toEqual(before);
  });
});
