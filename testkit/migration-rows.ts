import { randomUUID } from "node:crypto";
import type pg from "pg";

/** The rows a clear stands on, by id: its buyer, its supplier, the supplier's upstream key and offer. */
export interface MarketParties {
  buyer: string;
  supplier: string;
  key: string;
  offer: string;
}

/** What a migration's test sets on them (every amount micro-units; unset: the column's default). */
export interface MarketPartiesOptions {
  buyer?: { confirmed?: number; reserved?: number };
  supplierPayable?: number;
  /** the key's last reported balance (micro-DIEM) */
  keyBalance?: number;
  offer?: { price?: number; quantity?: number; remaining?: number; reserved?: number; expiresAt?: string };
}

/**
 * Inserts a migration test's market with raw SQL (the schema may be any earlier migration's): the buyer
 * and the supplier (SIWE accounts with fixed wallets), the supplier's upstream key and its offer
 * (40 cents, 10 DIEM, expiring in a day unless told otherwise).
 */
export async function insertMarketParties(
  c: pg.Client,
  ids: { [K in keyof MarketParties]: string | undefined },
  o: MarketPartiesOptions = {},
): Promise<void> {
  // the tests destructure their ids from arrays: each must be there
  for (const [k, v] of Object.entries(ids)) if (!v) throw new Error(`insertMarketParties: no ${k} id`);
  const p = ids as MarketParties;
  await c.query(
    `INSERT INTO accounts (id, wallet_address, auth_provider, confirmed_micro_usdc, reserved_micro_usdc,
                           supplier_payable_micro_usdc)
     VALUES ($1, '0x00000000000000000000000000000000000000ab', 'siwe', $3, $4, 0),
            ($2, '0x00000000000000000000000000000000000000cd', 'siwe', 0, 0, $5)`,
    [p.buyer, p.supplier, o.buyer?.confirmed ?? 0, o.buyer?.reserved ?? 0, o.supplierPayable ?? 0],
  );
  await c.query(
    `INSERT INTO upstream_keys (id, account_id, label, secret_ciphertext, secret_iv, secret_tag, encryption_key_id,
                                secret_fingerprint, secret_last4, last_balance_micro_diem)
     VALUES ($1, $2, 'k', '\\x00', '\\x00', '\\x00', 'v1', 'fp', 'abcd', $3)`,
    [p.key, p.supplier, o.keyBalance ?? null],
  );
  const offer = o.offer ?? {};
  const quantity = offer.quantity ?? 10_000_000;
  await c.query(
    `INSERT INTO offers (id, account_id, upstream_key_id, price_cents_per_dollar, quantity_micro_diem,
                         remaining_micro_diem, reserved_micro_diem, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8::timestamptz, now() + interval '1 day'))`,
    [
      p.offer,
      p.supplier,
      p.key,
      offer.price ?? 40,
      quantity,
      offer.remaining ?? quantity,
      offer.reserved ?? 0,
      offer.expiresAt ?? null,
    ],
  );
}

/**
 * A live escrow holder that has folded its clears up to `foldedSeq` (through `foldedThrough`), with the
 * buyer's and the offer's slices holding, and counting, what its unfolded clears charged them.
 */
export async function insertFoldingHolder(
  c: pg.Client,
  h: {
    holder: string;
    foldedSeq: number;
    foldedThrough: string;
    buyer: string;
    offer: string;
    gross: number;
    burn: number;
  },
): Promise<void> {
  await c.query(
    `INSERT INTO escrow_holders (id, expires_at, folded_seq, folded_through)
     VALUES ($1, now() + interval '1 minute', $2, $3)`,
    [h.holder, h.foldedSeq, h.foldedThrough],
  );
  await c.query(
    `INSERT INTO buyer_escrows (account_id, holder, amount_micro_usdc, charged_micro_usdc) VALUES ($1, $2, $3, $3)`,
    [h.buyer, h.holder, h.gross],
  );
  await c.query(
    `INSERT INTO offer_escrows (offer_id, holder, amount_micro_diem, charged_micro_diem) VALUES ($1, $2, $3, $3)`,
    [h.offer, h.holder, h.burn],
  );
}

/**
 * A request and its clear, raw (a migration test's schema): `burn` at `price` cents, split 10 % to the
 * platform, appended at `at` by `holder` as its `seq` (none: written as folded), refunded at `at` if told.
 */
export async function insertClearRow(
  c: pg.Client,
  p: MarketParties,
  x: {
    id: string;
    buyer?: string;
    holder: string | null;
    seq: number | null;
    burn: number;
    price: number;
    refunded: boolean;
    at: string;
    model?: string;
    modality: string;
    /** the buyer's API key it was made with (none: a clear without a key) */
    apiKey?: string;
  },
): Promise<void> {
  const request = randomUUID();
  const buyer = x.buyer ?? p.buyer;
  const model = x.model ?? "zai-org-glm-5-1";
  await c.query(
    `INSERT INTO inference_requests (id, account_id, route, modality, model, max_price_cents, started_at)
     VALUES ($1, $2, 'chat', $3, $4, 80, $5)`,
    [request, buyer, x.modality, model, x.at],
  );
  const gross = (x.burn * x.price) / 100;
  await c.query(
    `INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model,
                         modality, price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc,
                         fee_micro_usdc, supplier_micro_usdc, created_at, holder, seq, refunded_at, spend_day, api_key_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 80, $10, $11, $12, $13, $14, $15, $16,
             CASE WHEN $17 THEN $14::timestamptz END, ($14::timestamptz AT TIME ZONE 'UTC')::date, $18)`,
    [
      x.id,
      request,
      buyer,
      p.supplier,
      p.offer,
      p.key,
      model,
      x.modality,
      x.price,
      x.burn,
      gross,
      gross / 10,
      gross - gross / 10,
      x.at,
      x.holder,
      x.seq,
      x.refunded,
      x.apiKey ?? null,
    ],
  );
}
