import { beforeAll, describe, expect } from "vitest";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { createBuyers, createSupply, getJson, gql, insertClear, type Supply } from "../../../testkit/catalog.js";

/**
 * GET /v1/models/stats over clears inserted directly at fixed instants. The app's clock is fixed,
 * so windows and UTC days are exact.
 */
const NOW = new Date("2026-11-20T12:00:00.000Z");
const hoursAgo = (h: number) => new Date(NOW.getTime() - h * 3_600_000);

const X = "zai-org-glm-5-1";
const Y = "claude-sonnet-4-6";
const Z = "venice-sd35";
const Q = "qwen3-4b";
const HIDDEN = "hidden-model";

interface StatsBody {
  window: string;
  generatedAt: string;
  hasSufficientVolume: boolean;
  models: { id: string; modality: string; rank: number; usageShare: number; daily: { day: string; share: number }[] }[];
}

test.override("appOptions", { clock: { now: () => NOW } });
const world = fileWorld(test);
let supply: Supply;
let buyers: string[];

async function stats(window?: string) {
  const r = await getJson<StatsBody>(
    world.app.baseUrl,
    `/v1/models/stats${window === undefined ? "" : `?window=${window}`}`,
  );
  expect(r.status).toBe(200);
  return r.body;
}

function daysFrom(first: string, last: string): string[] {
  const out: string[] = [];
  for (
    let d = new Date(`${first}T00:00:00.000Z`);
    d.toISOString().slice(0, 10) <= last;
    d.setUTCDate(d.getUTCDate() + 1)
  ) {
    out.push(d.toISOString().slice(0, 10));
  }
  return out;
}

/** daily[] of one model: `shares` on the listed days, 0 elsewhere. */
function dailyOf(days: string[], shares: Record<string, number>) {
  return days.map((day) => ({ day, share: shares[day] ?? 0 }));
}

beforeAll(async () => {
  supply = await createSupply(world.app.rt.db);
  buyers = await createBuyers(world.app.rt.db, 4);
});

describe("privacy threshold", () => {
  test("no clears: hasSufficientVolume false and no models", async () => {
    const body = await stats();
    expect(body).toEqual({ window: "7d", generatedAt: NOW.toISOString(), hasSufficientVolume: false, models: [] });
  });

  test("fewer than 3 distinct buyers is below the threshold, however many clears", async () => {
    const [b1, , , b4] = buyers as [string, string, string, string];
    // 30 clears 10 days ago, from two buyers only (in the 30d window, not in 7d or 24h)
    for (let i = 0; i < 30; i++) {
      await insertClear(world.app.rt.db, supply, {
        buyerAccountId: i % 2 === 0 ? b1 : b4,
        model: Q,
        burnMicroDiem: 1000n,
        at: hoursAgo(240),
      });
    }
    for (const w of ["24h", "7d", "30d"]) {
      const body = await stats(w);
      expect(body.hasSufficientVolume, w).toBe(false);
      expect(body.models, w).toEqual([]);
    }
  });

  test("fewer than 20 clears is below the threshold; refunded clears do not count", async () => {
    const [b1, b2, b3] = buyers as [string, string, string, string];
    const three = [b1, b2, b3];
    let n = 0;
    const next = () => three[n++ % 3] as string;
    // X: 10 × 0.6 DIEM an hour ago (day 2026-11-20)
    for (let i = 0; i < 10; i++)
      await insertClear(world.app.rt.db, supply, {
        buyerAccountId: next(),
        model: X,
        burnMicroDiem: 600_000n,
        at: hoursAgo(1),
      });
    // Y: 6 × 0.5 DIEM 14 hours ago (day 2026-11-19)
    for (let i = 0; i < 6; i++)
      await insertClear(world.app.rt.db, supply, {
        buyerAccountId: next(),
        model: Y,
        burnMicroDiem: 500_000n,
        at: hoursAgo(14),
      });
    // Z (image): 3 × 0.25 DIEM two hours ago
    for (let i = 0; i < 3; i++)
      await insertClear(world.app.rt.db, supply, {
        buyerAccountId: next(),
        model: Z,
        modality: "image",
        burnMicroDiem: 250_000n,
        at: hoursAgo(2),
      });
    // a large refunded clear: never counted
    await insertClear(world.app.rt.db, supply, {
      buyerAccountId: b1,
      model: X,
      burnMicroDiem: 100_000_000n,
      at: hoursAgo(1),
      refunded: true,
    });
    const body = await stats("24h");
    expect(body.hasSufficientVolume).toBe(false);
    expect(body.models).toEqual([]);
  });
});

describe("ranks and shares", () => {
  test("24h: ranks by burn, shares of the window, daily shares of each UTC day", async () => {
    const [, b2] = buyers as [string, string, string, string];
    // the 20th unrefunded clear in 24h crosses the threshold
    await insertClear(world.app.rt.db, supply, {
      buyerAccountId: b2,
      model: Z,
      modality: "image",
      burnMicroDiem: 250_000n,
      at: hoursAgo(2),
    });
    // just outside 24h (in 7d): Y, 1 DIEM on 2026-11-19
    await insertClear(world.app.rt.db, supply, {
      buyerAccountId: b2,
      model: Y,
      burnMicroDiem: 1_000_000n,
      at: hoursAgo(25),
    });

    const body = await stats("24h");
    expect(body.hasSufficientVolume).toBe(true);
    expect(body.window).toBe("24h");
    expect(body.generatedAt).toBe(NOW.toISOString());
    const days = ["2026-11-19", "2026-11-20"];
    // 24h burn: X 6.0, Y 3.0, Z 1.0 (total 10.0); 11-19: Y only; 11-20: X 6.0 + Z 1.0
    expect(body.models).toEqual([
      { id: X, modality: "text", rank: 1, usageShare: 0.6, daily: dailyOf(days, { "2026-11-20": 0.8571 }) },
      { id: Y, modality: "text", rank: 2, usageShare: 0.3, daily: dailyOf(days, { "2026-11-19": 1 }) },
      { id: Z, modality: "image", rank: 3, usageShare: 0.1, daily: dailyOf(days, { "2026-11-20": 0.1429 }) },
    ]);
  });

  test("7d (the default): the clear outside 24h counts; the 10-day-old ones do not", async () => {
    const body = await stats();
    expect(body.window).toBe("7d");
    expect(await stats("7d")).toEqual(body);
    const days = daysFrom("2026-11-13", "2026-11-20");
    // X 6.0, Y 4.0, Z 1.0 of 11.0
    expect(body.models).toEqual([
      { id: X, modality: "text", rank: 1, usageShare: 0.5455, daily: dailyOf(days, { "2026-11-20": 0.8571 }) },
      { id: Y, modality: "text", rank: 2, usageShare: 0.3636, daily: dailyOf(days, { "2026-11-19": 1 }) },
      { id: Z, modality: "image", rank: 3, usageShare: 0.0909, daily: dailyOf(days, { "2026-11-20": 0.1429 }) },
    ]);
  });

  test("30d: everything unrefunded; models an operator disabled are left out", async () => {
    await world.app.rt.db.catalogModel.create({
      data: { id: HIDDEN, modality: "text", status: "live", name: "Hidden", disabled: true, upstreamRow: {} },
    });
    const [b1, b2, b3] = buyers as [string, string, string, string];
    for (const b of [b1, b2, b3])
      await insertClear(world.app.rt.db, supply, {
        buyerAccountId: b,
        model: HIDDEN,
        burnMicroDiem: 50_000_000n,
        at: hoursAgo(3),
      });

    const body = await stats("30d");
    expect(body.hasSufficientVolume).toBe(true);
    const days = daysFrom("2026-10-21", "2026-11-20");
    expect(days).toHaveLength(31);
    // X 6.0, Y 4.0, Z 1.0, Q 0.03 of 11.03
    expect(body.models).toEqual([
      { id: X, modality: "text", rank: 1, usageShare: 0.544, daily: dailyOf(days, { "2026-11-20": 0.8571 }) },
      { id: Y, modality: "text", rank: 2, usageShare: 0.3626, daily: dailyOf(days, { "2026-11-19": 1 }) },
      { id: Z, modality: "image", rank: 3, usageShare: 0.0907, daily: dailyOf(days, { "2026-11-20": 0.1429 }) },
      { id: Q, modality: "text", rank: 4, usageShare: 0.0027, daily: dailyOf(days, { "2026-11-10": 1 }) },
    ]);
  });

  test("GraphQL modelStats returns the same figures", async () => {
    const r = await gql<{
      modelStats: {
        window: string;
        hasSufficientVolume: boolean;
        models: { id: string; rank: number; usageShare: number; daily: { day: string; share: number }[] }[];
      };
    }>(
      world.app.baseUrl,
      `{ modelStats(window: "24h") { window hasSufficientVolume models { id rank usageShare daily { day share } } } }`,
    );
    expect(r.errors).toBeUndefined();
    const rest = await stats("24h");
    expect(r.data?.modelStats.window).toBe("24h");
    expect(r.data?.modelStats.models).toEqual(rest.models.map(({ modality: _m, ...m }) => m));
    const def = await gql<{ modelStats: { window: string } }>(world.app.baseUrl, "{ modelStats { window } }");
    expect(def.data?.modelStats.window).toBe("7d");
  });
});

describe("rejection", () => {
  test.each([["1d"], [""], ["7D"], ["7d&window=24h"], ["30"]])("window=%s is 400 invalid_request", async (w) => {
    const r = await getJson<{ error: { code: string; field?: string } }>(
      world.app.baseUrl,
      `/v1/models/stats?window=${w}`,
    );
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
    expect(r.headers.get("x-svc-error-code")).toBe("invalid_request");
  });

  test("GraphQL: an invalid window is invalid_request", async () => {
    const r = await gql(world.app.baseUrl, `{ modelStats(window: "1d") { window } }`);
    expect(r.errors?.[0]?.extensions?.code).toBe("invalid_request");
  });
});

describe("privacy", () => {
  test("no stats response carries counts, tokens, wallets, keys, ids or support references", async () => {
    const accounts = await world.app.rt.db.account.findMany({ select: { id: true, walletAddress: true } });
    const requests = await world.app.rt.db.inferenceRequest.findMany({ select: { id: true, supportReference: true } });
    const keys = await world.app.rt.db.upstreamKey.findMany({ select: { id: true } });
    const secrets = new Set([
      ...accounts.flatMap((a) => [a.id, a.walletAddress]),
      ...requests.flatMap((r) => (r.supportReference ? [r.id, r.supportReference] : [r.id])),
      ...keys.map((k) => k.id),
      supply.offerId,
    ]);
    const allowedKeys = new Set([
      "window",
      "generatedAt",
      "hasSufficientVolume",
      "models",
      "id",
      "modality",
      "rank",
      "usageShare",
      "daily",
      "day",
      "share",
    ]);
    const walk = (v: unknown, path: string): void => {
      if (typeof v === "string") {
        expect(secrets.has(v), `${path} leaks an identifier`).toBe(false);
        expect(/^0x[0-9a-f]{40}$/i.test(v), `${path} looks like a wallet`).toBe(false);
      } else if (Array.isArray(v)) {
        for (const [i, x] of v.entries()) walk(x, `${path}[${i}]`);
      } else if (typeof v === "object" && v !== null) {
        for (const [k, x] of Object.entries(v)) {
          expect(allowedKeys.has(k), `${path}.${k} is not a published stats field`).toBe(true);
          expect(
            /count|clears|tokens|wallet|key|account|request|reference|burn|usdc|diem/i.test(k),
            `${path}.${k}`,
          ).toBe(false);
          walk(x, `${path}.${k}`);
        }
      }
    };
    for (const w of ["24h", "7d", "30d"]) {
      const body = await stats(w);
      expect(body.hasSufficientVolume).toBe(true);
      walk(body, w);
    }
    walk(await stats("24h"), "below-threshold");
  });
});
