import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { databaseBefore } from "../../../testkit/db.js";
import { insertMarketParties } from "../../../testkit/migration-rows.js";

/**
 * Issue 38's migration `payout_hold` on a database that has a video clear from before it: that
 * clear's share was credited to payable and stays so (`supplier_held` false, its line on
 * `supplier_payable`, the books balanced per account); from then on the payable balance may go
 * negative, the held one may not, held lines are accepted on an account, and where a clear's share
 * was credited is as append-only as its amounts.
 */
const TARGET = "20261203020000_payout_hold";
const AT = "2026-12-02T10:00:00.000Z";

describe("migration payout_hold", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const [buyer, supplier, key, offer, request, clear, funding] = Array.from({ length: 7 }, () => randomUUID());

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    await insertMarketParties(
      c,
      { buyer, supplier, key, offer },
      { buyer: { confirmed: 9_748_000 }, supplierPayable: 226_800, offer: { remaining: 9_370_000 } },
    );
    await c.query(
      `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents)
       VALUES ($1, $2, $3, 'video_queue', 'video', 'wan-2.6-text-to-video', 80)`,
      [request, randomUUID(), buyer],
    );
    await c.query(
      `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                           modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                           fee_micro_usdc, supplier_micro_usdc, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'wan-2.6-text-to-video', 'video', 40, 80, 630000, 252000, 25200, 226800, $7)`,
      [clear, request, buyer, supplier, offer, key, AT],
    );
    await c.query("BEGIN");
    await c.query(
      `INSERT INTO ledger_transactions (id, kind, idempotency_key, created_at) VALUES ($1, 'top_up', 'fund', $2)`,
      [funding, AT],
    );
    await c.query(
      `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
       VALUES ($1, NULL, 'external', 'top_up', -10000000, $2), ($1, $3, 'buyer_confirmed', 'top_up', 10000000, $2)`,
      [funding, AT, buyer],
    );
    await c.query("COMMIT");
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  test("a clear from before keeps its share payable; the new rules hold from then on", async () => {
    const before = await c.query(
      `SELECT id, account_id, book::text AS book, amount_micro_usdc::text AS amount FROM ledger_lines ORDER BY id`,
    );
    await db.migrate();

    const after = await c.query(
      `SELECT id, account_id, book::text AS book, amount_micro_usdc::text AS amount FROM ledger_lines ORDER BY id`,
    );
    expect(after.rows).toEqual(before.rows);
    expect(after.rows.find((l) => l.account_id === supplier)).toMatchObject({
      book: "supplier_payable",
      amount: "226800",
    });
    const row = await c.query("SELECT supplier_held FROM clears WHERE id = $1", [clear]);
    expect(row.rows[0]).toEqual({ supplier_held: false });
    const books = await c.query(
      `SELECT a.supplier_payable_micro_usdc::text AS payable, a.supplier_held_micro_usdc::text AS held,
              COALESCE((SELECT sum(amount_micro_usdc) FROM ledger_lines l
                         WHERE l.account_id = a.id AND l.book = 'supplier_payable'), 0)::text AS payable_lines
         FROM accounts a WHERE a.id = $1`,
      [supplier],
    );
    expect(books.rows[0]).toEqual({ payable: "226800", held: "0", payable_lines: "226800" });

    // a negative payable is a debt carried forward; a negative held balance is refused
    await c.query("UPDATE accounts SET supplier_payable_micro_usdc = -1 WHERE id = $1", [supplier]);
    await expect(
      c.query("UPDATE accounts SET supplier_held_micro_usdc = -1 WHERE id = $1", [supplier]),
    ).rejects.toThrow(/accounts_held_nonneg/);
    await c.query("UPDATE accounts SET supplier_payable_micro_usdc = 226800 WHERE id = $1", [supplier]);

    // held lines belong to an account; where a clear's share was credited cannot change
    await c.query("BEGIN");
    const j = await c.query(
      `INSERT INTO ledger_transactions (kind, clear_id, idempotency_key) VALUES ('release', $1, 'r') RETURNING id`,
      [clear],
    );
    await expect(
      c.query(
        `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc)
         VALUES ($1, NULL, 'supplier_held', 'release', -1)`,
        [j.rows[0]?.id],
      ),
    ).rejects.toThrow(/ledger_entries_account_book/);
    await c.query("ROLLBACK");
    await expect(c.query("UPDATE clears SET supplier_held = true WHERE id = $1", [clear])).rejects.toThrow(
      /append-only/,
    );
    await c.query("UPDATE clears SET refunded_at = now() WHERE id = $1", [clear]);
  });
});
