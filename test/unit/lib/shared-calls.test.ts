import { describe, expect, it } from "vitest";
import { SharedCalls } from "../../../src/lib/shared-calls.js";

/** A computation that ends when told to. */
function gate<V>() {
  let open: (v: V) => void = () => undefined;
  let fail: (e: Error) => void = () => undefined;
  const p = new Promise<V>((res, rej) => {
    open = res;
    fail = rej;
  });
  return { p, open, fail };
}

describe("SharedCalls", () => {
  it("callers of one key while it runs share one computation; another key runs its own", async () => {
    const calls = new SharedCalls<number>();
    let computed = 0;
    const g = gate<number>();
    const h = gate<number>();
    const a = [1, 2, 3].map(() =>
      calls.run("a", () => {
        computed++;
        return g.p;
      }),
    );
    const b = calls.run("b", () => {
      computed++;
      return h.p;
    });
    expect(computed).toBe(2);
    expect(calls.size).toBe(2);
    g.open(7);
    h.open(9);
    expect(await Promise.all(a)).toEqual([7, 7, 7]);
    expect(await b).toBe(9);
    expect(calls.size).toBe(0);
  });

  it("after it settles, the next call computes anew", async () => {
    const calls = new SharedCalls<number>();
    let computed = 0;
    expect(await calls.run("a", async () => ++computed)).toBe(1);
    expect(await calls.run("a", async () => ++computed)).toBe(2);
  });

  it("a failure is shared by those who joined, and not kept", async () => {
    const calls = new SharedCalls<number>();
    const g = gate<number>();
    const joined = [calls.run("a", () => g.p), calls.run("a", () => Promise.resolve(0))];
    g.fail(new Error("down"));
    for (const j of joined) await expect(j).rejects.toThrow("down");
    expect(await calls.run("a", async () => 5)).toBe(5);
  });
});
