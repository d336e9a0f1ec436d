import type { Db } from "../../adapters/db.js";
import type { Prisma } from "../../generated/prisma/client.js";
import { DomainError } from "../../lib/errors.js";
import type { ApiKeyMetadata } from "./api-key-types.js";
import type { ChainKey } from "./key-chain.js";
import { type KeyPolicy, keyUsage, spentThisPeriod } from "./key-policy.js";

/** The key tree's reads: a key with its ancestors, and what their budgets leave. */

type Tx = Prisma.TransactionClient;
/** A stored key as the service reads it: metadata, policy and its place in the tree. */
export type KeyRow = Omit<ApiKeyMetadata, "scopes"> & KeyPolicy & Omit<ChainKey, keyof KeyPolicy>;

/**
 * A key of the account and its ancestors' rows; `lock`: the key's row FOR NO KEY UPDATE (a mint: it
 * serialises mints and budget holds on the key, and never waits on an ending's foreign-key check,
 * which takes KEY SHARE while it holds the account row this mint locks next).
 */
export async function readChain(
  db: Pick<Db, "apiKey" | "$queryRaw"> | Tx,
  accountId: string,
  keyId: string,
  lock: boolean,
): Promise<{ self: ChainKey & KeyRow; ancestors: ChainKey[] }> {
  if (lock) await (db as Tx).$queryRaw`SELECT id FROM api_keys WHERE id = ${keyId}::uuid FOR NO KEY UPDATE`;
  const self = await db.apiKey.findFirst({ where: { id: keyId, accountId } });
  if (!self) throw new DomainError("authentication_failed", "Invalid or revoked API key.");
  const ancestors =
    self.ancestorIds.length === 0
      ? []
      : await db.apiKey.findMany({ where: { id: { in: self.ancestorIds }, accountId } });
  return { self, ancestors };
}

/** The least that the budgets of these keys leave this period (limit − their subtree's spend); null: none. */
export async function chainRemaining(
  db: Pick<Db, "$queryRaw"> | Tx,
  chain: readonly ChainKey[],
  now: Date,
): Promise<bigint | null> {
  const limited = chain.filter((k) => k.limitMicroUsdc !== null);
  if (limited.length === 0) return null;
  const spent = await spentThisPeriod(db, limited, now);
  let least: bigint | null = null;
  for (const k of limited) {
    const left = keyUsage(k, spent.get(k.id) ?? 0n, now).remainingMicroUsdc ?? 0n;
    if (least === null || left < least) least = left;
  }
  return least;
}
