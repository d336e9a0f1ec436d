import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { applyFunctions } from "../../../src/adapters/sql-functions.js";
import { databaseBefore } from "../../../testkit/db.js";
import {
  insertClearRow,
  insertFoldingHolder,
  insertMarketParties,
  type MarketParties,
} from "../../../testkit/migration-rows.js";

/**
 * The migration `market_days` on a database from before it (docs/decisions.md "Market totals at the
 * fold"): clears the folds applied (no holder; a holder's at or below its folded_seq), clears a live
 * holder has not folded yet, refunded ones of both kinds, and a month retired into clear_closings.
 * After it, the market's totals (svc_market_days) are the unrefunded clears' own, day by day, and a
 * retired month's closing; the holder's fold and a refund keep them so.
 */
const TARGET = "20270101000000_market_days";
const DAY = "2026-12-02";
const AT = `${DAY}T10:00:00.000Z`;
const NEXT = "2026-12-03T09:00:00.000Z";

interface Day {
  day: string;
  modality: string | null;
  clears: string;
  burn: string;
  gross: string;
  weighted: string;
}

async function marketDays(c: pg.Client): Promise<Day[]> {
  const r = await c.query<Day>(
    `SELECT day::text, modality::text, clears::text, burn_micro_diem::text AS burn, gross_micro_usdc::text AS gross,
            weighted::text FROM svc_market_days() ORDER BY day, modality NULLS FIRST`,
  );
  return r.rows;
}

describe("migration market_days", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const [buyer, supplier, key, offer] = Array.from({ length: 4 }, () => randomUUID());
  const holder: string = randomUUID();
  /** [id, holder, seq, burn, price, refunded, created_at, modality] */
  const clears: [string, string | null, number | null, number, number, boolean, string, string][] = [
    [randomUUID(), null, null, 1_000_000, 40, false, AT, "text"], // folded, no holder
    [randomUUID(), null, null, 2_000_000, 50, true, AT, "text"], // folded, refunded
    [randomUUID(), holder, 1, 3_000_000, 40, false, AT, "image"], // the holder folded it
    [randomUUID(), holder, 3, 500_000, 60, false, NEXT, "text"], // not folded yet
    [randomUUID(), holder, 4, 700_000, 30, true, NEXT, "text"], // not folded yet, refunded
  ];
  const unfolded = clears.filter((x) => x[2] !== null && x[2] > 2);

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    const unfoldedGross = unfolded.reduce((a, x) => a + (x[3] * x[4]) / 100, 0);
    const unfoldedBurn = unfolded.reduce((a, x) => a + x[3], 0);
    await insertMarketParties(
      c,
      { buyer, supplier, key, offer },
      {
        buyer: { confirmed: 50_000_000, reserved: unfoldedGross },
        offer: { remaining: 9_000_000, reserved: unfoldedBurn },
        keyBalance: 90_000_000,
      },
    );
    await insertFoldingHolder(c, {
      holder,
      foldedSeq: 2,
      foldedThrough: AT,
      buyer: buyer as string,
      offer: offer as string,
      gross: unfoldedGross,
      burn: unfoldedBurn,
    });
    const parties = { buyer, supplier, key, offer } as MarketParties;
    for (const [id, h, seq, burn, price, refunded, at, modality] of clears) {
      await insertClearRow(c, parties, { id, holder: h, seq, burn, price, refunded, at, modality });
    }
    // a month retired before the table existed: its closing, net of its refunds, with no modality
    await c.query(
      `INSERT INTO clear_closings (month, buyer_account_id, clears, burn_micro_diem, at_ceiling_micro_usdc, gross_micro_usdc)
       VALUES ('2026-06-01', $1, 7, 9000000, 7200000, 3600000)`,
      [buyer],
    );
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  test("carries the folded clears, takes the refunded out, leaves the unfolded to the fold", async () => {
    await db.migrateToLatest();
    expect(await applyFunctions(db.url)).toBe("applied");
    // the carried rows: the folded unrefunded ones, and −1 for the refunded clear not yet folded
    const carried = await c.query(
      `SELECT day::text, modality::text, source::text, clears::text FROM market_days ORDER BY day, modality NULLS FIRST`,
    );
    expect(carried.rows).toEqual([
      { day: "2026-06-01", modality: null, source: "00000000-0000-0000-0000-000000000000", clears: "7" },
      { day: DAY, modality: "image", source: "00000000-0000-0000-0000-000000000000", clears: "1" },
      { day: DAY, modality: "text", source: "00000000-0000-0000-0000-000000000000", clears: "1" },
      { day: "2026-12-03", modality: "text", source: "00000000-0000-0000-0000-000000000000", clears: "-1" },
    ]);
    const expected: Day[] = [
      { day: "2026-06-01", modality: null, clears: "7", burn: "9000000", gross: "3600000", weighted: "0" },
      { day: DAY, modality: "image", clears: "1", burn: "3000000", gross: "1200000", weighted: "120000000" },
      { day: DAY, modality: "text", clears: "1", burn: "1000000", gross: "400000", weighted: "40000000" },
      { day: "2026-12-03", modality: "text", clears: "1", burn: "500000", gross: "300000", weighted: "30000000" },
    ];
    expect(await marketDays(c)).toEqual(expected);
    const rule = "SELECT rule, subject FROM svc_books_check() WHERE rule = 'market_days'";
    expect((await c.query(rule)).rows).toEqual([]);

    // the holder's fold moves its two clears into its own row; the totals stay the clears' own
    await c.query("SELECT * FROM svc_fold_holder($1)", [holder]);
    const rows = await c.query(`SELECT clears::text FROM market_days WHERE source = $1`, [holder]);
    expect(rows.rows).toEqual([{ clears: "2" }]);
    expect((await c.query("SELECT count(*)::int AS n FROM svc_unfolded()")).rows[0]).toEqual({ n: 0 });
    expect(await marketDays(c)).toEqual(expected);
    expect((await c.query(rule)).rows).toEqual([]);
  });

  test("the books check names a day whose totals are not its clears'", async () => {
    await c.query("BEGIN");
    try {
      // a clear's burn is not among the columns its append-only trigger guards
      await c.query("UPDATE clears SET burn_micro_diem = burn_micro_diem + 1 WHERE id = $1", [clears[0]?.[0]]);
      expect((await c.query("SELECT rule, subject FROM svc_books_check() WHERE rule = 'market_days'")).rows).toEqual([
        { rule: "market_days", subject: `${DAY}:text` },
      ]);
    } finally {
      await c.query("ROLLBACK");
    }
  });
});
