import type { Db } from "../../adapters/db.js";
import { Prisma } from "../../generated/prisma/client.js";

/** An account's live balance columns, and its holders' slices of its balance. */
export interface LiveBalanceColumns {
  id: string;
  confirmedMicroUsdc: bigint;
  pendingMicroUsdc: bigint;
  reservedMicroUsdc: bigint;
  supplierPayableMicroUsdc: bigint;
  supplierHeldMicroUsdc: bigint;
  buyerEscrows: { holder: string; amountMicroUsdc: bigint }[];
}

/**
 * An account's balance columns and its escrow slices as they are live (docs/decisions.md "One
 * append per clear"): the rows less what its holders' appended clears have not yet folded
 * (`svc_account_live`; a slice, less its own count of them, `charged_micro_usdc`). One statement;
 * null when there is no such account.
 */
export async function liveBalanceColumns(
  db: Pick<Db, "$queryRaw">,
  accountId: string,
): Promise<LiveBalanceColumns | null> {
  const rows = await db.$queryRaw<
    {
      confirmed: bigint;
      pending: bigint;
      reserved: bigint;
      payable: bigint;
      held: bigint;
      slices: [string, string][];
    }[]
  >`
    SELECT l.confirmed, l.pending, l.reserved, l.payable, l.held,
           COALESCE((SELECT jsonb_agg(jsonb_build_array(e.holder, (e.amount_micro_usdc - e.charged_micro_usdc)::text))
                       FROM buyer_escrows e WHERE e.account_id = ${accountId}::uuid), '[]'::jsonb) AS slices
      FROM svc_account_live(${accountId}::uuid) l`;
  const r = rows[0];
  if (!r) return null;
  return {
    id: accountId,
    confirmedMicroUsdc: BigInt(r.confirmed),
    pendingMicroUsdc: BigInt(r.pending),
    reservedMicroUsdc: BigInt(r.reserved),
    supplierPayableMicroUsdc: BigInt(r.payable),
    supplierHeldMicroUsdc: BigInt(r.held),
    buyerEscrows: r.slices.map(([holder, amount]) => ({ holder, amountMicroUsdc: BigInt(amount) })),
  };
}

/**
 * Folds the holder of a clear (`svc_fold_holder`) when the clear is still unfolded (docs/decisions.md
 * "One append per clear"), so the balances hold it before a path moves them from the clear (a
 * refund, a held share's release): by the video request's id (`foldVideoClearOf`: only a video clear
 * is found by its request, the index on `clears.request_id` is partial on video) or by the clear's
 * id (`foldClearOf`). Call it before the transaction locks any account: the fold's lock order is the
 * holder, then buyers, offers, keys, suppliers. A folded clear folds nothing and locks nothing.
 */
async function foldHolderOf(tx: Prisma.TransactionClient, clear: Prisma.Sql): Promise<void> {
  await tx.$queryRaw`
    SELECT (SELECT count(*) FROM svc_fold_holder(c.holder))::int AS sold_out
      FROM clears c JOIN escrow_holders h ON h.id = c.holder AND c.seq > h.folded_seq
     WHERE ${clear}`;
}

export function foldVideoClearOf(tx: Prisma.TransactionClient, requestId: string): Promise<void> {
  return foldHolderOf(tx, Prisma.sql`c.request_id = ${requestId}::uuid AND c.modality = 'video'`);
}

export function foldClearOf(tx: Prisma.TransactionClient, clearId: string): Promise<void> {
  return foldHolderOf(tx, Prisma.sql`c.id = ${clearId}::uuid`);
}

/** What the appended clears not yet folded burned, per offer and per supplier key (micro-DIEM). */
export interface UnfoldedBurns {
  offers: Map<string, bigint>;
  keys: Map<string, bigint>;
}

/**
 * Every unfolded burn, by offer (its slices' counts, `svc_offers_unfolded`) and by supplier key
 * (`svc_upstream_keys_unfolded`: the clears of the last fold interval, a small set), for readers
 * that show offers' remaining or keys' balances live. One statement.
 */
export async function unfoldedBurns(db: Pick<Db, "$queryRaw">): Promise<UnfoldedBurns> {
  const rows = await db.$queryRaw<{ kind: "offer" | "key"; id: string; burn: bigint }[]>`
    SELECT 'offer' AS kind, o.offer::text AS id, o.burn FROM svc_offers_unfolded(NULL) o
    UNION ALL
    SELECT 'key', k.upstream_key::text, k.burn FROM svc_upstream_keys_unfolded(NULL) k`;
  const out: UnfoldedBurns = { offers: new Map(), keys: new Map() };
  for (const r of rows) (r.kind === "offer" ? out.offers : out.keys).set(r.id, BigInt(r.burn));
  return out;
}

/** An offer row's remaining and reserved, live (less its unfolded burn). */
export function liveOffer<T extends { id: string; remainingMicroDiem: bigint; reservedMicroDiem: bigint }>(
  o: T,
  burns: UnfoldedBurns,
): T {
  const burn = burns.offers.get(o.id) ?? 0n;
  return burn === 0n
    ? o
    : { ...o, remainingMicroDiem: o.remainingMicroDiem - burn, reservedMicroDiem: o.reservedMicroDiem - burn };
}

/** A supplier key's last known balance, live (less its unfolded burn, not below 0; null stays null). */
export function liveKeyBalance(id: string, balance: bigint | null, burns: UnfoldedBurns): bigint | null {
  if (balance === null) return null;
  const left = balance - (burns.keys.get(id) ?? 0n);
  return left > 0n ? left : 0n;
}
