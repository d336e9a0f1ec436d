import type { Prisma } from "../generated/prisma/client.js";

type Tx = Prisma.TransactionClient;

/**
 * Locks an account's row for a count-then-insert under it (its keys, its webhooks, a payer's
 * payments) until the transaction ends; answers whether the account exists.
 *
 * FOR NO KEY UPDATE, not FOR UPDATE: it serialises these writers with one another and with the
 * row's own updates, but not with the foreign-key checks (FOR KEY SHARE) of rows that name the
 * account. So a request's ending, which inserts its record and clear under the account, never waits
 * for it. Under FOR UPDATE it did, and a duplicate payment's claim holding the lock then waited on
 * the ending's payment row in its insert: a deadlock that failed the ending (docs/decisions.md
 * "Account locks do not hold up endings").
 */
export async function lockAccountRow(tx: Tx, accountId: string): Promise<boolean> {
  const rows = await tx.$queryRaw<{ id: string }[]>`
    SELECT id FROM accounts WHERE id = ${accountId}::uuid FOR NO KEY UPDATE`;
  return rows.length > 0;
}
