import type { Sql } from "../../adapters/sql.js";
import type { Holder, HolderLease, Slice } from "./escrow.js";

/** What `svc_escrow_take` answers (one row). */
export interface TakeRow {
  outcome: "ok" | "holder_lost" | "key_inactive" | "stale_ceiling" | "insufficient_balance" | "offer_short";
  granted_usdc: bigint;
  available: bigint | null;
  ceiling: number | null;
  granted_diem: bigint;
  routable: bigint | null;
  key_balance: bigint | null;
}

/** One top-up: the buyer's slice and/or an offer's, each with what is short and the request's need. */
export interface TakeAsk {
  holder: Holder;
  accountId: string;
  apiKeyId: string;
  /** the ceiling the request was planned with (a changed one answers `stale_ceiling`) */
  ceilingCents: number;
  buyer: { slice: Slice; short: bigint; need: bigint } | null;
  offer: { offerId: string; slice: Slice; short: bigint; need: bigint } | null;
  now: Date;
}

/**
 * One top-up (`svc_escrow_take`): the buyer's slice and/or the chosen offer's, in one short
 * transaction with the hold's guards (balance, ceiling, key active, offer eligible and deep enough).
 * Grants land in the slices; others needing more wait on `slice.taking` meanwhile. Returns `retry`
 * when the holder's lease was lost (the next `current()` registers anew).
 */
export async function takeEscrow(sql: Sql, lease: HolderLease, ask: TakeAsk): Promise<"retry" | TakeRow> {
  const { holder, buyer, offer } = ask;
  let done!: () => void;
  const taking = new Promise<void>((res) => {
    done = res;
  });
  if (buyer) buyer.slice.taking = taking;
  if (offer) offer.slice.taking = taking;
  try {
    const nowMs = ask.now.getTime();
    const usdcWant = buyer ? buyer.slice.want(buyer.need, nowMs) : 0n;
    const diemWant = offer ? offer.slice.want(offer.need, nowMs) : 0n;
    const r = await sql.query<TakeRow>({
      name: "svc_escrow_take",
      text: `SELECT * FROM svc_escrow_take($1::uuid, $2::uuid, $3::uuid, $4::int, $5::bigint, $6::bigint, $7::uuid,
                                       $8::bigint, $9::bigint, $10::timestamptz)`,
      values: [
        holder.id,
        buyer ? ask.accountId : null,
        ask.apiKeyId,
        ask.ceilingCents,
        buyer ? buyer.short.toString() : "0",
        usdcWant.toString(),
        offer ? offer.offerId : null,
        offer ? offer.short.toString() : "0",
        diemWant.toString(),
        ask.now,
      ],
    });
    const row = r.rows[0];
    if (!row) throw new Error("svc_escrow_take returned nothing");
    if (row.outcome === "holder_lost") {
      lease.lose(holder);
      return "retry";
    }
    if (buyer && BigInt(row.granted_usdc) > 0n) buyer.slice.grant(BigInt(row.granted_usdc));
    if (offer && BigInt(row.granted_diem) > 0n) offer.slice.grant(BigInt(row.granted_diem));
    return row;
  } finally {
    if (buyer) buyer.slice.taking = null;
    if (offer) offer.slice.taking = null;
    done();
    if (buyer) holder.tidy(buyer.slice);
    if (offer) holder.tidy(offer.slice);
  }
}
