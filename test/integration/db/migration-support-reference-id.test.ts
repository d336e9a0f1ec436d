import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createPrisma, type Db } from "../../../src/adapters/db.js";
import { requestByReference } from "../../../src/domain/accounts/history-reads.js";
import { uuidV7 } from "../../../src/lib/uuid7.js";
import { databaseBefore } from "../../../testkit/db.js";
import { insertMarketParties } from "../../../testkit/migration-rows.js";
import { laterMonthIndexDefs, partitionIndexes, partitionsOf } from "../../../testkit/partition-indexes.js";

/**
 * The migration `support_reference_is_request_id` on a database with requests in it (two months and
 * the DEFAULT partition; in each, one record with a stored v4 reference and one with a stored v7 one,
 * as the service wrote them before): the column takes NULL (a newer record's reference is its id);
 * the unique index on (support_reference, started_at) becomes partial on the table and on every
 * partition, old and new, holding an entry only for a stored reference; each older record keeps its
 * reference and is found by it, and by its id, as `requestByReference` reads; a newer record, written
 * with none, is found by its id; a stored reference is still unique with its start.
 */
const TARGET = "20261231000000_support_reference_is_request_id";
// now is before 2027: November and December 2026 have month partitions, March 2027 falls in DEFAULT
const AT = ["2026-11-20T10:00:00.000Z", "2026-12-02T10:00:00.000Z", "2027-03-01T10:00:00.000Z"];

describe("migration support_reference_is_request_id", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  let prisma: Db;
  const buyer = randomUUID();
  const ids = { buyer, supplier: randomUUID(), key: randomUUID(), offer: randomUUID() };
  const old = AT.flatMap((at) => [
    { id: randomUUID(), ref: randomUUID(), at },
    { id: randomUUID(), ref: uuidV7(new Date(at)), at },
  ]);
  const insert = (id: string, ref: string | null, at: string) =>
    c.query(
      `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents,
                                       status, started_at)
       VALUES ($1, $2, $3, 'chat', 'text', 'm', 80, 'succeeded', $4)`,
      [id, ref, buyer, at],
    );

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    await insertMarketParties(c, ids, { offer: { expiresAt: "2027-06-01" } });
    for (const o of old) await insert(o.id, o.ref, o.at);
    await db.migrateToLatest();
    prisma = createPrisma(db.url, { max: 2 });
  }, 60_000);

  afterAll(async () => {
    await prisma?.$disconnect();
    await db?.drop();
  });

  test("partial on the table and on every partition, an entry only per stored reference", async () => {
    const found = await partitionIndexes(c, "inference_requests", "support_reference_started_at_idx");
    // every partition has it (the two months and DEFAULT among them: their entries are read below)
    const partitions = await partitionsOf(c, "inference_requests");
    expect(found.map((f) => f.table).sort()).toEqual(["inference_requests", ...partitions].sort());
    for (const f of found) {
      expect(f.def, f.table).toContain("UNIQUE INDEX inference_requests_");
      expect(f.def, f.table).toContain(
        "USING btree (support_reference, started_at) WHERE (support_reference IS NOT NULL)",
      );
    }
    const entries = Object.fromEntries(found.map((f) => [f.table, f.entries]));
    expect(entries).toMatchObject({
      inference_requests_y2026m11: 2,
      inference_requests_y2026m12: 2,
      inference_requests_default: 2,
    });
    const col = await c.query<{ is_nullable: string }>(
      `SELECT is_nullable FROM information_schema.columns
        WHERE table_name = 'inference_requests' AND column_name = 'support_reference'`,
    );
    expect(col.rows[0]?.is_nullable).toBe("YES");
  });

  test("a month made later gets it", async () => {
    const defs = await laterMonthIndexDefs(c, "inference_requests", "2030-01");
    expect(defs).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /UNIQUE INDEX .*\(support_reference, started_at\) WHERE \(support_reference IS NOT NULL\)$/,
        ),
      ]),
    );
  });

  test("an older record is found by its reference and by its id; a newer one by its id", async () => {
    for (const o of old) {
      expect((await requestByReference(prisma, o.ref))?.requestId, o.ref).toBe(o.id);
      expect((await requestByReference(prisma, o.ref))?.supportReference).toBe(o.ref);
      expect((await requestByReference(prisma, o.id))?.requestId).toBe(o.id);
    }
    for (const at of AT) {
      const id = uuidV7(new Date(at));
      await insert(id, null, at);
      const row = await requestByReference(prisma, id);
      expect(row).toMatchObject({ requestId: id, supportReference: id, accountId: buyer });
    }
    expect(await requestByReference(prisma, uuidV7(new Date(AT[1] as string)))).toBeNull();
    expect(await requestByReference(prisma, randomUUID())).toBeNull();
  });

  test("a stored reference is still unique with its start; no reference is stored as often as wanted", async () => {
    const o = old[0] as (typeof old)[number];
    await expect(insert(randomUUID(), o.ref, o.at)).rejects.toThrow(/support_reference_started_at/);
    await insert(randomUUID(), null, o.at);
    await insert(randomUUID(), null, o.at);
    const n = await c.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM inference_requests WHERE support_reference IS NULL AND started_at = $1",
      [o.at],
    );
    expect(n.rows[0]?.n).toBe(3);
  });
});
