import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { databaseBefore } from "../../../testkit/db.js";

/**
 * The migration `monthly_partitions` on a database with rows from before it: requests and clears in
 * three months (one clear a millisecond past its request's month, a video clear whose held share was
 * released, a pay-per-request clear whose payment settled, a refunded clear, a request without a
 * clear), a video job and the journals that name clears. Every row is carried as it was, into its
 * month's partition; the ledger says the same; the keys hold the partition key, the foreign keys
 * that cannot reference a partitioned table are gone and the others kept; the append-only rule
 * still holds on every partition; a row of any time finds a partition.
 */
const TARGET = "20261206000000_monthly_partitions";

const SEP = "2026-09-10T08:00:00.000Z";
const OCT_END = "2026-10-31T23:59:59.999Z";
const NOV_START = "2026-11-01T00:00:00.000Z";

describe("migration monthly_partitions", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;
  const [buyer, supplier, payer, key, offer, payment, job] = [
    randomUUID(),
    randomUUID(),
    randomUUID(),
    randomUUID(),
    randomUUID(),
    randomUUID(),
    randomUUID(),
  ] as const;
  const requests = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()] as const;
  const clears = [randomUUID(), randomUUID(), randomUUID(), randomUUID()] as const;
  const rows = async (sql: string) => (await c.query(sql)).rows;

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
    await c.query(
      `INSERT INTO accounts (id, wallet_address, auth_provider) VALUES
         ($1, '0x00000000000000000000000000000000000000a1', 'siwe'),
         ($2, '0x00000000000000000000000000000000000000a2', 'siwe'),
         ($3, '0x00000000000000000000000000000000000000a3', 'x402')`,
      [buyer, supplier, payer],
    );
    await c.query(
      `INSERT INTO upstream_keys (id, account_id, label, secret_ciphertext, secret_iv, secret_tag, encryption_key_id,
                                  secret_fingerprint, secret_last4)
       VALUES ($1, $2, 'k', '\\x00', '\\x00', '\\x00', 'v1', 'fp', 'abcd')`,
      [key, supplier],
    );
    await c.query(
      `INSERT INTO offers (id, account_id, upstream_key_id, price_cents_per_dollar, quantity_micro_diem,
                           remaining_micro_diem, expires_at)
       VALUES ($1, $2, $3, 40, 100000000, 90000000, now() + interval '1 day')`,
      [offer, supplier, key],
    );
    await c.query(
      `INSERT INTO request_payments (id, account_id, route, status, payer_address, pay_to_address, asset_address,
                                     facilitator_address, permit2_nonce, max_micro_usdc, deadline, charge_micro_usdc,
                                     settled_micro_usdc, fingerprint, payload, requirements, charged_at, settled_at)
       VALUES ($1, $2, 'chat', 'settled', '0x00000000000000000000000000000000000000a3',
               '0x00000000000000000000000000000000000000f0', '0x00000000000000000000000000000000000000f1',
               '0x00000000000000000000000000000000000000f2', '7', 1000000, $3, 4000, 4000, 'fp', '{}', '{}', $3, $3)`,
      [payment, payer, NOV_START],
    );
    // requests: September, the last millisecond of October, November's first instant (a video job),
    // a paid-per-request one, a failed one without a clear
    const req = (id: string, account: string, at: string, extra: { modality?: string; route?: string; pay?: string }) =>
      c.query(
        `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents,
                                         status, started_at, cost_micro_usdc, payment_id, attempts)
         VALUES ($1, $2, $3, $4, $5, 'm', 80, 'succeeded', $6, 1, $7, '[{"ordinal": 1}]')`,
        [id, randomUUID(), account, extra.route ?? "chat", extra.modality ?? "text", at, extra.pay ?? null],
      );
    await req(requests[0], buyer, SEP, {});
    await req(requests[1], buyer, OCT_END, {});
    await req(requests[2], buyer, NOV_START, { modality: "video", route: "video_queue" });
    await req(requests[3], payer, NOV_START, { pay: payment });
    await req(requests[4], buyer, "2026-11-02T10:00:00.000Z", {});
    await c.query("UPDATE inference_requests SET status = 'failed', cost_micro_usdc = NULL WHERE id = $1", [
      requests[4],
    ]);
    const clear = (
      id: string,
      request: string,
      account: string,
      at: string,
      gross: number,
      extra: { held?: boolean; pay?: string; modality?: string },
    ) =>
      c.query(
        `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                             modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                             fee_micro_usdc, supplier_micro_usdc, supplier_held, payment_id, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'm', $7, 40, 80, $8::bigint * 5 / 2, $8, $8::bigint / 10,
                 $8::bigint - $8::bigint / 10, $9, $10, $11)`,
        [
          id,
          request,
          account,
          supplier,
          offer,
          key,
          extra.modality ?? "text",
          gross,
          extra.held ?? false,
          extra.pay ?? null,
          at,
        ],
      );
    await clear(clears[0], requests[0], buyer, SEP, 10_000, {});
    // its request started in October, its clear is November's (a clear is made at the request's end)
    await clear(clears[1], requests[1], buyer, "2026-11-01T00:00:00.500Z", 20_000, {});
    await clear(clears[2], requests[2], buyer, NOV_START, 30_000, {
      held: true,
      modality: "video",
    });
    await clear(clears[3], requests[3], payer, NOV_START, 4_000, { pay: payment });
    await c.query(
      `INSERT INTO video_jobs (id, request_id, account_id, upstream_key_id, model, queue_id, upstream_queue_id, status,
                               quote_micro_diem, charge_micro_usdc, request_body, created_at, delivered_at)
       VALUES ($1, $2, $3, $4, 'v', 'q-1', 'uq-1', 'delivered', 75000, 30000, '{}', $5, $5)`,
      [job, requests[2], buyer, key, NOV_START],
    );
    // journals: funding, the September clear's refund, the video share's release, the payment's cash
    const journal = async (
      kind: string,
      idem: string,
      at: string,
      refs: { clear?: string; payment?: string },
      lines: [string | null, string, string, number][],
    ) => {
      await c.query("BEGIN");
      const j = await c.query(
        `INSERT INTO ledger_transactions (kind, clear_id, request_payment_id, idempotency_key, created_at)
         VALUES ($1, $2, $3, $4, $5) RETURNING id`,
        [kind, refs.clear ?? null, refs.payment ?? null, idem, at],
      );
      for (const [account, book, entryKind, amount] of lines) {
        await c.query(
          `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
           VALUES ($1, $2, $3, $4, $5, $6)`,
          [j.rows[0]?.id, account, book, entryKind, amount, at],
        );
      }
      await c.query("COMMIT");
    };
    await journal("confirmation", "fund", SEP, {}, [
      [null, "external", "confirmation", -1_000_000],
      [buyer, "buyer_confirmed", "confirmation", 1_000_000],
    ]);
    await c.query("UPDATE clears SET refunded_at = $2 WHERE id = $1", [clears[0], "2026-09-11T00:00:00.000Z"]);
    await journal("refund", `refund:${clears[0]}`, "2026-09-11T00:00:00.000Z", { clear: clears[0] }, [
      [buyer, "buyer_confirmed", "refund", 10_000],
      [supplier, "supplier_payable", "refund", -9_000],
      [null, "platform_fee", "refund", -1_000],
    ]);
    await journal("release", `release:${clears[2]}:1`, "2026-11-01T01:00:00.000Z", { clear: clears[2] }, [
      [supplier, "supplier_held", "release", -27_000],
      [supplier, "supplier_payable", "release", 27_000],
    ]);
    await journal("request_payment", `request_payment:${payment}`, NOV_START, { payment }, [
      [null, "external", "request_payment", -4_000],
      [payer, "payment_receivable", "request_payment", 4_000],
    ]);
    // the balances are what the books say
    await c.query(
      `UPDATE accounts a SET
         confirmed_micro_usdc = COALESCE((SELECT sum(amount_micro_usdc) FROM ledger_lines l WHERE l.account_id = a.id AND l.book = 'buyer_confirmed'), 0),
         supplier_payable_micro_usdc = COALESCE((SELECT sum(amount_micro_usdc) FROM ledger_lines l WHERE l.account_id = a.id AND l.book = 'supplier_payable'), 0),
         supplier_held_micro_usdc = COALESCE((SELECT sum(amount_micro_usdc) FROM ledger_lines l WHERE l.account_id = a.id AND l.book = 'supplier_held'), 0)`,
    );
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  test("every row is carried into its month's partition and the ledger says the same", async () => {
    const before = {
      requests: await rows("SELECT to_jsonb(r) AS row FROM inference_requests r ORDER BY id"),
      clears: await rows("SELECT to_jsonb(c) AS row FROM clears c ORDER BY id"),
      lines: await rows("SELECT to_jsonb(l) AS row FROM ledger_lines l ORDER BY id"),
      accounts: await rows("SELECT to_jsonb(a) AS row FROM accounts a ORDER BY id"),
    };
    expect(before.lines.length).toBe(21);

    await db.migrate();

    expect(await rows("SELECT to_jsonb(r) AS row FROM inference_requests r ORDER BY id")).toEqual(before.requests);
    expect(await rows("SELECT to_jsonb(c) AS row FROM clears c ORDER BY id")).toEqual(before.clears);
    expect(await rows("SELECT to_jsonb(l) AS row FROM ledger_lines l ORDER BY id")).toEqual(before.lines);
    expect(await rows("SELECT to_jsonb(a) AS row FROM accounts a ORDER BY id")).toEqual(before.accounts);
    // the books balance per account and book, per journal, and in all
    expect(
      await rows(`SELECT transaction_id FROM ledger_lines GROUP BY transaction_id HAVING sum(amount_micro_usdc) <> 0`),
    ).toEqual([]);
    expect(
      await rows(`SELECT a.id FROM accounts a
                   WHERE a.confirmed_micro_usdc <> COALESCE((SELECT sum(amount_micro_usdc) FROM ledger_lines l
                                                              WHERE l.account_id = a.id AND l.book = 'buyer_confirmed'), 0)
                      OR a.supplier_payable_micro_usdc <> COALESCE((SELECT sum(amount_micro_usdc) FROM ledger_lines l
                                                              WHERE l.account_id = a.id AND l.book = 'supplier_payable'), 0)`),
    ).toEqual([]);

    // each row in its month: the request by its start, the clear by its own time
    const where = async (table: string, id: string) =>
      (await c.query(`SELECT tableoid::regclass::text AS p FROM ${table} WHERE id = $1`, [id])).rows[0]?.p;
    expect(await where("inference_requests", requests[0])).toBe("inference_requests_y2026m09");
    expect(await where("inference_requests", requests[1])).toBe("inference_requests_y2026m10");
    expect(await where("inference_requests", requests[2])).toBe("inference_requests_y2026m11");
    expect(await where("clears", clears[0])).toBe("clears_y2026m09");
    expect(await where("clears", clears[1])).toBe("clears_y2026m11");
    // the months from the oldest row's to the next one, one below them for anything older, a default
    const parts = (await rows(`SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
                                 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                                WHERE i.inhparent = 'clears'::regclass ORDER BY 1`)) as {
      name: string;
      bound: string;
    }[];
    const names = parts.map((p) => p.name);
    expect(names).toEqual(
      expect.arrayContaining(["clears_before", "clears_default", "clears_y2026m09", "clears_y2026m10"]),
    );
    expect(parts.find((p) => p.name === "clears_before")?.bound).toMatch(/FROM \(MINVALUE\) TO \('2026-09-01/);
    const now = new Date();
    const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    expect(names).toContain(`clears_y${next.getUTCFullYear()}m${String(next.getUTCMonth() + 1).padStart(2, "0")}`);
  });

  test("keys carry the partition key; foreign keys to the partitioned tables are gone, the others kept", async () => {
    const cons =
      (await rows(`SELECT conname AS name, contype AS type, pg_get_constraintdef(oid) AS def FROM pg_constraint
                                WHERE conrelid IN ('inference_requests'::regclass, 'clears'::regclass)
                                   OR confrelid IN ('inference_requests'::regclass, 'clears'::regclass)
                                ORDER BY 1`)) as { name: string; type: string; def: string }[];
    const def = (name: string) => cons.find((x) => x.name === name)?.def;
    expect(def("inference_requests_pkey")).toBe("PRIMARY KEY (id, started_at)");
    expect(def("inference_requests_support_reference_started_at_key")).toBe("UNIQUE (support_reference, started_at)");
    expect(def("clears_pkey")).toBe("PRIMARY KEY (id, created_at)");
    for (const gone of ["clears_request_id_fkey", "video_jobs_request_id_fkey", "ledger_transactions_clear_id_fkey"]) {
      expect(def(gone), gone).toBeUndefined();
    }
    for (const kept of [
      "clears_buyer_account_id_fkey",
      "clears_supplier_account_id_fkey",
      "clears_offer_id_fkey",
      "clears_upstream_key_id_fkey",
      "clears_payment_id_fkey",
      "inference_requests_account_id_fkey",
      "inference_requests_api_key_id_fkey",
      "inference_requests_payment_id_fkey",
      "clears_split",
      "clears_within_ceiling",
      "inference_requests_attempts_array",
    ]) {
      expect(def(kept), kept).toBeDefined();
    }
    // the indexes the readers use, on every partition
    const idx = (await rows(`SELECT indexrelid::regclass::text AS name FROM pg_index
                               WHERE indrelid = 'inference_requests_y2026m10'::regclass ORDER BY 1`)) as {
      name: string;
    }[];
    expect(idx.map((i) => i.name)).toEqual(
      expect.arrayContaining([
        "inference_requests_y2026m10_account_id_started_at_id_idx",
        "inference_requests_y2026m10_support_reference_started_at_key",
        "inference_requests_y2026m10_api_key_id_started_at_idx",
      ]),
    );
    // a second record of one request (same id, same start) is refused: what keeps one clear per request
    await expect(
      c.query(
        `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents, started_at)
         SELECT id, gen_random_uuid(), account_id, route, modality, model, max_price_cents, started_at
           FROM inference_requests WHERE id = $1`,
        [requests[0]],
      ),
    ).rejects.toThrow(/inference_requests_y2026m09_pkey|duplicate key/);
  });

  test("a clear stays append-only on every partition; a row of any time finds a partition", async () => {
    for (const id of clears) {
      await expect(
        c.query("UPDATE clears SET gross_micro_usdc = gross_micro_usdc + 1 WHERE id = $1", [id]),
      ).rejects.toThrow(/append-only/);
      await expect(c.query("DELETE FROM clears WHERE id = $1", [id])).rejects.toThrow(/append-only/);
    }
    await c.query("UPDATE clears SET refunded_at = refunded_at WHERE id = $1", [clears[0]]);
    const place = async (at: string) => {
      const id = randomUUID();
      await c.query(
        `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents, started_at)
         VALUES ($1, gen_random_uuid(), $2, 'chat', 'text', 'm', 80, $3)`,
        [id, buyer, at],
      );
      return (await c.query("SELECT tableoid::regclass::text AS p FROM inference_requests WHERE id = $1", [id])).rows[0]
        ?.p;
    };
    expect(await place("2019-01-01T00:00:00.000Z")).toBe("inference_requests_before");
    expect(await place("2099-01-01T00:00:00.000Z")).toBe("inference_requests_default");
    expect(await place(OCT_END)).toBe("inference_requests_y2026m10");
  });
});
