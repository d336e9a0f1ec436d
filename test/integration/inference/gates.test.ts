// In-flight gates leased per process (GateLeases) against a real Redis: the limit holds across
// processes under concurrency; a freed slot serves the process's next request without a round
// trip; idle slots go back after a trim window, or at once when another process asks; a dead
// process's slots come back when its lease lapses; a clean close gives everything back.
import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, test } from "vitest";
import { closeRedis, createRedis } from "../../../src/adapters/redis/client.js";
import { GateLeases, type GateLeasesOptions } from "../../../src/adapters/redis/gate-leases.js";
import { REDIS_URL } from "../../../testkit/db.js";

const redis = createRedis(REDIS_URL, "command");
const open: GateLeases[] = [];
afterAll(async () => {
  await Promise.all(open.map((g) => g.close()));
  await closeRedis(redis);
});

/** One deployment's holders set and a fresh gate key in it. */
function deployment() {
  const p = `test:gates:${randomUUID()}`;
  return { holdersKey: `${p}:holders`, gate: (name = "g") => `${p}:gate:${name}` };
}

/** A process's gate leases (closed after the file). */
function processOf(d: { holdersKey: string }, opts: Partial<GateLeasesOptions> = {}): GateLeases {
  const g = new GateLeases(redis, { holdersKey: d.holdersKey, ...opts });
  open.push(g);
  return g;
}

/** Slots each holder has in the gate, as Redis counts them. */
async function held(gate: string): Promise<Record<string, number>> {
  const h = await redis.hgetall(gate);
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Number(v)]));
}

/** Polls until `gate`'s holders in Redis equal `want` (a trim runs on a timer). */
async function heldBecomes(gate: string, want: Record<string, number>, timeoutMs = 3_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (JSON.stringify(await held(gate)) !== JSON.stringify(want) && Date.now() < until) await sleep(10);
  expect(await held(gate)).toEqual(want);
}

const sum = (h: Record<string, number>) => Object.values(h).reduce((a, b) => a + b, 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("gate leases", () => {
  test("a freed slot serves this process's next request in memory; Redis counts the process's lease", async () => {
    const d = deployment();
    const a = processOf(d);
    const gate = d.gate();
    expect(await a.acquire(gate, 4)).toBe(true);
    expect(a.stats).toEqual({ local: 1, grows: 1 });
    a.release(gate);
    expect(await a.acquire(gate, 4)).toBe(true);
    expect(await a.acquire(gate, 4)).toBe(true);
    // the first grow took one slot; the third acquisition needed one more
    expect(a.stats.grows).toBe(2);
    expect(a.inUse(gate)).toBe(2);
    expect(await held(gate)).toEqual({ [a.id]: 2 });
  });

  test("claimed counts the slots being acquired (the grow under way and its waiters) beside those in use", async () => {
    const d = deployment();
    const a = processOf(d);
    const gate = d.gate();
    expect(a.claimed(gate)).toBe(0);
    // three acquisitions in one tick: the first grows the lease, the other two wait on that grow
    const pending = [a.acquire(gate, 8), a.acquire(gate, 8), a.acquire(gate, 8)];
    await Promise.resolve();
    expect(a.inUse(gate)).toBe(0);
    expect(a.claimed(gate)).toBe(3);
    expect(await Promise.all(pending)).toEqual([true, true, true]);
    expect([a.inUse(gate), a.claimed(gate)]).toEqual([3, 3]);
    for (let i = 0; i < 3; i++) a.release(gate);
    expect(a.claimed(gate)).toBe(0);
  });

  test("the limit holds across processes under 300 concurrent acquisitions; everything goes back once idle", async () => {
    const d = deployment();
    const procs = [processOf(d), processOf(d), processOf(d)];
    const gate = d.gate();
    const got = await Promise.all(
      Array.from({ length: 300 }, (_, i) => procs[i % 3]?.acquire(gate, 7) ?? Promise.resolve(false)),
    );
    expect(got.filter(Boolean)).toHaveLength(7);
    expect(procs.reduce((n, p) => n + p.inUse(gate), 0)).toBe(7);
    expect(sum(await held(gate))).toBe(7);
    // released in memory: nothing moves in Redis at once (a trim window must pass unused)
    for (const p of procs) for (let i = p.inUse(gate); i > 0; i--) p.release(gate);
    expect(sum(await held(gate))).toBe(7);

    await heldBecomes(gate, {});
    expect(procs.map((p) => p.leased(gate))).toEqual([0, 0, 0]);
  });

  test("a gate in steady use keeps its slots: no round trip per request", async () => {
    const d = deployment();
    const a = processOf(d);
    const gate = d.gate();
    for (let i = 0; i < 50; i++) {
      expect(await a.acquire(gate, 2)).toBe(true);
      await sleep(2);
      a.release(gate);
    }
    expect(a.stats.grows).toBe(1);
    expect(a.stats.local).toBe(50);
  });

  test("refused while another process holds idle slots: it is asked to give them back, and the retry succeeds", async () => {
    const d = deployment();
    const gate = d.gate();
    // a trim window too long to matter: only the pressure can free the slots in time
    const a = processOf(d, { trimMs: 60_000 });
    const asked: string[] = [];
    const b = processOf(d, {
      onPressure: (g) => {
        asked.push(g);
        a.yieldIdle(g);
      },
    });
    expect(await a.acquire(gate, 2)).toBe(true);
    expect(await a.acquire(gate, 2)).toBe(true);
    a.release(gate); // one idle slot stays with a, one is in use
    expect(await b.acquire(gate, 2)).toBe(true);
    expect(asked).toEqual([gate]);
    expect(await held(gate)).toEqual({ [a.id]: 1, [b.id]: 1 });
    // a slot in use is never yielded: the next refusal stands
    expect(await b.acquire(gate, 2)).toBe(false);
    expect(await held(gate)).toEqual({ [a.id]: 1, [b.id]: 1 });
  });

  test("a gate other processes use is shared: a freed slot goes back at once, as a per-request gate would", async () => {
    const d = deployment();
    const gate = d.gate();
    const a = processOf(d, { trimMs: 60_000 });
    const b = processOf(d, { trimMs: 60_000, onPressure: (g) => a.yieldIdle(g) });
    expect(await a.acquire(gate, 2)).toBe(true); // a saw nobody else: it keeps freed slots
    expect(await b.acquire(gate, 2)).toBe(true); // b saw a's slot: the gate is shared for b
    b.release(gate);
    await heldBecomes(gate, { [a.id]: 1 });
    a.release(gate);
    expect(await held(gate)).toEqual({ [a.id]: 1 });
    // b needs both: a is asked for its idle one, gives it back, and shares the gate from then on
    expect(await b.acquire(gate, 2)).toBe(true);
    expect(await b.acquire(gate, 2)).toBe(true);
    expect(await held(gate)).toEqual({ [b.id]: 2 });
    b.release(gate);
    await heldBecomes(gate, { [b.id]: 1 });
    expect(await a.acquire(gate, 2)).toBe(true);
    a.release(gate);
    await heldBecomes(gate, { [b.id]: 1 });
  });

  test("asked to yield while growing: the grant keeps only what its requests take (no idle slot outlives the ask)", async () => {
    const d = deployment();
    const gate = d.gate();
    const a = processOf(d, { trimMs: 60_000 });
    for (let i = 0; i < 4; i++) expect(await a.acquire(gate, 8)).toBe(true);
    // unshared and busy: the next grow asks for headroom (two slots for one request)…
    const growing = a.acquire(gate, 8);
    // …and another process asks for idle slots while it is under way
    a.yieldIdle(gate);
    expect(await growing).toBe(true);
    expect([a.inUse(gate), a.leased(gate)]).toEqual([5, 5]);
    await heldBecomes(gate, { [a.id]: 5 });
  });

  test("a dead process's slots come back when its lease lapses; a stalled one re-asserts what it still uses", async () => {
    const d = deployment();
    const gate = d.gate();
    const a = processOf(d, { trimMs: 60_000 });
    const b = processOf(d);
    expect(await a.acquire(gate, 2)).toBe(true);
    expect(await a.acquire(gate, 2)).toBe(true);
    expect(await b.acquire(gate, 2)).toBe(false);
    // a stops renewing (its lease runs out)
    await redis.zadd(d.holdersKey, Date.now() - 1, a.id);
    expect(await b.acquire(gate, 2)).toBe(true);
    expect(await held(gate)).toEqual({ [b.id]: 1 });
    // a was only stalled: its next heartbeat registers it again with the slots its requests hold
    await a.heartbeat();
    expect(await held(gate)).toEqual({ [a.id]: 2, [b.id]: 1 });
    // over the limit for now: nobody gets another until enough are given back
    expect(await b.acquire(gate, 2)).toBe(false);
    a.release(gate);
    a.release(gate);
    a.yieldIdle(gate);
    await heldBecomes(gate, { [b.id]: 1 });
    expect(await b.acquire(gate, 2)).toBe(true);
  });

  test("close gives every slot back and leaves the holders", async () => {
    const d = deployment();
    const a = new GateLeases(redis, { holdersKey: d.holdersKey });
    const [g1, g2] = [d.gate("one"), d.gate("two")];
    expect(await a.acquire(g1, 3)).toBe(true);
    expect(await a.acquire(g2, 3)).toBe(true);
    expect(await redis.zscore(d.holdersKey, a.id)).not.toBeNull();
    await a.close();
    expect(await held(g1)).toEqual({});
    expect(await held(g2)).toEqual({});
    expect(await redis.zscore(d.holdersKey, a.id)).toBeNull();
    await expect(a.acquire(g1, 3)).rejects.toThrow(/closed/);
  });

  test("an acquisition waiting out a refusal when close runs ends refused: no lease comes back to life", async () => {
    // the shutdown's race: a request asked the other processes for slots and is waiting to try
    // again when its process closes the gates (the drain timed out, or it fell forward late)
    const d = deployment();
    const gate = d.gate();
    const a = processOf(d, { trimMs: 60_000 });
    let closing: Promise<void> | undefined;
    const b = new GateLeases(redis, {
      holdersKey: d.holdersKey,
      onPressure: () => {
        closing ??= b.close();
        // the holder of the slot lets it go: the next try would be granted
        a.release(gate);
        a.yieldIdle(gate);
      },
    });
    expect(await b.acquire(d.gate("other"), 1)).toBe(true); // b is a registered holder
    expect(await a.acquire(gate, 1)).toBe(true);
    await expect(b.acquire(gate, 1)).rejects.toThrow(/closed/);
    await closing;
    expect(await redis.zscore(d.holdersKey, b.id)).toBeNull();
    expect((await held(gate))[b.id]).toBeUndefined();
  });
});
