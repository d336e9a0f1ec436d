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
