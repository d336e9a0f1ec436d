import type { MicroUsdc } from "../../lib/money.js";
import type { Balances } from "./account-types.js";

/** One process's slice of a buyer's balance as Postgres holds it (`buyer_escrows`). */
export interface HeldSlice {
  holder: string;
  amountMicroUsdc: MicroUsdc;
}

/** The account's balance columns. */
export interface BalanceColumns {
  confirmedMicroUsdc: MicroUsdc;
  pendingMicroUsdc: MicroUsdc;
  /** what every holder's slices hold of the balance (Σ `buyer_escrows`) */
  reservedMicroUsdc: MicroUsdc;
  supplierPayableMicroUsdc: MicroUsdc;
}

/**
 * THE buyer's balances, the one place `reservedMicroUsdc` (held by requests in flight) and
 * `availableMicroUsdc` (what a new request can use) are computed, for REST, GraphQL and MCP alike
 * (docs/decisions.md "what is held, what is available, with escrow slices lingering"). Postgres's `reserved` counts whole escrow slices; the
 * part of a slice no request in flight uses (a slice lingering idle, the headroom of a busy one) is
 * the buyer's to spend (any process gets it back at once through escrow pressure), so it counts as
 * available. `inUse` says, per holder that answered, what its requests in flight use of its slice;
 * a slice whose holder did not answer counts as held in full, and so does anything reserved that no
 * listed slice explains.
 */
export function balancesOf(
  a: BalanceColumns,
  slices: readonly HeldSlice[],
  inUse: ReadonlyMap<string, bigint>,
): Balances {
  let held = a.reservedMicroUsdc - idleOf(slices, inUse);
  if (held < 0n) held = 0n;
  if (held > a.reservedMicroUsdc) held = a.reservedMicroUsdc;
  return {
    confirmedMicroUsdc: a.confirmedMicroUsdc,
    pendingMicroUsdc: a.pendingMicroUsdc,
    reservedMicroUsdc: held,
    availableMicroUsdc: a.confirmedMicroUsdc - held,
    supplierPayableMicroUsdc: a.supplierPayableMicroUsdc,
  };
}

/**
 * What `slices` hold that no request in flight uses, per `inUse` (holder → used); a slice whose
 * holder did not answer counts as fully used. THE idle figure of both `balancesOf` and escrow
 * pressure's `EscrowUsage.idleElsewhere`.
 */
export function idleOf(slices: readonly HeldSlice[], inUse: ReadonlyMap<string, bigint>): bigint {
  let idle = 0n;
  for (const s of slices) {
    const used = inUse.get(s.holder);
    if (used === undefined) continue;
    if (used < s.amountMicroUsdc) idle += s.amountMicroUsdc - (used > 0n ? used : 0n);
  }
  return idle;
}
