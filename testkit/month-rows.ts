import { randomBytes, randomUUID } from "node:crypto";
import type pg from "pg";
import { uuidV7 } from "../src/lib/uuid7.js";
import { MARKET_ADD_IDS } from "./market-totals.js";

/**
 * Requests and clears at chosen instants (months ago, across a month's boundary), written as the
 * ending writes them, with the balances they move, so the books stay balanced: for the partitioning
 * and retention tests. Months are UTC.
 */

/** The first instant of the UTC month `offset` months from `now`'s (negative: before). */
export function monthStart(now: Date, offset = 0): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
}

export interface Seller {
  supplierAccountId: string;
  offerId: string;
  upstreamKeyId: string;
}

/**
 * A supplier with one key and one large offer at 40¢ (raw rows: no upstream is asked): `accountId`'s,
 * or a new account's.
 */
export async function seller(c: pg.ClientBase, opts: { accountId?: string } = {}): Promise<Seller> {
  const supplierAccountId = opts.accountId ?? randomUUID();
  const upstreamKeyId = randomUUID();
  const offerId = randomUUID();
  if (!opts.accountId) {
    await c.query(`INSERT INTO accounts (id, wallet_address, auth_provider) VALUES ($1, $2, 'siwe')`, [
      supplierAccountId,
      `0x${randomBytes(20).toString("hex")}`,
    ]);
  }
  await c.query(
    `INSERT INTO upstream_keys (id, account_id, label, secret_ciphertext, secret_iv, secret_tag, encryption_key_id,
                                secret_fingerprint, secret_last4)
     VALUES ($1, $2, 'k', '\\x00', '\\x00', '\\x00', 'v1', $3, 'abcd')`,
    [upstreamKeyId, supplierAccountId, `fp-${upstreamKeyId}`],
  );
  await c.query(
    `INSERT INTO offers (id, account_id, upstream_key_id, price_cents_per_dollar, quantity_micro_diem,
                         remaining_micro_diem, expires_at)
     VALUES ($1, $2, $3, 40, 1000000000000, 1000000000000, now() + interval '1 day')`,
    [offerId, supplierAccountId, upstreamKeyId],
  );
  return { supplierAccountId, offerId, upstreamKeyId };
}

/** Funds a buyer: a confirmed top-up journal at `at`, and the balance it adds. */
export async function fund(c: pg.ClientBase, accountId: string, amountMicroUsdc: bigint, at: Date): Promise<void> {
  await c.query("BEGIN");
  const j = await c.query<{ id: string }>(
    `INSERT INTO ledger_transactions (kind, idempotency_key, created_at) VALUES ('confirmation', $1, $2) RETURNING id`,
    [`test-fund:${randomUUID()}`, at],
  );
  await c.query(
    `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
     VALUES ($1, NULL, 'external', 'confirmation', $2, $4), ($1, $3, 'buyer_confirmed', 'confirmation', $5, $4)`,
    [j.rows[0]?.id, -amountMicroUsdc, accountId, at, amountMicroUsdc],
  );
  await c.query(
    `UPDATE accounts SET confirmed_micro_usdc = confirmed_micro_usdc + $2, has_ever_funded = true,
                         first_funded_at = COALESCE(first_funded_at, $3) WHERE id = $1`,
    [accountId, amountMicroUsdc, at],
  );
  await c.query("COMMIT");
}

export interface ChargedRequest {
  requestId: string;
  supportReference: string;
  clearId: string;
  startedAt: Date;
  grossMicroUsdc: bigint;
}

/**
 * One request started at `at` and ended a second later with a clear against `s` (gross, 10% fee; the
 * share held for a video job), in one transaction with the balances it moves, as svc_end_items
 * writes them. `reference`: `id`, the request id (a v7 uuid of the start, none stored, as the
 * pipeline makes them), or a stored one of an older record: `v7` (its time the start) or `v4`.
 * `payment`: a pay-per-request payment funds it (no balance moves; its buyer line is on the
 * receivable).
 */
export async function chargedRequest(
  c: pg.ClientBase,
  opts: {
    accountId: string;
    seller: Seller;
    at: Date;
    grossMicroUsdc?: bigint;
    reference?: "id" | "v7" | "v4";
    video?: boolean;
    paymentId?: string;
    apiKeyId?: string;
  },
): Promise<ChargedRequest> {
  const gross = opts.grossMicroUsdc ?? 40_000n;
  const fee = gross / 10n;
  const share = gross - fee;
  const reference = opts.reference ?? "id";
  const requestId = reference === "id" ? uuidV7(opts.at) : randomUUID();
  const clearId = randomUUID();
  const stored = reference === "v4" ? randomUUID() : reference === "v7" ? uuidV7(opts.at) : null;
  const supportReference = stored ?? requestId;
  const ended = new Date(opts.at.getTime() + 1000);
  const modality = opts.video ? "video" : "text";
  await c.query("BEGIN");
  await c.query(
    `INSERT INTO inference_requests (id, support_reference, account_id, api_key_id, route, modality, model, status,
                                     max_price_cents, clearing_price_cents, burn_micro_diem, cost_micro_usdc,
                                     attempt_count, started_at, completed_at, payment_id)
     VALUES ($1, $2, $3, $4, $5, $6, 'llama-3.3-70b', 'succeeded', 80, 40, $7, $8, 1, $9, $10, $11)`,
    [
      requestId,
      stored,
      opts.accountId,
      opts.apiKeyId ?? null,
      opts.video ? "video_queue" : "chat",
      modality,
      (gross * 100n) / 40n,
      gross,
      opts.at,
      ended,
      opts.paymentId ?? null,
    ],
  );
  await c.query(
    `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                         modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                         fee_micro_usdc, supplier_micro_usdc, supplier_held, payment_id, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'llama-3.3-70b', $7, 40, 80, $8, $9, $10, $11, $12, $13, $14)`,
    [
      clearId,
      requestId,
      opts.accountId,
      opts.seller.supplierAccountId,
      opts.seller.offerId,
      opts.seller.upstreamKeyId,
      modality,
      (gross * 100n) / 40n,
      gross,
      fee,
      share,
      opts.video === true,
      opts.paymentId ?? null,
      ended,
    ],
  );
  await c.query(MARKET_ADD_IDS, [[clearId]]);
  if (!opts.paymentId) {
    await c.query("UPDATE accounts SET confirmed_micro_usdc = confirmed_micro_usdc - $2 WHERE id = $1", [
      opts.accountId,
      gross,
    ]);
  }
  await c.query(
    `UPDATE accounts SET supplier_payable_micro_usdc = supplier_payable_micro_usdc + $2,
                         supplier_held_micro_usdc = supplier_held_micro_usdc + $3 WHERE id = $1`,
    [opts.seller.supplierAccountId, opts.video ? 0n : share, opts.video ? share : 0n],
  );
  await c.query("COMMIT");
  return { requestId, supportReference, clearId, startedAt: opts.at, grossMicroUsdc: gross };
}

/** A held share released (its video job final): journal `release` and the balances it moves. */
export async function releaseHeldShare(c: pg.ClientBase, clearId: string, at: Date): Promise<void> {
  const r = await c.query<{ supplier: string; share: string }>(
    "SELECT supplier_account_id AS supplier, supplier_micro_usdc::text AS share FROM clears WHERE id = $1",
    [clearId],
  );
  const row = r.rows[0];
  if (!row) throw new Error(`no clear ${clearId}`);
  await c.query("BEGIN");
  const j = await c.query<{ id: string }>(
    `INSERT INTO ledger_transactions (kind, clear_id, idempotency_key, created_at) VALUES ('release', $1, $2, $3) RETURNING id`,
    [clearId, `release:${clearId}:1`, at],
  );
  await c.query(
    `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
     VALUES ($1, $2, 'supplier_held', 'release', -$3::bigint, $4), ($1, $2, 'supplier_payable', 'release', $3::bigint, $4)`,
    [j.rows[0]?.id, row.supplier, row.share, at],
  );
  await c.query(
    `UPDATE accounts SET supplier_held_micro_usdc = supplier_held_micro_usdc - $2,
                         supplier_payable_micro_usdc = supplier_payable_micro_usdc + $2 WHERE id = $1`,
    [row.supplier, row.share],
  );
  await c.query("COMMIT");
}
