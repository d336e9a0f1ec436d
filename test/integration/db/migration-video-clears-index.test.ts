import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { databaseBefore } from "../../../testkit/db.js";
import { insertMarketParties } from "../../../testkit/migration-rows.js";
import { laterMonthIndexDefs, partitionIndexes, partitionsOf, planOf } from "../../../testkit/partition-indexes.js";

/**
 * The migration `video_clears_index` on a database with clears in it (two months and the DEFAULT
 * partition; a text and a video clear in each): the index on `clears.request_id` becomes partial on
 * the video modality on the table and on every partition, old and new, holding an entry only for the
 * video clears; the three reads that find a video job's clear by its request (the fold of its holder,
 * its held share's move, its refund), as written in src/, use it with a literal and as a parameter of
 * a generic plan, and answer the video clear.
 */
const TARGET = "20261220000000_video_clears_index";
// now is before 2027: November and December 2026 have month partitions, March 2027 falls in DEFAULT
const AT = ["2026-11-20T10:00:00.000Z", "2026-12-02T10:00:00.000Z", "2027-03-01T10:00:00.000Z"];

describe("migration video_clears_index", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const buyer = randomUUID();
  const supplier = randomUUID();
  const key = randomUUID();
  const offer = randomUUID();
  const text = AT.map(() => randomUUID());
  const video = AT.map(() => randomUUID());
  const rows = async (sql: string, params: unknown[] = []) => (await c.query(sql, params)).rows;

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    await insertMarketParties(c, { buyer, supplier, key, offer }, { offer: { expiresAt: "2027-06-01" } });
    const insert = (request: string, modality: string, at: string) =>
      c.query(
        `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                             modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                             fee_micro_usdc, supplier_micro_usdc, created_at)
         VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, 'm', $6::modality, 40, 80, 1000, 400, 40, 360, $7)`,
        [request, buyer, supplier, offer, key, modality, at],
      );
    for (const [i, at] of AT.entries()) {
      await insert(text[i] as string, "text", at);
      await insert(video[i] as string, "video", at);
    }
    await db.migrateToLatest();
    await c.query("ANALYZE clears");
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  test("partial on video on the table and on every partition, an entry only per video clear", async () => {
    const found = await partitionIndexes(c, "clears", "request_id_idx");
    const partitions = await partitionsOf(c, "clears");
    expect(partitions).toEqual(expect.arrayContaining(["clears_default", "clears_y2026m11", "clears_y2026m12"]));
    expect(found.map((f) => f.table).sort()).toEqual(["clears", ...partitions].sort());
    for (const f of found)
      expect(f.def, f.table).toContain("USING btree (request_id) WHERE (modality = 'video'::modality)");
    const entries = Object.fromEntries(found.map((f) => [f.table, f.entries]));
    expect(entries).toMatchObject({ clears_y2026m11: 1, clears_y2026m12: 1, clears_default: 1 });
  });

  test("a month made later gets it", async () => {
    const defs = await laterMonthIndexDefs(c, "clears", "2030-01");
    expect(defs).toEqual(
      expect.arrayContaining([expect.stringMatching(/\(request_id\) WHERE \(modality = 'video'::modality\)$/)]),
    );
  });

  test("the video reads by request use it, with a value and with a parameter, and find the video clear", async () => {
    const plan = (sql: string) => planOf(c, sql);
    // the WHERE clauses of foldVideoClearOf, moveHeldShare and the video refund, as src/ writes them
    const reads = [
      "SELECT c.id FROM clears c WHERE c.request_id = $1 AND c.modality = 'video'",
      "SELECT id FROM clears WHERE request_id = $1 AND modality = 'video' FOR NO KEY UPDATE",
      "SELECT id FROM clears WHERE request_id = $1 AND modality = 'video'",
    ];
    await c.query("BEGIN");
    try {
      // the tables are tiny: without this the planner scans them, which says nothing about the index
      await c.query("SET LOCAL enable_seqscan = off");
      await c.query("SET LOCAL plan_cache_mode = force_generic_plan");
      for (const [i, sql] of reads.entries()) {
        const literal = sql.replace("$1", `'${video[1]}'::uuid`);
        expect(await plan(literal), literal).toMatch(/Index Scan using clears_y2026m12_request_id_idx/);
        await c.query(
          `PREPARE read_${i}(uuid) AS ${sql.replace("SELECT c.id", "SELECT c.id::text").replace("SELECT id", "SELECT id::text")}`,
        );
        expect(await plan(`EXECUTE read_${i}('${video[1]}')`)).toMatch(/Index Scan using clears_\w+_request_id_idx/);
        expect((await rows(`EXECUTE read_${i}('${video[2]}')`)).length, sql).toBe(1);
        expect(await rows(`EXECUTE read_${i}('${text[2]}')`), sql).toEqual([]);
      }
    } finally {
      await c.query("ROLLBACK");
      await c.query("DEALLOCATE ALL");
    }
  });
});
