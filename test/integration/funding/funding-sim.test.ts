// The funding simulation (issue 38 item 7, the payments part; testkit/sim/funding, docs/decisions.md
// "Seeded money simulation (issue 38)"): CI's fixed seeds keep every invariant after every step and
// after the drain, running the real FundingService and PaymentReconciler on a real database and a
// local chain; a seed replays exactly; and each defect planted back into the simulation's wiring
// makes a seed of the fixed set fail on the invariant that guards its rule.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { RedisClient } from "../../../src/adapters/redis/client.js";
import type { FundingDefect } from "../../../testkit/sim/funding/plants.js";
import { describeFundingFailure, type FundingSimResult, runFundingSeed } from "../../../testkit/sim/funding/run.js";
import { sharedRedis } from "../../../testkit/sim/funding/world.js";

/** CI's seeds, STEPS steps each (longer runs: `npm run sim -- --funding --runs=N`). */
const SEEDS = [1, 2, 3, 4];
const STEPS = 60;

let redis: RedisClient;
beforeAll(() => {
  redis = sharedRedis();
});
afterAll(() => redis.disconnect());

const passed = new Map<number, FundingSimResult>();

describe("the funding simulation", () => {
  test(`seeds ${SEEDS.join(", ")} keep every invariant after every step and after the drain`, async () => {
    const total: Record<string, number> = {};
    const behaviours = new Set<string>();
    for (const seed of SEEDS) {
      const r = await runFundingSeed({ seed, steps: STEPS }, redis);
      expect(r.ok, describeFundingFailure(r, { steps: STEPS })).toBe(true);
      passed.set(seed, r);
      for (const [k, v] of Object.entries(r.stats)) if (typeof v === "number") total[k] = (total[k] ?? 0) + v;
      for (const b of Object.keys(r.stats.behaviours)) behaviours.add(b);
    }
    // the schedule is not idle: payments were credited, some by the reconciler from the chain; the
    // process died mid-settle, duplicates came at once, forgeries, cancellations, a lagging node
    expect(total.funded).toBeGreaterThan(SEEDS.length * 5);
    expect(total.reconciledCredited).toBeGreaterThan(0);
    expect(total.reconciledFailed).toBeGreaterThan(0);
    for (const k of ["crashes", "duplicates", "forged", "cancels", "lags", "heldLanded"]) {
      expect(total[k], k).toBeGreaterThan(0);
    }
    expect(behaviours.size).toBeGreaterThanOrEqual(10);
  }, 240_000);

  test("a seed replays exactly", async () => {
    const seed = SEEDS[SEEDS.length - 1] as number;
    const first = passed.get(seed) ?? (await runFundingSeed({ seed, steps: STEPS }, redis));
    const again = await runFundingSeed({ seed, steps: STEPS }, redis);
    expect(again.trace).toEqual(first.trace);
    expect(again.trace).not.toEqual(passed.get(SEEDS[0] as number)?.trace);
  }, 120_000);

  // each defect, the invariant that must catch it, and the first seed of the fixed set that did
  // (docs/decisions.md; tried first, then the others)
  const planted: [FundingDefect, RegExp, number][] = [
    ["replay-unverified", /a forged payment was answered 200|answered 200 but nothing moved/, 1],
    ["failure-overwrites-credit", /"nothing was charged"\) but its transfer is on chain|is failed but credited/, 2],
    ["reverse-on-not-found", /reversed while its transfer is on chain/, 2],
    ["cancel-ignored", /cancelled on chain but it ended reconciling/, 1],
    ["scan-skips-settling", /moved money on chain but ended settling|never moved money but ended settling/, 3],
  ];
  test.each(planted)(
    "planted back, %s makes a seed of the fixed set fail",
    async (defect, caught, first) => {
      let failed: FundingSimResult | null = null;
      for (const seed of [first, ...SEEDS.filter((s) => s !== first)]) {
        const r = await runFundingSeed({ seed, steps: STEPS, defects: [defect] }, redis);
        if (!r.ok) {
          failed = r;
          break;
        }
      }
      expect(failed, `no seed of ${SEEDS.join(", ")} caught ${defect}`).not.toBeNull();
      if (!failed) return;
      expect(failed.violations.join("\n")).toMatch(caught);
      expect(describeFundingFailure(failed, { steps: STEPS, defects: [defect] })).toContain(
        `npm run sim -- --funding --seed=${failed.seed} --steps=${STEPS} --plant=${defect}`,
      );
    },
    240_000,
  );
});
