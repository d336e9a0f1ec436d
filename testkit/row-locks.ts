import type { Db } from "../src/adapters/db.js";

/**
 * Resolves true once a backend of this database waits on a row or a transaction (a row lock, or an
 * insert's unique check on a row another transaction moved); false as soon as `stop()` says the
 * wait no longer matters (the awaited path ended first). Throws when neither happened within 20 s.
 */
export async function someoneWaitsOnARow(db: Db, stop: () => boolean = () => false): Promise<boolean> {
  for (let i = 0; i < 1_000; i++) {
    if (stop()) return false;
    const [w] = await db.$queryRaw<{ n: bigint }[]>`
      SELECT count(*) AS n FROM pg_stat_activity
       WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event IN ('tuple', 'transactionid')`;
    if ((w?.n ?? 0n) > 0n) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("no backend waited on a row within 20 s");
}
