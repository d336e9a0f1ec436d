import type { Db } from "../../adapters/db.js";
import type { Clock } from "../../lib/clock.js";

/** How long dead sessions are kept for audit before they are purged. */
export const SESSION_RETENTION_MS = 7 * 24 * 3600 * 1000;

export interface PurgeResult {
  siweNonces: number;
  sessions: number;
}

/** Housekeeping that keeps tables small; idempotent, safe to run from several workers at once. */
export class MaintenanceService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /**
   * Deletes expired SIWE nonces and sessions that ended (expired or revoked) more than
   * SESSION_RETENTION_MS ago. Touches no money.
   */
  async purgeExpired(): Promise<PurgeResult> {
    const now = this.clock.now();
    const cutoff = new Date(now.getTime() - SESSION_RETENTION_MS);
    const [nonces, sessions] = await this.db.$transaction([
      this.db.siweNonce.deleteMany({ where: { expiresAt: { lt: now } } }),
      this.db.session.deleteMany({
        where: {
          OR: [{ absoluteExpiresAt: { lt: cutoff } }, { expiresAt: { lt: cutoff } }, { revokedAt: { lt: cutoff } }],
        },
      }),
    ]);
    return { siweNonces: nonces.count, sessions: sessions.count };
  }
}
