// The short soak (issue 18, Deliver 2): `npm run soak`'s code at CI size — 3 API and 2 worker
// processes on a database, a Redis, an upstream simulator and a chain of their own; a few hundred
// mixed requests from two dozen x402-funded buyers under injected upstream faults; an API SIGKILLed
// with streams open, both workers SIGKILLed mid-job, the Redis restarted empty, every Postgres
// connection terminated. Then every invariant of the full run (docs/operations.md "Soak").
import { describe, expect, test } from "vitest";
import { runSoak, SHORT_SOAK } from "../../testkit/soak/run.js";

describe("soak (short)", () => {
  test("the books, balances, offers, payments, escrow, gates and charges hold through faults and crashes", async () => {
    const lines: Record<string, unknown>[] = [];
    const report = await runSoak(SHORT_SOAK, (line) => lines.push(line));
    const failed = report.invariants.filter((i) => !i.ok);
    const context = lines.filter((l) => l.soak === "chaos" || l.soak === "service_error_sample");
    expect(failed, JSON.stringify({ failed, context }, null, 2)).toEqual([]);
    expect(report.invariants.map((i) => i.invariant)).toEqual(expect.arrayContaining(["books_balance", "no_deadlock"]));
    expect(report.requests).toBeGreaterThanOrEqual(SHORT_SOAK.requests);
  }, 300_000);
});
