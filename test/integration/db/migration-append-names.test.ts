import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { applyFunctions } from "../../../src/adapters/sql-functions.js";
import { databaseBefore } from "../../../testkit/db.js";
import { insertClearRow, insertMarketParties, type MarketParties } from "../../../testkit/migration-rows.js";

/**
 * The migration `append_names_without_locks` on a database from before it (docs/decisions.md "The
 * append names its parties without locking them"): the foreign keys from a request and its clear to
 * the accounts, keys and offers they name are gone (the payment's stay), so no append locks those
 * rows; none of those rows can be deleted; the books check names a clear whose parties are not on
 * record or do not match its offer, and none of the clears written before.
 */
const TARGET = "20270103000000_append_names_without_locks";
const AT = "2026-12-02T10:20:00.000Z";

describe("migration append_names_without_locks", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const [buyer, supplier, key, offer] = Array.from({ length: 4 }, () => randomUUID());
  const parties = { buyer, supplier, key, offer } as MarketParties;
  const before = [randomUUID(), randomUUID()];
  const apiKey = randomUUID();
  const rows = async (sql: string, params: unknown[] = []) => (await c.query(sql, params)).rows;
  const foreignKeys = () =>
    rows(`SELECT conname AS name FROM pg_constraint
           WHERE contype = 'f' AND conparentid = 0
             AND conrelid IN ('inference_requests'::regclass, 'clears'::regclass) ORDER BY 1`);
  /** a clear of 0.001 DIEM at 40 cents, written as folded */
  const clear = (id: string, apiKey?: string) => ({
    id,
    holder: null,
    seq: null,
    burn: 1_000,
    price: 40,
    refunded: false,
    at: AT,
    modality: "text",
    apiKey,
  });
  const unnamed = () => rows("SELECT subject FROM svc_books_check() WHERE rule = 'clear_parties' ORDER BY subject");

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    await insertMarketParties(c, { buyer, supplier, key, offer });
    await c.query(
      `INSERT INTO api_keys (id, account_id, name, key_prefix, key_hash, source) VALUES ($1, $2, 'one', 'p1', 'h1', 'agent')`,
      [apiKey, buyer],
    );
    for (const id of before) await insertClearRow(c, parties, clear(id, apiKey));
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  test("drops the foreign keys to accounts, keys and offers; keeps the payment's", async () => {
    expect((await foreignKeys()).map((r) => r.name)).toEqual([
      "clears_buyer_account_id_fkey",
      "clears_offer_id_fkey",
      "clears_payment_id_fkey",
      "clears_supplier_account_id_fkey",
      "clears_upstream_key_id_fkey",
      "inference_requests_account_id_fkey",
      "inference_requests_api_key_id_fkey",
      "inference_requests_payment_id_fkey",
    ]);
    await db.migrate();
    expect((await foreignKeys()).map((r) => r.name)).toEqual([
      "clears_payment_id_fkey",
      "inference_requests_payment_id_fkey",
    ]);
    expect(await applyFunctions(db.url)).toBe("applied");
  });

  test("an account, an API key, an offer and an upstream key are never deleted", async () => {
    for (const [table, id] of [
      ["offers", offer],
      ["upstream_keys", key],
      ["api_keys", apiKey],
      ["accounts", buyer],
    ] as const) {
      await expect(c.query(`DELETE FROM ${table} WHERE id = $1`, [id]), table).rejects.toThrow(
        new RegExp(`names its ${table} rows: .* never deleted`),
      );
      expect(await rows(`SELECT id FROM ${table} WHERE id = $1`, [id]), table).toHaveLength(1);
    }
  });

  test("the books check names a clear whose parties are not on record or not its offer's, and no other", async () => {
    expect(await unnamed()).toEqual([]);
    const [gone, stranger, wrongKey, othersKey] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    // a buyer not on record
    await insertClearRow(c, { ...parties, buyer: randomUUID() }, clear(gone));
    // a supplier other than the offer's (an account on record)
    await insertClearRow(c, { ...parties, supplier: buyer as string }, clear(stranger));
    // a supplier key other than the offer's
    await insertClearRow(c, { ...parties, key: randomUUID() }, clear(wrongKey));
    // an API key of another account (the buyer's key, on a clear of the supplier's as buyer)
    await insertClearRow(c, { ...parties }, { ...clear(othersKey, apiKey), buyer: supplier as string });
    expect((await unnamed()).map((r) => r.subject)).toEqual([gone, stranger, wrongKey, othersKey].sort());
  });
});
