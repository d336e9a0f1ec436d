import type { InFlightRegistry } from "../../../adapters/redis/in-flight.js";
import type { Clock } from "../../../lib/clock.js";
import { logger } from "../../../lib/logger.js";
import type { InferenceSession } from "./session.js";

/** A stream's in-flight record lives this long unless renewed (it goes when the record is written). */
export const REQUEST_LEASE_MS = 15 * 60_000;
/** A long stream renews its in-flight record this often (gate slots and escrow are the process's, kept by heartbeats). */
export const RENEW_EVERY_MS = 5 * 60_000;

/**
 * A stream's support reference is in its headers before its record exists (records are written
 * when a request ends): the bridge keeps an in-flight record in Redis meanwhile, so the reference
 * resolves from any process while the stream runs.
 */
export class InFlightBridge {
  /** the streams this process bridges, by support reference: the record being stored, when last renewed (epoch ms) */
  private readonly streams = new Map<string, { stored: Promise<void>; renewedAt: number }>();

  constructor(
    private readonly inFlight: InFlightRegistry | undefined,
    private readonly clock: Clock,
  ) {}

  /** Stores the stream's in-flight record (not awaited by the request). */
  open(session: InferenceSession): void {
    if (!this.inFlight) return;
    const stored = this.inFlight
      .put(
        {
          requestId: session.requestId,
          supportReference: session.supportReference,
          accountId: session.accountId,
          ...(session.apiKeyId ? { apiKeyId: session.apiKeyId } : {}),
          route: session.route,
          model: session.model.id,
          stream: true,
          maxPriceCents: session.effectiveCeilingCents,
          startedAt: session.startedAt.toISOString(),
        },
        REQUEST_LEASE_MS,
      )
      .catch((e) => logger.warn({ err: e }, "in-flight record not stored"));
    this.streams.set(session.supportReference, { stored, renewedAt: session.startedAt.getTime() });
  }

  /** Keeps a long stream's record alive; cheap to call often, works at most every RENEW_EVERY_MS. */
  async renew(session: InferenceSession, force = false): Promise<void> {
    const bridged = this.streams.get(session.supportReference);
    const now = this.clock.now().getTime();
    if (!bridged || (!force && now - bridged.renewedAt < RENEW_EVERY_MS)) return;
    bridged.renewedAt = now;
    await this.inFlight?.renew(session.supportReference, REQUEST_LEASE_MS).catch(() => undefined);
  }

  /** The stream's record is written (or could not be): its in-flight record goes. */
  async close(session: InferenceSession): Promise<void> {
    const bridged = this.streams.get(session.supportReference);
    if (!bridged || !this.inFlight) return;
    this.streams.delete(session.supportReference);
    await bridged.stored;
    await this.inFlight.drop(session.supportReference).catch(() => undefined);
  }
}
