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
 * The migration `model_hours` on a database from before it (docs/decisions.md "Model statistics at the
 * fold"): clears the folds applied, one a live holder has not folded yet, refunded ones of both kinds.
 * After it, the market's hours per model (svc_model_hours) are the unrefunded clears' own, with buyers
 * that certainly cleared there; the holder's fold keeps them so, and the books check names an hour
 * whose totals or buyers are wrong.
 */
const TARGET = "20270102000000_model_hours";
const AT = "2026-12-02T10:20:00.000Z";
const NEXT = "2026-12-03T09:40:00.000Z";
const TEXT = "zai-org-glm-5-1";
const IMAGE = "venice-sd35";
const NIL = "00000000-0000-0000-0000-000000000000";

interface Hour {
  hour: string;
  model: string;
  clears: string;
  burn: string;
  buyers: string[];
}

async function modelHours(c: pg.Client): Promise<Hour[]> {
  const r = await c.query<Hour>(
    `SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') AS hour, model, clears::text,
            burn_micro_diem::text AS burn, buyers::text[] AS buyers
       FROM svc_model_hours('-infinity', 'infinity') ORDER BY hour, model`,
  );
  return r.rows;
}

describe("migration model_hours", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const [buyer, supplier, key, offer] = Array.from({ length: 4 }, () => randomUUID());
  const other: string = randomUUID();
  const holder: string = randomUUID();
  /** [id, buyer, holder, seq, burn, refunded, created_at, model, modality] */
  const clears: [string, string, string | null, number | null, number, boolean, string, string, string][] = [
    [randomUUID(), buyer as string, null, null, 1_000_000, false, AT, TEXT, "text"], // folded, no holder
    [randomUUID(), other, null, null, 2_000_000, true, AT, TEXT, "text"], // folded, refunded
    [randomUUID(), other, holder, 1, 3_000_000, false, AT, IMAGE, "image"], // the holder folded it
    [randomUUID(), buyer as string, holder, 3, 500_000, false, NEXT, TEXT, "text"], // not folded yet
    [randomUUID(), buyer as string, holder, 4, 700_000, true, NEXT, TEXT, "text"], // not folded yet, refunded
  ];
  const unfolded = clears.filter((x) => x[3] !== null && x[3] > 2);

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    const unfoldedGross = unfolded.reduce((a, x) => a + (x[4] * 40) / 100, 0);
    const unfoldedBurn = unfolded.reduce((a, x) => a + x[4], 0);
    await insertMarketParties(
      c,
      { buyer, supplier, key, offer },
      {
        buyer: { confirmed: 50_000_000, reserved: unfoldedGross },
        offer: { remaining: 9_000_000, reserved: unfoldedBurn },
        keyBalance: 90_000_000,
      },
    );
    await c.query(
      `INSERT INTO accounts (id, wallet_address, auth_provider) VALUES ($1, '0x00000000000000000000000000000000000000ef', 'siwe')`,
      [other],
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
    for (const [id, who, h, seq, burn, refunded, at, model, modality] of clears) {
      await insertClearRow(c, parties, {
        id,
        buyer: who,
        holder: h,
        seq,
        burn,
        price: 40,
        refunded,
        at,
        model,
        modality,
      });
    }
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  const rule = "SELECT rule, subject FROM svc_books_check() WHERE rule = 'model_hours' ORDER BY subject";

  test("carries the folded clears with their buyers, takes the refunded out, leaves the unfolded to the fold", async () => {
    await db.migrateToLatest();
    expect(await applyFunctions(db.url)).toBe("applied");
    const carried = await c.query(
      `SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') AS hour, model, source::text, clears::text,
              refunds::text, buyer_low::text AS low, buyer_high::text AS high
         FROM model_hours ORDER BY hour, model`,
    );
    expect(carried.rows).toEqual([
      { hour: "2026-12-02T10", model: IMAGE, source: NIL, clears: "1", refunds: "0", low: other, high: other },
      // the refunded clear of another buyer is out of the count and of the pair, and marks the hour
      { hour: "2026-12-02T10", model: TEXT, source: NIL, clears: "1", refunds: "1", low: buyer, high: buyer },
      // −1 for the refunded clear not yet folded: its fold adds it back
      { hour: "2026-12-03T09", model: TEXT, source: NIL, clears: "-1", refunds: "1", low: null, high: null },
    ]);
    const expected: Hour[] = [
      { hour: "2026-12-02T10", model: IMAGE, clears: "1", burn: "3000000", buyers: [other] },
      // an hour with a refund names no buyer from its pair
      { hour: "2026-12-02T10", model: TEXT, clears: "1", burn: "1000000", buyers: [] },
      // the unfolded clear's own buyer is certain
      { hour: "2026-12-03T09", model: TEXT, clears: "1", burn: "500000", buyers: [buyer as string] },
    ];
    expect(await modelHours(c)).toEqual(expected);
    expect((await c.query(rule)).rows).toEqual([]);

    // the holder's fold moves its two clears into its own row; the totals stay the clears' own
    await c.query("SELECT * FROM svc_fold_holder($1)", [holder]);
    const rows = await c.query(
      `SELECT clears::text, refunds::text, buyer_low::text AS low, buyer_high::text AS high FROM model_hours WHERE source = $1`,
      [holder],
    );
    expect(rows.rows).toEqual([{ clears: "2", refunds: "0", low: buyer, high: buyer }]);
    expect((await c.query("SELECT count(*)::int AS n FROM svc_unfolded()")).rows[0]).toEqual({ n: 0 });
    expect(await modelHours(c)).toEqual([
      expected[0],
      expected[1],
      { hour: "2026-12-03T09", model: TEXT, clears: "1", burn: "500000", buyers: [] },
    ]);
    expect((await c.query(rule)).rows).toEqual([]);
  });

  test("the books check names an hour whose totals are not its clears'", async () => {
    await c.query("BEGIN");
    try {
      // a clear's burn is not among the columns its append-only trigger guards
      await c.query("UPDATE clears SET burn_micro_diem = burn_micro_diem + 1 WHERE id = $1", [clears[0]?.[0]]);
      expect((await c.query(rule)).rows).toEqual([{ rule: "model_hours", subject: `2026-12-02T10:${TEXT}` }]);
    } finally {
      await c.query("ROLLBACK");
    }
  });

  test("the books check names a buyer an hour claims who did not clear there", async () => {
    await c.query("BEGIN");
    try {
      await c.query("UPDATE model_hours SET buyer_high = $1 WHERE model = $2", [supplier, IMAGE]);
      expect((await c.query(rule)).rows).toEqual([
        { rule: "model_hours", subject: `2026-12-02T10:${IMAGE}:${supplier}` },
      ]);
    } finally {
      await c.query("ROLLBACK");
    }
  });
});
