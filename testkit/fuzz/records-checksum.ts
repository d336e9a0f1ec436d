import type { Db } from "../../src/adapters/db.js";

/**
 * The books and records a request could change, per table: the columns that carry money, state and
 * identity. Columns a harmless request legitimately touches are left out: a key's `last_used_at`, a
 * session's sliding `last_seen_at`/`expires_at`, `updated_at`, balance-sync timestamps.
 */
const TRACKED: [table: string, columns: string[]][] = [
  [
    "accounts",
    [
      "id",
      "max_price_cents_per_dollar",
      "confirmed_micro_usdc",
      "pending_micro_usdc",
      "reserved_micro_usdc",
      "supplier_payable_micro_usdc",
      "supplier_held_micro_usdc",
      "has_ever_funded",
    ],
  ],
  ["sessions", ["id", "revoked_at"]],
  ["siwe_nonces", ["nonce", "used_at"]],
  ["api_keys", ["id", "name", "status", "revoked_at"]],
  ["upstream_keys", ["id", "label", "status", "revoked_at"]],
  [
    "offers",
    ["id", "price_cents_per_dollar", "quantity_micro_diem", "remaining_micro_diem", "reserved_micro_diem", "status"],
  ],
  ["payments", ["id", "kind", "status", "amount_micro_usdc"]],
  ["payment_identifiers", ["payer_address", "identifier", "fingerprint", "response_status"]],
  ["ledger_transactions", ["id", "kind"]],
  ["ledger_entries", ["id", "book", "amount_micro_usdc"]],
  ["inference_requests", ["id", "status", "cost_micro_usdc"]],
  // a clear is the transfer its ledger lines derive from (no journal of its own): its money columns
  [
    "clears",
    [
      "id",
      "buyer_account_id",
      "supplier_account_id",
      "gross_micro_usdc",
      "fee_micro_usdc",
      "supplier_micro_usdc",
      "refunded_at",
    ],
  ],
  ["buyer_escrows", ["account_id", "holder", "amount_micro_usdc"]],
  ["offer_escrows", ["offer_id", "holder", "amount_micro_diem"]],
  ["video_jobs", ["id", "status", "charge_micro_usdc"]],
  ["payouts", ["id", "status", "amount_micro_usdc"]],
];

const CHECKSUM_SQL = TRACKED.map(([table, columns]) => {
  const row = `jsonb_build_array(${columns.map((c) => `t.${c}`).join(", ")})::text`;
  return `SELECT '${table}' AS name, count(*)::int AS rows, md5(coalesce(string_agg(${row}, ';' ORDER BY ${row}), '')) AS digest FROM ${table} t`;
}).join("\nUNION ALL\n");

/** One line per table: `table rows digest`. Equal before and after means nothing was written (static SQL). */
export async function recordsChecksum(db: Db): Promise<string> {
  const rows = await db.$queryRawUnsafe<{ name: string; rows: number; digest: string }[]>(CHECKSUM_SQL);
  return rows.map((r) => `${r.name} ${r.rows} ${r.digest}`).join("\n");
}
