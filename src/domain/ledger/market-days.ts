import type { Prisma } from "../../generated/prisma/client.js";

/** What a refund reads of its clear to take it out of its day. */
export interface MarketDayClear {
  at: Date;
  modality: string;
  burn: bigint;
  gross: bigint;
  price: number;
}

/**
 * A refunded clear leaves the market's totals (docs/decisions.md "Market totals at the fold"): its
 * day's row under the nil source goes down by it, in the refund's transaction. Folded or not, the
 * clear is in the totals once (a row, or unfolded: svc_market_days), so it comes out once.
 */
export async function takeOutOfMarketDay(tx: Prisma.TransactionClient, c: MarketDayClear): Promise<void> {
  await tx.$executeRaw`
    INSERT INTO market_days (day, modality, source, clears, burn_micro_diem, gross_micro_usdc, weighted)
    VALUES ((${c.at}::timestamptz AT TIME ZONE 'UTC')::date, ${c.modality}::modality,
            '00000000-0000-0000-0000-000000000000'::uuid, -1, -${c.burn}::bigint, -${c.gross}::bigint,
            -(${c.burn}::bigint * ${c.price}::integer))
    ON CONFLICT ON CONSTRAINT market_days_key
    DO UPDATE SET clears = market_days.clears + EXCLUDED.clears,
                  burn_micro_diem = market_days.burn_micro_diem + EXCLUDED.burn_micro_diem,
                  gross_micro_usdc = market_days.gross_micro_usdc + EXCLUDED.gross_micro_usdc,
                  weighted = market_days.weighted + EXCLUDED.weighted`;
}
