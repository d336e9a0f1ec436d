import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { databaseBefore } from "../../../testkit/db.js";
import { partitionIndexes, partitionsOf, planOf } from "../../../testkit/partition-indexes.js";

/**
 * The migration `append_indexes` on a database with requests in it (two months and the DEFAULT
 * partition; with and without a payment, with and without an API key): the indexes on
 * `inference_requests.payment_id` and `(api_key_id, started_at)` become partial (`IS NOT NULL`) on
 * the table and on every partition, old and new, holding an entry only for the rows that have the
 * column; the reads that use them (`column = value`, as a literal and as a parameter of a generic
 * plan) still use them and answer the same rows; the payment's foreign key, which looks requests up
 * through its index, still restricts a payment's deletion (the key's foreign key is gone since
 * migration append_names_without_locks, and a key is never deleted).
 */
const TARGET = "20261215000000_append_indexes";
// now is before 2027: November and December 2026 have month partitions, March 2027 falls in DEFAULT
const STARTS = ["2026-11-20T10:00:00.000Z", "2026-12-02T10:00:00.000Z", "2027-03-01T10:00:00.000Z"];

describe("migration append_indexes", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const buyer = randomUUID();
  const payer = randomUUID();
  const key = randomUUID();
  const otherKey = randomUUID();
  const payment = randomUUID();
  // per start: a request with a key, one with a payment (no key), one with neither
  const keyed = STARTS.map(() => randomUUID());
  const paid = STARTS.map(() => randomUUID());
  const bare = STARTS.map(() => randomUUID());
  const rows = async (sql: string, params: unknown[] = []) => (await c.query(sql, params)).rows;

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    await c.query(
      `INSERT INTO accounts (id, wallet_address, auth_provider) VALUES
         ($1, '0x00000000000000000000000000000000000000b1', 'siwe'),
         ($2, '0x00000000000000000000000000000000000000b2', 'x402')`,
      [buyer, payer],
    );
    await c.query(
      `INSERT INTO api_keys (id, account_id, name, key_prefix, key_hash, source)
       VALUES ($1, $3, 'one', 'p1', 'h1', 'agent'), ($2, $3, 'two', 'p2', 'h2', 'agent')`,
      [key, otherKey, buyer],
    );
    await c.query(
      `INSERT INTO request_payments (id, account_id, route, status, payer_address, pay_to_address, asset_address,
                                     facilitator_address, permit2_nonce, max_micro_usdc, deadline, fingerprint,
                                     payload, requirements)
       VALUES ($1, $2, 'chat', 'open', '0x00000000000000000000000000000000000000b2',
               '0x00000000000000000000000000000000000000f0', '0x00000000000000000000000000000000000000f1',
               '0x00000000000000000000000000000000000000f2', '9', 1000000, now() + interval '1 hour', 'fp', '{}', '{}')`,
      [payment, payer],
    );
    const insert = (id: string, account: string, at: string, apiKey: string | null, pay: string | null) =>
      c.query(
        `INSERT INTO inference_requests (id, support_reference, account_id, api_key_id, route, modality, model,
                                         max_price_cents, started_at, payment_id)
         VALUES ($1, gen_random_uuid(), $2, $3, 'chat', 'text', 'zai-org-glm-5-1', 80, $4, $5)`,
        [id, account, apiKey, at, pay],
      );
    for (const [i, at] of STARTS.entries()) {
      await insert(keyed[i] as string, buyer, at, key, null);
      await insert(paid[i] as string, payer, at, null, payment);
      await insert(bare[i] as string, buyer, at, null, null);
    }
    await db.migrateToLatest();
    await c.query("ANALYZE inference_requests");
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  /** Each index of the table or of one of its partitions whose name ends so: its table, definition, entries. */
  const indexes = (suffix: string) => partitionIndexes(c, "inference_requests", suffix);

  test("both indexes are partial on the table and on every partition, an entry only per row with the column", async () => {
    const partitions = await partitionsOf(c, "inference_requests");
    expect(partitions).toEqual(
      expect.arrayContaining([
        "inference_requests_default",
        "inference_requests_y2026m11",
        "inference_requests_y2026m12",
      ]),
    );
    for (const [suffix, where, columns] of [
      ["payment_id_idx", "WHERE (payment_id IS NOT NULL)", "(payment_id)"],
      ["api_key_id_started_at_idx", "WHERE (api_key_id IS NOT NULL)", "(api_key_id, started_at)"],
    ] as const) {
      const found = await indexes(suffix);
      expect(found.map((f) => f.table).sort()).toEqual(["inference_requests", ...partitions].sort());
      for (const f of found) expect(f.def, f.table).toContain(`USING btree ${columns} ${where}`);
      // one request of each kind per partition that holds rows: the keyed one, or the paid one
      const entries = Object.fromEntries(
        found.filter((f) => f.table !== "inference_requests").map((f) => [f.table, f.entries]),
      );
      expect(entries).toMatchObject({
        inference_requests_y2026m11: 1,
        inference_requests_y2026m12: 1,
        inference_requests_default: 1,
      });
    }
    // the history's index and the keys are as they were
    expect((await indexes("account_id_started_at_id_idx"))[0]?.def).not.toContain("WHERE");
    expect((await indexes("_pkey"))[0]?.def).toContain("(id, started_at)");
  });

  test("a month made later gets both partial indexes", async () => {
    await c.query(
      `CREATE TABLE inference_requests_y2030m01 PARTITION OF inference_requests
         FOR VALUES FROM ('2030-01-01 00:00:00+00') TO ('2030-02-01 00:00:00+00')`,
    );
    const defs = (
      await rows(
        "SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indrelid = 'inference_requests_y2030m01'::regclass",
      )
    ).map((r) => r.def as string);
    expect(defs).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/\(payment_id\) WHERE \(payment_id IS NOT NULL\)$/),
        expect.stringMatching(/\(api_key_id, started_at\) WHERE \(api_key_id IS NOT NULL\)$/),
      ]),
    );
  });

  test("reads by payment and by key use the partial indexes, with a value and with a parameter, and answer the same", async () => {
    const plan = (sql: string) => planOf(c, sql);
    await c.query("BEGIN");
    try {
      // the tables are tiny: without this the planner scans them, which says nothing about the index
      await c.query("SET LOCAL enable_seqscan = off");
      await c.query("SET LOCAL plan_cache_mode = force_generic_plan");
      const byPayment = `SELECT id FROM inference_requests WHERE payment_id = '${payment}'::uuid`;
      expect(await plan(byPayment)).toMatch(/Index (Only )?Scan using inference_requests_y2026m11_payment_id_idx/);
      await c.query("PREPARE by_payment(uuid) AS SELECT id::text FROM inference_requests WHERE payment_id = $1");
      expect(await plan(`EXECUTE by_payment('${payment}')`)).toMatch(
        /Index (Only )?Scan using inference_requests_\w+_payment_id_idx/,
      );
      const byKey = `SELECT id FROM inference_requests WHERE api_key_id = '${key}'::uuid AND started_at >= '2026-12-01'
                     ORDER BY started_at`;
      expect(await plan(byKey)).toMatch(/Index Scan using inference_requests_y2026m12_api_key_id_started_at_idx/);
      await c.query(
        `PREPARE by_key(uuid) AS SELECT id::text FROM inference_requests WHERE api_key_id = $1 ORDER BY started_at`,
      );
      expect(await plan(`EXECUTE by_key('${key}')`)).toMatch(
        /Index Scan using inference_requests_\w+_api_key_id_started_at_idx/,
      );
      expect((await rows(`EXECUTE by_payment('${payment}')`)).map((r) => r.id).sort()).toEqual([...paid].sort());
      expect((await rows(`EXECUTE by_key('${key}')`)).map((r) => r.id)).toEqual(keyed);
      expect(await rows(`EXECUTE by_key('${otherKey}')`)).toEqual([]);
    } finally {
      await c.query("ROLLBACK");
      await c.query("DEALLOCATE ALL");
    }
  });

  test("the payment's foreign key still finds its requests: a payment in use is kept; a key is never deleted", async () => {
    await expect(c.query("DELETE FROM request_payments WHERE id = $1", [payment])).rejects.toThrow(
      /inference_requests_payment_id_fkey/,
    );
    await expect(c.query("DELETE FROM api_keys WHERE id = $1", [key])).rejects.toThrow(/ledger/);
    const left = await rows(
      "SELECT id::text, api_key_id::text FROM inference_requests WHERE id = ANY($1::uuid[]) ORDER BY started_at",
      [keyed],
    );
    expect(left).toEqual(keyed.map((id) => ({ id, api_key_id: key })));
  });
});
