import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { applyFunctions } from "../../../src/adapters/sql-functions.js";
import { databaseBefore } from "../../../testkit/db.js";
import { insertMarketParties } from "../../../testkit/migration-rows.js";

/**
 * The migration `slice_charged` on a database where a holder's clears are appended and not yet
 * folded (a router process was running): each slice starts counting exactly its unfolded charges, so
 * the live figures are unchanged, the books check passes, and the holder's fold applies the clears
 * and empties the counts. A clear paid per request counts on the offer's slice, not the buyer's.
 */
const TARGET = "20261210000000_slice_charged";
const AT = "2026-12-09T10:00:00.000Z";

describe("migration slice_charged", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const [buyer, supplier, key, offer, holder, funding] = Array.from({ length: 6 }, () => randomUUID());
  const requests = [randomUUID(), randomUUID()];
  const clears = [randomUUID(), randomUUID()];

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    // the buyer's 10 USDC, of which the holder's slice reserves 1; two clears of 0.2 and 0.1 USDC
    // (burns of 0.5 and 0.25 DIEM) appended and not yet folded: the rows do not hold them yet
    await insertMarketParties(
      c,
      { buyer, supplier, key, offer },
      { buyer: { confirmed: 10_000_000, reserved: 1_000_000 }, keyBalance: 10_000_000, offer: { reserved: 2_000_000 } },
    );
    await c.query("INSERT INTO escrow_holders (id, expires_at) VALUES ($1, now() + interval '1 minute')", [holder]);
    await c.query("INSERT INTO buyer_escrows (account_id, holder, amount_micro_usdc) VALUES ($1, $2, 1000000)", [
      buyer,
      holder,
    ]);
    await c.query("INSERT INTO offer_escrows (offer_id, holder, amount_micro_diem) VALUES ($1, $2, 2000000)", [
      offer,
      holder,
    ]);
    const charges: [number, number][] = [
      [200000, 500000],
      [100000, 250000],
    ];
    for (const [i, [gross, burn]] of charges.entries()) {
      await c.query(
        `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents,
                                         started_at)
         VALUES ($1, $2, $3, 'chat', 'text', 'zai-org-glm-5-1', 80, $4)`,
        [requests[i], randomUUID(), buyer, AT],
      );
      await c.query(
        `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                             modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                             fee_micro_usdc, supplier_micro_usdc, created_at, holder, seq, spend_day)
         VALUES ($1, $2, $3, $4, $5, $6, 'zai-org-glm-5-1', 'text', 40, 80, $7, $8, $9, $10, $11::timestamptz, $12,
                 nextval('clear_seq'), $11::timestamptz::date)`,
        [clears[i], requests[i], buyer, supplier, offer, key, burn, gross, gross / 10, gross - gross / 10, AT, holder],
      );
    }
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

  const slices = async () =>
    (
      await c.query(
        `SELECT (SELECT amount_micro_usdc::text || '/' || charged_micro_usdc::text FROM buyer_escrows WHERE holder = $1) AS buyer,
                (SELECT amount_micro_diem::text || '/' || charged_micro_diem::text FROM offer_escrows WHERE holder = $1) AS offer`,
        [holder],
      )
    ).rows[0];

  test("each slice counts its unfolded charges; live figures unchanged; the fold empties the counts", async () => {
    await db.migrateToLatest();
    expect(await applyFunctions(db.url)).toBe("applied");

    expect(await slices()).toEqual({ buyer: "1000000/300000", offer: "2000000/750000" });
    const live = async () =>
      (
        await c.query(
          `SELECT l.confirmed::text, l.reserved::text,
                  (SELECT (o.remaining_micro_diem - COALESCE(u.burn, 0))::text FROM offers o
                     LEFT JOIN svc_offers_unfolded(ARRAY[o.id]) u ON u.offer = o.id WHERE o.id = $2) AS remaining
             FROM svc_account_live($1) l`,
          [buyer, offer],
        )
      ).rows[0];
    expect(await live()).toEqual({ confirmed: "9700000", reserved: "700000", remaining: "9250000" });
    expect((await c.query("SELECT rule, subject FROM svc_books_check()")).rows).toEqual([]);

    await c.query("SELECT * FROM svc_fold_holder($1)", [holder]);
    expect(await slices()).toEqual({ buyer: "700000/0", offer: "1250000/0" });
    expect(await live()).toEqual({ confirmed: "9700000", reserved: "700000", remaining: "9250000" });
    const rows = await c.query(
      `SELECT a.confirmed_micro_usdc::text AS confirmed, o.remaining_micro_diem::text AS remaining
         FROM accounts a, offers o WHERE a.id = $1 AND o.id = $2`,
      [buyer, offer],
    );
    expect(rows.rows[0]).toEqual({ confirmed: "9700000", remaining: "9250000" });
    expect((await c.query("SELECT rule, subject FROM svc_books_check()")).rows).toEqual([]);
  });

  test("a slice cannot count more than it holds", async () => {
    await expect(
      c.query("UPDATE buyer_escrows SET charged_micro_usdc = amount_micro_usdc + 1 WHERE holder = $1", [holder]),
    ).rejects.toThrow(/buyer_escrows_charged_check/);
  });
});
