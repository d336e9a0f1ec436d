import type { Prisma } from "../../generated/prisma/client.js";

/** The source a refund and an already-folded fixture write the market's totals under. */
export const NIL_SOURCE = "00000000-0000-0000-0000-000000000000";

/**
 * A refunded clear leaves the market's totals (docs/decisions.md "Market totals at the fold", "Model
 * statistics at the fold"): its day's row and its hour's row under the nil source go down by it, and
 * the hour counts a refund (`svc_market_add`, the one place the totals are written), in the refund's
 * transaction. Folded or not, the clear is in the totals once (a row, or unfolded), so it comes out
 * once. Called after the refund's account locks: the market's rows are the last a money path locks.
 */
export async function takeOutOfMarket(tx: Prisma.TransactionClient, clear: { id: string; at: Date }): Promise<void> {
  await tx.$executeRaw`
    SELECT svc_market_add(${NIL_SOURCE}::uuid, -1,
                          ARRAY(SELECT c FROM clears c WHERE c.id = ${clear.id}::uuid AND c.created_at = ${clear.at}))`;
}
