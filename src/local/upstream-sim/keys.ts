/**
 * The simulator's keys as the upstream bills them: what a key is created with and reads as, its live
 * record, and THE billing rules (the DIEM the key can spend under its cap, admission, the debit of a
 * finished request, the prepaid debit of a media job and its refund).
 */

export interface SimKeyInit {
  key: string;
  /** current DIEM balance, micro-DIEM */
  diemMicro: bigint;
  /** USD balance, micro-USD (default 0) */
  usdMicro?: bigint;
  /** per-epoch DIEM spend limit of this key, micro-DIEM (null/absent = no cap) */
  diemCapMicro?: bigint | null;
  revoked?: boolean;
  /** DIEM the balance resets to at 00:00 UTC (default: the initial `diemMicro`) */
  allocationMicro?: bigint;
  /** requests per minute per model (default 100000, reported in rate_limits and headers) */
  rpmLimit?: number;
  /** tokens per minute per model (default 100000000) */
  tpmLimit?: number;
  /**
   * whether the key's account is an alpha tester (default true): without it `POST /responses`
   * (documented "available to Alpha testers only") answers 401 `MSG_ALPHA_ONLY`
   */
  alphaAccess?: boolean;
}

export interface SimKeySnapshot {
  key: string;
  diemMicro: bigint;
  usdMicro: bigint;
  diemCapMicro: bigint | null;
  allocationMicro: bigint;
  /** DIEM spent by this key in the current epoch (counts against `diemCapMicro`) */
  spentDiemEpochMicro: bigint;
  /** what `GET /api_keys/rate_limits` reports as DIEM: the balance clamped to the cap's remainder */
  availableDiemMicro: bigint;
  accessPermitted: boolean;
  revoked: boolean;
  alphaAccess: boolean;
  inFlight: number;
  /** highest concurrent in-flight count seen since the key was added or `resetRequests()` */
  peakInFlight: number;
  rpmLimit: number;
  tpmLimit: number;
}

export interface SimBalancePatch {
  diemMicro?: bigint;
  usdMicro?: bigint;
  diemCapMicro?: bigint | null;
  allocationMicro?: bigint;
  /** set the epoch spend counter (e.g. 0n to lift a reached cap) */
  spentDiemEpochMicro?: bigint;
}

export interface RateWindow {
  startMs: number;
  requests: number;
  tokens: number;
}

export interface KeyRecord {
  key: string;
  diemMicro: bigint;
  usdMicro: bigint;
  diemCapMicro: bigint | null;
  allocationMicro: bigint;
  spentDiemEpochMicro: bigint;
  revoked: boolean;
  alphaAccess: boolean;
  inFlight: number;
  peakInFlight: number;
  rpmLimit: number;
  tpmLimit: number;
  windows: Map<string, RateWindow>;
}

export type SimKeyRecord = KeyRecord;

export const DEFAULT_RPM_LIMIT = 100_000;
export const DEFAULT_TPM_LIMIT = 100_000_000;

function availableDiem(k: KeyRecord): bigint {
  if (k.diemCapMicro === null) return k.diemMicro;
  const capLeft = k.diemCapMicro - k.spentDiemEpochMicro;
  const clampedCap = capLeft > 0n ? capLeft : 0n;
  return k.diemMicro < clampedCap ? k.diemMicro : clampedCap;
}

/**
 * Admission check for token-priced requests: the key's DIEM cap reached → "spend_limit"; no positive
 * DIEM and no positive USD → "insufficient"; else null.
 */
export function admissionFailure(k: KeyRecord): "spend_limit" | "insufficient" | null {
  if (k.diemCapMicro !== null && k.spentDiemEpochMicro >= k.diemCapMicro) return "spend_limit";
  if (k.diemMicro <= 0n && k.usdMicro <= 0n) return "insufficient";
  return null;
}

export function availableDiemMicro(k: KeyRecord): bigint {
  return availableDiem(k);
}

/**
 * Debits a finished token-priced request: the whole burn goes to DIEM when the DIEM balance
 * is positive (it may go slightly negative), else to USD when USD is positive, else to DIEM anyway
 * (the request already ran). DIEM debits count against the key's epoch spend.
 */
export function debitBurn(k: KeyRecord, burnMicro: bigint): { diemMicro: bigint; usdMicro: bigint } {
  if (burnMicro <= 0n) return { diemMicro: 0n, usdMicro: 0n };
  if (k.diemMicro <= 0n && k.usdMicro > 0n) {
    k.usdMicro -= burnMicro;
    return { diemMicro: 0n, usdMicro: burnMicro };
  }
  k.diemMicro -= burnMicro;
  k.spentDiemEpochMicro += burnMicro;
  return { diemMicro: burnMicro, usdMicro: 0n };
}

/**
 * Debits a prepaid (quoted) amount up front, only if one currency covers it whole
 * (DIEM first, then USD, within the key's DIEM cap). Returns null when it does not fit.
 */
export function debitPrepaid(k: KeyRecord, amountMicro: bigint): { diemMicro: bigint; usdMicro: bigint } | null {
  if (amountMicro <= 0n) return { diemMicro: 0n, usdMicro: 0n };
  if (availableDiem(k) >= amountMicro) {
    k.diemMicro -= amountMicro;
    k.spentDiemEpochMicro += amountMicro;
    return { diemMicro: amountMicro, usdMicro: 0n };
  }
  if (k.usdMicro >= amountMicro) {
    k.usdMicro -= amountMicro;
    return { diemMicro: 0n, usdMicro: amountMicro };
  }
  return null;
}

/** @internal Gives back a prepaid charge (failed/refunded media jobs). */
export function refundCharge(k: KeyRecord, charged: { diemMicro: bigint; usdMicro: bigint }): void {
  k.diemMicro += charged.diemMicro;
  k.spentDiemEpochMicro -= charged.diemMicro;
  k.usdMicro += charged.usdMicro;
}
