import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { databaseBefore } from "../../../testkit/db.js";
import { insertMarketParties } from "../../../testkit/migration-rows.js";
import { laterMonthIndexDefs, partitionIndexes, partitionsOf, planOf } from "../../../testkit/partition-indexes.js";

/**
 * The migration `clears_time_brin` on a database with clears in it (two months and the DEFAULT
 * partition): the index on `clears.created_at` becomes a block-range index on the table and on every
 * partition, old and new, and is not a btree anywhere; the time-range reads of src/ (the catalog's
 * statistics window, the market's day, the month's closing) can use it, and answer the same rows.
 */
const TARGET = "20261229000000_clears_time_brin";
/** clears appended after the migration, a minute apart from 5 December on */
const BULK = 30_000;
// now is before 2027: November and December 2026 have month partitions, March 2027 falls in DEFAULT
const AT = [
  "2026-11-20T10:00:00.000Z",
  "2026-12-02T10:00:00.000Z",
  "2026-12-02T11:00:00.000Z",
  "2027-03-01T10:00:00.000Z",
];

describe("migration clears_time_brin", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const buyer = randomUUID();
  const supplier = randomUUID();
  const key = randomUUID();
  const offer = randomUUID();
  const rows = async (sql: string, params: unknown[] = []) => (await c.query(sql, params)).rows;
  /** the indexes on created_at alone (the other histories' names end the same way) */
  const timeIndexes = async () =>
    (await partitionIndexes(c, "clears", "created_at_idx")).filter((f) => / \(created_at\)( WITH .*)?$/.test(f.def));

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    await insertMarketParties(c, { buyer, supplier, key, offer }, { offer: { expiresAt: "2027-06-01" } });
    for (const at of AT)
      await c.query(
        `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                             modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                             fee_micro_usdc, supplier_micro_usdc, created_at)
         VALUES (gen_random_uuid(), gen_random_uuid(), $1, $2, $3, $4, 'm', 'text', 40, 80, 1000, 400, 40, 360, $5)`,
        [buyer, supplier, offer, key, at],
      );
    // before: a btree on every partition
    const before = await timeIndexes();
    expect(before.length).toBeGreaterThan(1);
    for (const f of before) expect(f.def, f.table).toContain("USING btree (created_at)");
    await db.migrateToLatest();
    // a month of appends in time order (a clear a minute, 20 suppliers and 50 buyers), as a live table has
    const people = Array.from({ length: 70 }, (_, i) => `'0x${(0xe000 + i).toString(16).padStart(40, "0")}'`);
    await c.query(
      `WITH a AS (INSERT INTO accounts (id, wallet_address, auth_provider)
                  SELECT gen_random_uuid(), w, 'siwe' FROM unnest(ARRAY[${people.join(",")}]) w RETURNING id),
            n AS (SELECT id, row_number() OVER () AS i FROM a)
       INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                           modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                           fee_micro_usdc, supplier_micro_usdc, created_at)
       SELECT gen_random_uuid(), gen_random_uuid(), (SELECT id FROM n WHERE i = 21 + g % 50),
              (SELECT id FROM n WHERE i = 1 + g % 20), $1, $2, 'm', 'text', 40, 80, 1000, 400, 40, 360,
              '2026-12-05T00:00:00Z'::timestamptz + g * interval '1 minute'
         FROM generate_series(0, ${BULK - 1}) g`,
      [offer, key],
    );
    await c.query("ANALYZE clears");
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  test("a block-range index on the table and on every partition, and no btree on created_at alone", async () => {
    const found = await timeIndexes();
    const partitions = await partitionsOf(c, "clears");
    expect(partitions).toEqual(expect.arrayContaining(["clears_default", "clears_y2026m11", "clears_y2026m12"]));
    expect(found.map((f) => f.table).sort()).toEqual(["clears", ...partitions].sort());
    for (const f of found) expect(f.def, f.table).toContain("USING brin (created_at) WITH (autosummarize='on')");
  });

  test("a month made later gets it", async () => {
    const defs = await laterMonthIndexDefs(c, "clears", "2030-02");
    expect(defs).toEqual(
      expect.arrayContaining([expect.stringMatching(/USING brin \(created_at\) WITH \(autosummarize='on'\)$/)]),
    );
    expect(defs.filter((d) => /USING btree \(created_at\)$/.test(d))).toEqual([]);
  });

  test("the time-range reads use it on a month of appends, and answer the same rows", async () => {
    // the WHERE clauses of the catalog's statistics window, the market's day and the month's closing,
    // over one day of the month's 30,000 appends: the planner's own choice, no setting forced
    const day = ["2026-12-10T00:00:00Z", "2026-12-11T00:00:00Z"];
    const reads: [string, unknown[]][] = [
      [
        "SELECT count(*)::int AS n FROM clears c WHERE c.created_at > $1 AND c.created_at <= $2 AND c.refunded_at IS NULL",
        day,
      ],
      ["SELECT count(*)::int AS n FROM clears WHERE refunded_at IS NULL AND created_at >= $1 AND created_at < $2", day],
      [
        "SELECT count(*)::int AS n FROM clears c WHERE c.created_at >= $1 AND c.created_at < $2 AND c.refunded_at IS NULL",
        day,
      ],
    ];
    for (const [sql, params] of reads) {
      expect(await planOf(c, sql, params), sql).toMatch(/Bitmap Index Scan on clears_y2026m12_created_at_idx/);
      // a minute apart: 1,440 in the day, give or take the bounds
      expect((await rows(sql, params))[0]?.n, sql).toBeGreaterThanOrEqual(1_440);
      expect((await rows(sql, params))[0]?.n, sql).toBeLessThanOrEqual(1_441);
    }
    // summarised (as autovacuum does once the appends move past a range): the same plan, the same rows
    await rows("SELECT brin_summarize_new_values('clears_y2026m12_created_at_idx')");
    for (const [sql, params] of reads) {
      expect(await planOf(c, sql, params), sql).toMatch(/Bitmap Index Scan on clears_y2026m12_created_at_idx/);
      expect((await rows(sql, params))[0]?.n, sql).toBeGreaterThanOrEqual(1_440);
      expect((await rows(sql, params))[0]?.n, sql).toBeLessThanOrEqual(1_441);
    }
    // the rows before the month's appends, in both partitions, as before the migration
    expect((await rows(reads[0]?.[0] as string, ["2026-12-01T00:00:00Z", "2026-12-03T00:00:00Z"]))[0]?.n).toBe(2);
    expect((await rows(reads[2]?.[0] as string, ["2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"]))[0]?.n).toBe(1);
  });
});
