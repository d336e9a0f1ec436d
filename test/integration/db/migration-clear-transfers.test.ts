import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { databaseBefore } from "../../../testkit/db.js";
import { insertMarketParties } from "../../../testkit/migration-rows.js";

/**
 * Issue 32's migration `clear_transfers` carries a database's clear journals over: the migrations
 * before it are applied to an empty database, a clear is written the old way (its row, a journal
 * and three entries) beside a funding journal, then the migration runs. A journal that says
 * something other than its clear stops the migration with nothing changed; once it agrees, the
 * clear's journal is gone, `ledger_lines` shows the same lines (derived from the clear) and the
 * funding journal as it was, and the books still balance per account and in total.
 */
const TARGET = "20261202000000_clear_transfers";
const AT = "2026-11-26T10:00:00.000Z";

describe("migration clear_transfers", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const [buyer, supplier, key, offer, request, clear, journal, funding] = Array.from({ length: 8 }, () => randomUUID());

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;

    await insertMarketParties(
      c,
      { buyer, supplier, key, offer },
      { buyer: { confirmed: 9_000_000 }, supplierPayable: 900_000, offer: { price: 50, remaining: 8_000_000 } },
    );
    await c.query(
      `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents)
       VALUES ($1, $2, $3, 'chat', 'text', 'm', 50)`,
      [request, randomUUID(), buyer],
    );
    await c.query(
      `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                           modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                           fee_micro_usdc, supplier_micro_usdc, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'm', 'text', 50, 50, 2000000, 1000000, 100000, 900000, $7)`,
      [clear, request, buyer, supplier, offer, key, AT],
    );
    // funding: 10 USDC in from outside, then the clear's journal as the ending wrote it
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
    await c.query(
      `INSERT INTO ledger_transactions (id, kind, clear_id, idempotency_key, created_at)
       VALUES ($1, 'clear', $2, $3, $4)`,
      [journal, clear, `clear:${request}`, AT],
    );
    await c.query("COMMIT");
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  const migrate = () => db.migrate();
  const entries = (supplierShare: number) =>
    c.query(
      `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
       VALUES ($1, $2, 'buyer_confirmed', 'buyer_debit', -1000000, $4),
              ($1, $3, 'supplier_payable', 'supplier_credit', $5, $4),
              ($1, NULL, 'platform_fee', 'platform_fee', $6, $4)`,
      [journal, buyer, supplier, AT, supplierShare, 1000000 - supplierShare],
    );

  test("a clear journal that differs from its clear stops the migration; nothing changes", async () => {
    await entries(800_000); // balanced, but not the clear's split (900,000 / 100,000)
    await expect(migrate()).rejects.toThrow(/differ from what their clears imply/);
    const left = await c.query("SELECT to_regclass('ledger_lines') AS v, (SELECT count(*) FROM ledger_entries) AS n");
    expect(left.rows[0]).toEqual({ v: null, n: "5" });
    // put it right for the next test: the ledger is append-only, so through its owner's hands
    await c.query("ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only");
    await c.query("DELETE FROM ledger_entries WHERE transaction_id = $1", [journal]);
    await c.query("ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only");
  });

  test("an agreeing journal is carried over: the clear's lines derive from it, the books still balance", async () => {
    await entries(900_000);
    const before = await c.query(
      `SELECT account_id, book, kind, amount_micro_usdc::text AS amount, created_at
         FROM ledger_entries ORDER BY book, amount_micro_usdc`,
    );

    await migrate();

    const journals = await c.query("SELECT id, kind FROM ledger_transactions ORDER BY kind");
    expect(journals.rows).toEqual([{ id: funding, kind: "top_up" }]);
    const lines = await c.query(
      `SELECT id, transaction_id, transaction_kind, account_id, book, kind, amount_micro_usdc::text AS amount, created_at
         FROM ledger_lines ORDER BY book, amount_micro_usdc`,
    );
    // the same lines as before, the clear's now derived: transaction = the clear, ids fixed by clear and leg
    expect(
      lines.rows.map(({ account_id, book, kind, amount, created_at }) => ({
        account_id,
        book,
        kind,
        amount,
        created_at,
      })),
    ).toEqual(before.rows);
    const derived = lines.rows.filter((l) => l.transaction_kind === "clear");
    expect(derived.map((l) => l.transaction_id)).toEqual([clear, clear, clear]);
    const ids = await c.query(
      `SELECT md5($1 || ':buyer')::uuid AS b, md5($1 || ':supplier')::uuid AS s, md5($1 || ':fee')::uuid AS f`,
      [clear],
    );
    expect(new Set(derived.map((l) => l.id))).toEqual(new Set(Object.values(ids.rows[0])));

    const books = await c.query(
      `SELECT a.id,
              a.confirmed_micro_usdc::text AS confirmed,
              a.supplier_payable_micro_usdc::text AS payable,
              COALESCE((SELECT sum(amount_micro_usdc) FROM ledger_lines l
                         WHERE l.account_id = a.id AND l.book = 'buyer_confirmed'), 0)::text AS confirmed_lines,
              COALESCE((SELECT sum(amount_micro_usdc) FROM ledger_lines l
                         WHERE l.account_id = a.id AND l.book = 'supplier_payable'), 0)::text AS payable_lines
         FROM accounts a`,
    );
    for (const a of books.rows) {
      expect(a.confirmed_lines).toBe(a.confirmed);
      expect(a.payable_lines).toBe(a.payable);
    }
    const total = await c.query("SELECT sum(amount_micro_usdc)::text AS t FROM ledger_lines");
    expect(total.rows[0]?.t).toBe("0");

    // from now on: no clear journal, and a clear's money is append-only
    await expect(
      c.query(`INSERT INTO ledger_transactions (kind, clear_id, idempotency_key) VALUES ('clear', $1, 'again')`, [
        clear,
      ]),
    ).rejects.toThrow(/ledger_transactions_no_clear_journal/);
    await expect(c.query("UPDATE clears SET gross_micro_usdc = 0 WHERE id = $1", [clear])).rejects.toThrow(
      /append-only/,
    );
    await expect(c.query("DELETE FROM clears WHERE id = $1", [clear])).rejects.toThrow(/append-only/);
    await c.query("UPDATE clears SET refunded_at = now() WHERE id = $1", [clear]);
  });
});
