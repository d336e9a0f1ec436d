import type { Prisma } from "../../generated/prisma/client.js";
import type { UpstreamKeyStatusName } from "./supply-types.js";

type Tx = Prisma.TransactionClient;

export interface LockedKey {
  account_id: string;
  status: UpstreamKeyStatusName;
}

/**
 * Locks an upstream key for a change of its offers, in the lock order of the money paths (the fold,
 * svc_fold_holder, and a video job's refund: offers, then keys): the key's offers first, in id
 * order, then the key. A fold holds an offer and then updates its key; a path that locked the key
 * first and then waited on that offer deadlocked with it (docs/decisions.md "One lock order for keys
 * and offers").
 *
 * - `post` (posting an offer, a standing offer's repost): the live offers FOR SHARE (the insert's
 *   one-live-offer-per-key check waits on them), then the key FOR SHARE, so a revocation either
 *   sees the new offer or wins.
 * - `revoke`: every offer not cancelled, then the key, FOR NO KEY UPDATE.
 *
 * Answers the key's owner and status, or undefined when there is no such key.
 */
export async function lockKeyWithOffers(
  tx: Tx,
  upstreamKeyId: string,
  mode: "post" | "revoke",
): Promise<LockedKey | undefined> {
  if (mode === "post") {
    await tx.$queryRaw`
      SELECT id FROM offers WHERE upstream_key_id = ${upstreamKeyId}::uuid AND status IN ('active', 'paused')
       ORDER BY id FOR SHARE`;
    const rows = await tx.$queryRaw<LockedKey[]>`
      SELECT account_id, status::text AS status FROM upstream_keys WHERE id = ${upstreamKeyId}::uuid FOR SHARE`;
    return rows[0];
  }
  await tx.$queryRaw`
    SELECT id FROM offers WHERE upstream_key_id = ${upstreamKeyId}::uuid AND status <> 'cancelled'
     ORDER BY id FOR NO KEY UPDATE`;
  const rows = await tx.$queryRaw<LockedKey[]>`
    SELECT account_id, status::text AS status FROM upstream_keys WHERE id = ${upstreamKeyId}::uuid FOR NO KEY UPDATE`;
  return rows[0];
}
