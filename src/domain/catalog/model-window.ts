import type { Db } from "../../adapters/db.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { CatalogModality } from "./catalog-types.js";

/**
 * What GET /v1/models/stats reads of a window (docs/decisions.md "Model statistics at the fold"):
 * the unrefunded clears of models not disabled, created in (from, to]. The whole UTC hours inside it
 * come from the market's hour rows (`svc_model_hours`: the folds' and refunds' rows and the unfolded
 * clears); only the partial hours at its two ends are read from the clears themselves (at most two
 * hours of them, by the time index). So a call reads hours × models × folding processes rows, not the
 * window's clears, whatever the market's volume.
 */

const HOUR_MS = 3_600_000;

export interface WindowDay {
  model: string;
  modality: CatalogModality;
  /** YYYY-MM-DD (UTC) */
  day: string;
  clears: bigint;
  burn: bigint;
}

export interface WindowRead {
  days: WindowDay[];
  /** up to 3 distinct buyers certainly among the window's (the hour rows' pairs, the partial hours' clears) */
  buyers: string[];
}

/** The whole hours of (from, to]: [first, last). Exact for UTC: the epoch's hours are UTC hours. */
function wholeHours(from: Date, to: Date): { first: Date; last: Date } {
  const first = new Date((Math.floor(from.getTime() / HOUR_MS) + 1) * HOUR_MS);
  const last = new Date(Math.max(first.getTime(), Math.floor(to.getTime() / HOUR_MS) * HOUR_MS));
  return { first, last };
}

/** The window's burn and clears by model and UTC day, and buyers found on the way (one statement). */
export async function readModelWindow(db: Db, from: Date, to: Date): Promise<WindowRead> {
  const { first, last } = wholeHours(from, to);
  const rows = await db.$queryRaw<(Omit<WindowDay, "modality"> & { modality: string; buyers: string[] | null })[]>`
    WITH p AS (
      SELECT m.model, m.modality, m.hour AS at, m.clears, m.burn_micro_diem AS burn, m.buyers
        FROM svc_model_hours(${first}::timestamptz, ${last}::timestamptz) m
      UNION ALL
      SELECT c.model, c.modality, c.created_at, 1, c.burn_micro_diem, ARRAY[c.buyer_account_id]
        FROM clears c
       WHERE c.refunded_at IS NULL
         AND ((c.created_at > ${from}::timestamptz AND c.created_at < ${first}::timestamptz)
           OR (c.created_at >= ${last}::timestamptz AND c.created_at <= ${to}::timestamptz))
    ),
    q AS MATERIALIZED (
      SELECT p.* FROM p LEFT JOIN catalog_models cm ON cm.id = p.model WHERE cm.disabled IS NOT TRUE
    )
    SELECT q.model, min(q.modality::text) AS modality, to_char(q.at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
           sum(q.clears)::bigint AS clears, sum(q.burn)::bigint AS burn,
           (SELECT array_agg(k.b::text) FROM (SELECT DISTINCT b FROM q, unnest(q.buyers) b LIMIT 3) k) AS buyers
      FROM q
     GROUP BY q.model, day
    HAVING sum(q.clears) <> 0`;
  return {
    days: rows.map((r) => ({
      model: r.model,
      modality: r.modality as CatalogModality,
      day: r.day,
      clears: BigInt(r.clears),
      burn: BigInt(r.burn),
    })),
    buyers: rows[0]?.buyers ?? [],
  };
}

/**
 * Distinct buyers of the window up to `want`, with `known` among them: read from the clears in buyer
 * order, each read the next buyer above the last (the buyer's index, `(buyer_account_id, created_at)`,
 * sought past every clear of the last one: a loose index scan). So a window of two buyers who clear
 * millions of times is three seeks, not a scan; what a read passes over is other buyers' entries
 * outside the window, and clears refunded or of disabled models.
 */
export async function moreBuyers(db: Db, from: Date, to: Date, known: string[], want: number): Promise<string[]> {
  const found = new Set(known);
  let after: string | null = null;
  while (found.size < want) {
    const [next]: { buyer: string }[] = await db.$queryRaw<{ buyer: string }[]>`
      SELECT c.buyer_account_id::text AS buyer
        FROM clears c LEFT JOIN catalog_models cm ON cm.id = c.model
       WHERE c.created_at > ${from}::timestamptz AND c.created_at <= ${to}::timestamptz
         ${after === null ? Prisma.empty : Prisma.sql`AND c.buyer_account_id > ${after}::uuid`}
         AND c.refunded_at IS NULL AND cm.disabled IS NOT TRUE
       ORDER BY c.buyer_account_id
       LIMIT 1`;
    if (!next) break;
    found.add(next.buyer);
    after = next.buyer;
  }
  return [...found];
}
