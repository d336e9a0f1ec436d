import { describe, expect, test } from "vitest";
import { Batcher } from "../../../src/lib/batcher.js";

/** A controllable backend: each batch waits until released, and records what it carried. */
function backend(opts: { failWhen?: (items: number[]) => boolean; badOne?: number } = {}) {
  const batches: number[][] = [];
  const singles: number[] = [];
  const gates: (() => void)[] = [];
  const runBatch = async (items: number[]) => {
    batches.push(items);
    await new Promise<void>((r) => gates.push(r));
    if (opts.failWhen?.(items)) throw new Error("batch rolled back");
    return items.map((i) => i * 10);
  };
  const runOne = async (item: number) => {
    singles.push(item);
    if (item === opts.badOne) throw new Error(`item ${item} refused`);
    return item * 10;
  };
  const releaseAll = () => {
    for (const g of gates.splice(0)) g();
  };
  return { batches, singles, runBatch, runOne, releaseAll };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("Batcher (group commit)", () => {
  test("a lone item leaves at once, alone, through runOne", async () => {
    const b = backend();
    const batcher = new Batcher(b.runBatch, b.runOne, { maxBatch: 8, maxInFlight: 1 });
    await expect(batcher.submit(7)).resolves.toBe(70);
    expect(b.singles).toEqual([7]);
    expect(b.batches).toEqual([]);
  });

  test("items submitted while a batch runs leave together in the next batch, answers in order", async () => {
    const b = backend();
    const batcher = new Batcher(b.runBatch, b.runOne, { maxBatch: 8, maxInFlight: 1 });
    const first = [batcher.submit(1), batcher.submit(2)];
    await tick();
    expect(b.batches).toEqual([[1, 2]]);
    const waiting = [3, 4, 5, 6].map((i) => batcher.submit(i));
    await tick();
    expect(b.batches).toHaveLength(1); // the next batch waits for the running one
    b.releaseAll();
    await expect(Promise.all(first)).resolves.toEqual([10, 20]);
    await tick();
    expect(b.batches[1]).toEqual([3, 4, 5, 6]);
    b.releaseAll();
    await expect(Promise.all(waiting)).resolves.toEqual([30, 40, 50, 60]);
    expect(batcher.stats).toMatchObject({ batches: 2, items: 6, fallbacks: 0, largest: 4 });
  });

  test("batches never exceed maxBatch", async () => {
    const b = backend();
    const batcher = new Batcher(b.runBatch, b.runOne, { maxBatch: 3, maxInFlight: 2 });
    const all = Array.from({ length: 8 }, (_, i) => batcher.submit(i));
    await tick();
    expect(b.batches.map((x) => x.length)).toEqual([3, 3]);
    for (let i = 0; i < 3; i++) {
      b.releaseAll();
      await tick();
    }
    await expect(Promise.all(all)).resolves.toEqual([0, 10, 20, 30, 40, 50, 60, 70]);
    expect(b.batches.flat().length + b.singles.length).toBe(8);
  });

  test("a batch that rolls back is retried item by item: one bad item fails alone", async () => {
    const b = backend({ failWhen: (items) => items.includes(3), badOne: 3 });
    const batcher = new Batcher(b.runBatch, b.runOne, { maxBatch: 8, maxInFlight: 1 });
    const out = [1, 2, 3, 4].map((i) => batcher.submit(i));
    await tick();
    b.releaseAll();
    const settled = await Promise.allSettled(out);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect(settled.filter((s) => s.status === "fulfilled").map((s) => s.value)).toEqual([10, 20, 40]);
    expect(b.singles.sort()).toEqual([1, 2, 3, 4]);
    expect(batcher.stats.fallbacks).toBe(1);
  });

  test("a batch answering with the wrong number of rows is not trusted", async () => {
    const singles: number[] = [];
    const batcher = new Batcher(
      async (items: number[]) => items.slice(1).map((i) => i),
      async (i: number) => {
        singles.push(i);
        return i;
      },
      { maxBatch: 8, maxInFlight: 1 },
    );
    await expect(Promise.all([batcher.submit(1), batcher.submit(2)])).resolves.toEqual([1, 2]);
    expect(singles).toEqual([1, 2]);
  });
});
