import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { applyFunctions } from "../../../src/adapters/sql-functions.js";
import { databaseBefore } from "../../../testkit/db.js";
import { insertMarketParties } from "../../../testkit/migration-rows.js";

/**
 * Issue 43's migration `one_append` on a database with balances, a clear and its books from before
 * it: every existing clear was applied by the ending that wrote it, so none is unfolded; the live
 * figures equal the columns, and the books check passes with the stored functions of today (so the
 * migrations after it run too).
 */
const TARGET = "20261209000000_one_append";
const AT = "2026-12-02T10:00:00.000Z";

describe("migration one_append", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const [buyer, supplier, key, offer, request, clear, funding, holder] = Array.from({ length: 8 }, () => randomUUID());

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    await insertMarketParties(
      c,
      { buyer, supplier, key, offer },
      {
        buyer: { confirmed: 9_748_000, reserved: 1000 },
        supplierPayable: 226_800,
        keyBalance: 99_370_000,
        offer: { remaining: 9_370_000, reserved: 500 },
      },
    );
    // a live holder with slices, as a router process left them
    await c.query("INSERT INTO escrow_holders (id, expires_at) VALUES ($1, now() + interval '1 minute')", [holder]);
    await c.query("INSERT INTO buyer_escrows (account_id, holder, amount_micro_usdc) VALUES ($1, $2, 1000)", [
      buyer,
      holder,
    ]);
    await c.query("INSERT INTO offer_escrows (offer_id, holder, amount_micro_diem) VALUES ($1, $2, 500)", [
      offer,
      holder,
    ]);
    await c.query(
      `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents,
                                       started_at)
       VALUES ($1, $2, $3, 'chat', 'text', 'zai-org-glm-5-1', 80, $4)`,
      [request, randomUUID(), buyer, AT],
    );
    await c.query(
      `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                           modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                           fee_micro_usdc, supplier_micro_usdc, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'zai-org-glm-5-1', 'text', 40, 80, 630000, 252000, 25200, 226800, $7)`,
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

  test("nothing is unfolded after it: the live figures are the columns and the books balance", async () => {
    await db.migrateToLatest();
    expect(await applyFunctions(db.url)).toBe("applied");

    const cl = await c.query("SELECT holder, seq, api_key_id, spend_day FROM clears WHERE id = $1", [clear]);
    expect(cl.rows[0]).toEqual({ holder: null, seq: null, api_key_id: null, spend_day: null });
    const h = await c.query("SELECT folded_seq::text AS seq FROM escrow_holders WHERE id = $1", [holder]);
    expect(h.rows[0]).toEqual({ seq: "0" });
    expect((await c.query("SELECT * FROM svc_unfolded()")).rows).toEqual([]);
    const live = await c.query(
      `SELECT confirmed::text, reserved::text, payable::text, held::text FROM svc_account_live($1)
       UNION ALL SELECT confirmed::text, reserved::text, payable::text, held::text FROM svc_account_live($2)`,
      [buyer, supplier],
    );
    expect(live.rows).toEqual([
      { confirmed: "9748000", reserved: "1000", payable: "0", held: "0" },
      { confirmed: "0", reserved: "0", payable: "226800", held: "0" },
    ]);
    expect((await c.query("SELECT rule, subject FROM svc_books_check()")).rows).toEqual([]);
    // the holder's fold finds nothing to apply, and its slices stay as they were
    expect((await c.query("SELECT * FROM svc_fold_holder($1)", [holder])).rows).toEqual([]);
    const slices = await c.query(
      `SELECT (SELECT amount_micro_usdc::text FROM buyer_escrows WHERE holder = $1) AS buyer,
              (SELECT amount_micro_diem::text FROM offer_escrows WHERE holder = $1) AS offer`,
      [holder],
    );
    expect(slices.rows[0]).toEqual({ buyer: "1000", offer: "500" });
  });
});
