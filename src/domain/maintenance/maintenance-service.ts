import { type Db, PARTITION_MONTHS_AHEAD } from "../../adapters/db.js";
import type { Clock } from "../../lib/clock.js";

/** How long dead sessions are kept for audit before they are purged. */
export const SESSION_RETENTION_MS = 7 * 24 * 3600 * 1000;

/**
 * How long a payment-identifier id stays bound to its request (docs/decisions.md "Idempotent
 * payments"): a day, far beyond any payment's validity window (x402's `maxTimeoutSeconds`, an
 * authorization's `validBefore`: minutes to an hour). Past it the signed payment itself cannot move
 * money again — its nonce is spent or expired, and payments are unique per payer and nonce — so
 * forgetting the id can never let one payment pay twice.
 */
export const PAYMENT_IDENTIFIER_RETENTION_MS = 24 * 3600 * 1000;

export interface PurgeResult {
  siweNonces: number;
  sessions: number;
  /** payment-identifier ids claimed more than PAYMENT_IDENTIFIER_RETENTION_MS ago */
  paymentIdentifiers: number;
}

/** Housekeeping that keeps tables small; idempotent, safe to run from several workers at once. */
export class MaintenanceService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /**
   * Deletes expired SIWE nonces, sessions that ended (expired or revoked) more than
   * SESSION_RETENTION_MS ago, and payment-identifier ids claimed more than
   * PAYMENT_IDENTIFIER_RETENTION_MS ago (answered or not: a claim that old belongs to a request long
   * gone). Touches no money.
   */
  async purgeExpired(): Promise<PurgeResult> {
    const now = this.clock.now();
    const cutoff = new Date(now.getTime() - SESSION_RETENTION_MS);
    const idCutoff = new Date(now.getTime() - PAYMENT_IDENTIFIER_RETENTION_MS);
    const [nonces, sessions, ids] = await this.db.$transaction([
      this.db.siweNonce.deleteMany({ where: { expiresAt: { lt: now } } }),
      this.db.session.deleteMany({
        where: {
          OR: [{ absoluteExpiresAt: { lt: cutoff } }, { expiresAt: { lt: cutoff } }, { revokedAt: { lt: cutoff } }],
        },
      }),
      this.db.paymentIdentifier.deleteMany({ where: { createdAt: { lt: idCutoff } } }),
    ]);
    return { siweNonces: nonces.count, sessions: sessions.count, paymentIdentifiers: ids.count };
  }

  /**
   * Creates the monthly partitions of `inference_requests` and `clears` for this month and the next
   * PARTITION_MONTHS_AHEAD, and moves any row the DEFAULT partition caught into its month
   * (svc_partitions_ensure; docs/decisions.md "Monthly partitions and retention"). Returns the
   * partitions it created; idempotent (an advisory lock serialises concurrent runs).
   */
  async ensurePartitions(): Promise<{ created: string[] }> {
    const rows = await this.db.$queryRaw<{ part: string }[]>`
      SELECT svc_partitions_ensure(${this.clock.now()}::timestamptz, ${PARTITION_MONTHS_AHEAD}::int) AS part`;
    return { created: rows.map((r) => r.part) };
  }
}
