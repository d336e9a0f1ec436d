import { beforeAll, describe, expect } from "vitest";
import { refundClear } from "../../../src/domain/ledger/ledger.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { createBuyers, createSupply, getJson, insertClear, type Supply } from "../../../testkit/catalog.js";

/**
 * GET /v1/models/stats reads the market's hour rows (docs/decisions.md "Model statistics at the
 * fold"): the window's whole hours from `model_hours`, its two partial hours from the clears. The
 * clock stops off the hour, so both ends of a window cut an hour; a refund taken out of an hour leaves
 * its buyer pair unsaid, and buyers the pairs do not name are found in the clears.
 */
const NOW = new Date("2026-11-20T12:34:56.789Z");
const DAY_MS = 86_400_000;
const ago = (ms: number) => new Date(NOW.getTime() - ms);

const X = "zai-org-glm-5-1";
const Y = "claude-sonnet-4-6";
const Q = "qwen3-4b";

interface StatsBody {
  hasSufficientVolume: boolean;
  models: { id: string; usageShare: number; daily: { day: string; share: number }[] }[];
}

test.override("appOptions", { clock: { now: () => NOW } });
const world = fileWorld(test);
let supply: Supply;
/** three buyers in id order: the lowest and highest are an hour's pair, the middle one is not */
let low: string;
let middle: string;
let high: string;

async function stats(window: string): Promise<StatsBody> {
  const r = await getJson<StatsBody>(world.app.baseUrl, `/v1/models/stats?window=${window}`);
  expect(r.status).toBe(200);
  return r.body;
}

beforeAll(async () => {
  supply = await createSupply(world.app.rt.db);
  [low, middle, high] = (await createBuyers(world.app.rt.db, 3)).sort() as [string, string, string];
});

describe("buyers in the hour rows", () => {
  test("a refund leaves its hour's pair unsaid: a buyer whose only clear was refunded is not counted", async () => {
    const db = world.app.rt.db;
    // ten days ago (30d only), one hour: 20 clears of the middle and highest buyers, one of the lowest
    const at = ago(10 * DAY_MS);
    for (let i = 0; i < 20; i++) {
      await insertClear(db, supply, { buyerAccountId: i % 2 ? middle : high, model: Q, burnMicroDiem: 1000n, at });
    }
    const lone = await insertClear(db, supply, { buyerAccountId: low, model: Q, burnMicroDiem: 1000n, at });
    expect((await stats("30d")).hasSufficientVolume).toBe(true);

    // the pair of the hour is (lowest, highest); the lowest buyer's one clear is refunded
    await db.$transaction((tx) => refundClear(tx, { clearId: lone, at: NOW }));
    const body = await stats("30d");
    expect(body.hasSufficientVolume).toBe(false);
    expect(body.models).toEqual([]);
  });
});

describe("a window's partial hours", () => {
  test("both ends are read from the clears: (now − 24h, now], to the millisecond", async () => {
    const db = world.app.rt.db;
    const from = ago(DAY_MS);
    // X: 20 clears of three buyers in one whole hour (its pair names two; the third is read from the clears)
    const three = [low, middle, high];
    for (let i = 0; i < 20; i++) {
      await insertClear(db, supply, {
        buyerAccountId: three[i % 3] as string,
        model: X,
        burnMicroDiem: 1_000_000n,
        at: ago(5 * 3_600_000),
      });
    }
    // Y at the window's ends: in the first partial hour and at now (counted), at its start and after
    // now (not counted)
    await insertClear(db, supply, {
      buyerAccountId: low,
      model: Y,
      burnMicroDiem: 3_000_000n,
      at: new Date(from.getTime() + 1),
    });
    await insertClear(db, supply, { buyerAccountId: low, model: Y, burnMicroDiem: 2_000_000n, at: NOW });
    await insertClear(db, supply, { buyerAccountId: low, model: Y, burnMicroDiem: 7_000_000n, at: from });
    await insertClear(db, supply, {
      buyerAccountId: low,
      model: Y,
      burnMicroDiem: 7_000_000n,
      at: new Date(NOW.getTime() + 1),
    });

    const body = await stats("24h");
    expect(body.hasSufficientVolume).toBe(true);
    // 20 DIEM of X and 5 of Y in the window
    expect(body.models.map((m) => [m.id, m.usageShare])).toEqual([
      [X, 0.8],
      [Y, 0.2],
    ]);
    const y = body.models.find((m) => m.id === Y);
    expect(y?.daily).toEqual([
      { day: "2026-11-19", share: 1 },
      { day: "2026-11-20", share: 0.0909 },
    ]);
  });
});
