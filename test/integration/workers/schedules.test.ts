// The periodic jobs (confirmations, the escrow sweeper, video sweeps, reconciliation, sync…) are
// BullMQ job schedulers kept in Redis. A Redis that restarts empty (no persistence, a failover, a
// flush) loses them; the worker processes must put them back, not only when they start (found by
// the soak, issue 18: after a Redis restart no periodic job ran until a worker process restarted).
import { describe, expect } from "vitest";
import { QUEUES } from "../../../src/adapters/queues.js";
import { appTest } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import { startWorkers } from "../../../workers/index.js";

/** the app's worker processes, with their job schedulers, checking for lost ones every 200 ms */
const test = appTest.extend("workers", { scope: "file", auto: true }, async ({ app }, { onCleanup }) => {
  const workers = await startWorkers(app.rt, { scheduleCheckMs: 200 });
  onCleanup(() => workers.close());
  return workers;
});

async function schedulerIds(app: TestApp): Promise<string[]> {
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
async function loseRedisData(app: TestApp): Promise<number> {
  const script = `local ks = redis.call('KEYS', ARGV[1])
for i = 1, #ks, 500 do redis.call('DEL', unpack(ks, i, math.min(i + 499, #ks))) end
return #ks`;
  return Number(await app.rt.redis.command.eval(script, 0, `${app.rt.keys.prefix}:*`));
}

describe("job schedulers", () => {
  test("a Redis that lost its data gets every periodic job back from the running workers", async ({ app }) => {
    const before = await schedulerIds(app);
    expect(before).toContain("confirmations/confirm-pending");
    expect(before).toContain("maintenance/release-expired-holds");
    expect(before).toContain("video/video-sweep");

    expect(await loseRedisData(app)).toBeGreaterThan(before.length);

    const end = Date.now() + 5_000;
    let after = await schedulerIds(app);
    while (after.length < before.length && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      after = await schedulerIds(app);
    }
    expect(after).toEqual(before);
  });
});
