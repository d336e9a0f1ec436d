import type { MicroDiem, MicroUsdc } from "../../lib/money.js";
import type { PriceStep } from "./price-schedule.js";

export type UpstreamKeyStatusName = "active" | "auth_failed" | "revoked";
export type OfferStatusName = "active" | "paused" | "depleted" | "expired" | "cancelled";
export type PayoutStatusName = "pending" | "submitted" | "confirmed" | "failed";

/** SPEC "Supplier offer": a live offer is `active` or `paused`. */
export const LIVE_OFFER_STATUSES = ["active", "paused"] as const satisfies readonly OfferStatusName[];

/** A registered upstream key as the supplier sees it. Never carries the secret. */
export interface UpstreamKeyView {
  id: string;
  label: string;
  status: UpstreamKeyStatusName;
  /** `…` plus the last four characters of the secret (docs/decisions.md "Supply") */
  maskedKey: string;
  /** the last DIEM balance the upstream reported; null before the first successful read */
  balanceMicroDiem: MicroDiem | null;
  lastBalanceAt: Date | null;
  authFailedAt: Date | null;
  cooldownUntil: Date | null;
  createdAt: Date;
  revokedAt: Date | null;
  /** the key's live (active or paused) offer, if any */
  liveOfferId: string | null;
}

export interface OfferView {
  id: string;
  upstreamKeyId: string;
  keyLabel: string;
  keyStatus: UpstreamKeyStatusName;
  /** the offer's own price: the effective price when no schedule step has passed today */
  priceCentsPerDollar: number;
  /** the price it clears at now (`effectivePrice`: its schedule's step that most recently passed today) */
  effectivePriceCentsPerDollar: number;
  /** price steps through the UTC day, or null */
  schedule: PriceStep[] | null;
  /** a standing offer: posted again on the same key at each UTC midnight */
  repostDaily: boolean;
  /** caps a repost's quantity; null: the key's fresh balance */
  dailyQuantityMicroDiem: MicroDiem | null;
  /** the offer this one re-posts (null: posted by the supplier) */
  repostedFromId: string | null;
  quantityMicroDiem: MicroDiem;
  remainingMicroDiem: MicroDiem;
  /** held by requests in flight (part of remaining) */
  reservedMicroDiem: MicroDiem;
  /** quantity − remaining */
  soldMicroDiem: MicroDiem;
  status: OfferStatusName;
  expiresAt: Date;
  createdAt: Date;
  updatedAt: Date;
  endedAt: Date | null;
}

export interface RevokedKey {
  upstreamKeyId: string;
  /** offers this call moved to `cancelled` (0 when a repeated call found nothing left) */
  cancelledOffers: number;
  key: UpstreamKeyView;
}

/** One line of the supplier's books: a change to its payable or its held balance. */
export interface SupplierLedgerLine {
  id: string;
  /** which balance it moves: payable, or held (a video job's share until the job is final) */
  book: "supplier_payable" | "supplier_held";
  /** supplier_credit, release, rehold, refund, payout, reversal */
  kind: string;
  /** signed change to that balance */
  amountMicroUsdc: MicroUsdc;
  transactionId: string;
  /** clear, release, rehold, refund, payout, payout_reversal */
  transactionKind: string;
  createdAt: Date;
}

export interface PayoutView {
  id: string;
  period: string;
  toAddress: string;
  amountMicroUsdc: MicroUsdc;
  status: PayoutStatusName;
  txHash: string | null;
  failureReason: string | null;
  createdAt: Date;
  submittedAt: Date | null;
  confirmedAt: Date | null;
}

export interface SupplierLedgerPage {
  /**
   * earnings payable and not yet paid out (accounts.supplier_payable_micro_usdc); negative while a
   * refund of a share already paid out is recovered from later earnings (carried forward)
   */
  payableMicroUsdc: MicroUsdc;
  /** earnings on hold: shares of video jobs not yet final, never paid out before they are */
  heldMicroUsdc: MicroUsdc;
  /** payouts whose transfer was sent (submitted or confirmed) */
  paidOutMicroUsdc: MicroUsdc;
  /** payouts recorded but not yet sent (already moved out of payable) */
  payoutPendingMicroUsdc: MicroUsdc;
  payoutMinimumMicroUsdc: MicroUsdc;
  /** the 10 most recent payouts */
  recentPayouts: PayoutView[];
  items: SupplierLedgerLine[];
  nextCursor: string | null;
}

/** One clear sold by this supplier. Never identifies the buyer. */
export interface SupplierClearRow {
  clearId: string;
  offerId: string;
  upstreamKeyId: string;
  model: string;
  modality: string;
  priceCentsPerDollar: number;
  burnMicroDiem: MicroDiem;
  grossMicroUsdc: MicroUsdc;
  feeMicroUsdc: MicroUsdc;
  /** the supplier's share: gross − fee */
  earnedMicroUsdc: MicroUsdc;
  refundedAt: Date | null;
  createdAt: Date;
}

export interface SyncResult {
  synced: number;
  authFailed: number;
  recovered: number;
  errors: number;
}

export interface KeyBalance {
  upstreamKeyId: string;
  status: UpstreamKeyStatusName;
  balanceMicroDiem: MicroDiem | null;
  lastBalanceAt: Date | null;
  /** what this refresh saw: ok, auth (the upstream refused the key), unavailable (could not ask), skipped (revoked) */
  outcome: "ok" | "auth" | "unavailable" | "skipped";
}

export interface PayoutRunResult {
  /** transfers sent in this run (new payouts and resumed ones) */
  paid: number;
  created: number;
  confirmed: number;
  failed: number;
  /** pending payouts whose earlier transfer was found on chain and recorded */
  adopted: number;
  /** true when no payout key is configured: nothing was done */
  disabled: boolean;
  /** true when another process holds the payout run: nothing was done */
  busy: boolean;
}
