import type { Hold } from "../escrow/escrow.js";

/**
 * What the supplier's key could still burn for an attempt when its call began (SPEC "Events" Chat
 * SSE 6: "the supplier's pre-call balance"), as known when the upstream answered the attempt.
 */
export interface PreCallBalance {
  /** the key's balance before the call as the upstream reported it on the attempt (`x-venice-balance-diem`); null when not reported */
  reportedMicroDiem: bigint | null;
  /** the key's last known balance (synced every 30 s, lowered by each settlement; the fallback); null when unknown */
  knownMicroDiem: bigint | null;
  /** the admitted maxima of the other requests in flight on the key then (none of it debited upstream yet) */
  othersInFlightMicroDiem: bigint;
}

/**
 * One attempt: one supplier key, one offer, its maximum burn held on the offer's slice. Immutable:
 * what happens to it is the trail's (`Trail`: its record, the pre-call balance the upstream
 * reported), its hold's (released once) and its key slot's (`SupplierKeys.free`, once).
 */
export interface Attempt {
  readonly ordinal: number;
  readonly offerId: string;
  readonly upstreamKeyId: string;
  readonly supplierAccountId: string;
  readonly priceCentsPerDollar: number;
  /** the supplier's upstream secret (decrypted; never logged) */
  readonly secret: string;
  /** the key's last known balance when the attempt began (the fallback of the pre-call balance) */
  readonly keyBalanceMicroDiem: bigint | null;
  /** its maximum burn, held on the offer's slice until the attempt ends */
  readonly offerHold: Hold;
  readonly startedAt: Date;
}

export type AttemptOutcome =
  | "succeeded"
  | "incomplete"
  | "retryable_failure"
  | "supplier_exhausted"
  | "supplier_auth_failed"
  | "aborted"
  | "request_rejected";

/** One ended attempt as it is recorded when the request ends (fields of the SQL `attempts` json). */
export interface AttemptRecord {
  ordinal: number;
  key: string;
  offer: string;
  price: number;
  outcome: AttemptOutcome;
  status: number | null;
  detail: string | null;
  started: string;
  ended: string;
}
