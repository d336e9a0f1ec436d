import { randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { databaseBefore } from "../../../testkit/db.js";

/**
 * Issue 32's migration `attempts_in_request` carries a database's attempts over: the migrations
 * before it are applied to an empty database, a request with two attempt rows is written the old
 * way, then the migration runs, and the request's `attempts` column holds both, in order, with
 * every field.
 */
const TARGET = "20261201000000_attempts_in_request";

describe("migration attempts_in_request", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>>;
  let c: pg.Client;

  beforeAll(async () => {
    db = await databaseBefore(TARGET);
    c = db.client;
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  test("each request's attempt rows become its attempts column, in order; the table is gone", async () => {
    const [account, key, offer, request, other] = [
      randomUUID(),
      randomUUID(),
      randomUUID(),
      randomUUID(),
      randomUUID(),
    ];
    await c.query(
      `INSERT INTO accounts (id, wallet_address, auth_provider) VALUES ($1, '0x00000000000000000000000000000000000000ab', 'siwe')`,
      [account],
    );
    await c.query(
      `INSERT INTO upstream_keys (id, account_id, label, secret_ciphertext, secret_iv, secret_tag, encryption_key_id,
                                  secret_fingerprint, secret_last4)
       VALUES ($1, $2, 'k', '\\x00', '\\x00', '\\x00', 'v1', 'fp', 'abcd')`,
      [key, account],
    );
    await c.query(
      `INSERT INTO offers (id, account_id, upstream_key_id, price_cents_per_dollar, quantity_micro_diem,
                           remaining_micro_diem, expires_at)
       VALUES ($1, $2, $3, 40, 1000000, 1000000, now() + interval '1 day')`,
      [offer, account, key],
    );
    for (const id of [request, other]) {
      await c.query(
        `INSERT INTO inference_requests (id, support_reference, account_id, route, modality, model, max_price_cents)
         VALUES ($1, $2, $3, 'chat', 'text', 'm', 50)`,
        [id, randomUUID(), account],
      );
    }
    // out of order on purpose: the column is in ordinal order
    await c.query(
      `INSERT INTO inference_attempts (request_id, ordinal, upstream_key_id, offer_id, price_cents, outcome,
                                       upstream_status, error_kind, started_at, ended_at)
       VALUES ($1, 2, $2, $3, 41, 'succeeded', 200, NULL, '2026-11-26T10:00:01Z', '2026-11-26T10:00:02Z'),
              ($1, 1, $2, $3, 40, 'retryable_failure', 503, 'http_503', '2026-11-26T10:00:00Z', '2026-11-26T10:00:01Z')`,
      [request, key, offer],
    );

    await db.migrate();

    const rows = await c.query<{ id: string; attempts: unknown[] }>(
      "SELECT id, attempts FROM inference_requests WHERE id = ANY($1::uuid[])",
      [[request, other]],
    );
    const byId = new Map(rows.rows.map((r) => [r.id, r.attempts]));
    expect(byId.get(other)).toEqual([]);
    expect(byId.get(request)).toEqual([
      {
        ordinal: 1,
        upstreamKeyId: key,
        offerId: offer,
        priceCents: 40,
        outcome: "retryable_failure",
        upstreamStatus: 503,
        errorKind: "http_503",
        startedAt: "2026-11-26T10:00:00+00:00",
        endedAt: "2026-11-26T10:00:01+00:00",
      },
      {
        ordinal: 2,
        upstreamKeyId: key,
        offerId: offer,
        priceCents: 41,
        outcome: "succeeded",
        upstreamStatus: 200,
        errorKind: null,
        startedAt: "2026-11-26T10:00:01+00:00",
        endedAt: "2026-11-26T10:00:02+00:00",
      },
    ]);
    const gone = await c.query("SELECT to_regclass('inference_attempts') AS t");
    expect(gone.rows[0]?.t).toBeNull();
    await expect(c.query("UPDATE inference_requests SET attempts = '{}' WHERE id = $1", [other])).rejects.toThrow(
      /inference_requests_attempts_array/,
    );
  });
});
