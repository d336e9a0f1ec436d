import { Webhook } from "standardwebhooks";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { DeliveryLanes, DeliveryLease } from "../../adapters/redis/delivery-lanes.js";
import type { PostWebhook } from "../../adapters/webhooks/http-post.js";
import { RESOLVE_TIMEOUT_MS } from "../../adapters/webhooks/resolve-host.js";
import type { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import { type Metrics, noMetrics } from "../../lib/metrics.js";
import type { SecretBox } from "../../lib/secret-box.js";
import type { DeliveryQueue, WebhookOutbox } from "./outbox.js";
import { webhookDisabledData } from "./payloads.js";
import { checkTarget, type UrlRules } from "./url-guard.js";
import { openSecret } from "./webhook-secret.js";

/**
 * Attempts of one account in flight at once, across every worker process (one per endpoint): a
 * receiver that hangs holds at most this many of the worker's slots, for at most the deadline.
 */
export const WEBHOOK_ACCOUNT_IN_FLIGHT = 2;
/** A lane's lease outlives its attempt's own bound (DNS, then the deadline) by this: the attempt's writes. */
const LEASE_MARGIN_MS = 10_000;
/** What is kept of an attempt's error text. */
const MAX_ERROR_LENGTH = 500;

export interface DeliveryDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  secrets: SecretBox;
  rules: UrlRules;
  post: PostWebhook;
  queue: DeliveryQueue;
  outbox: WebhookOutbox;
  /** the per-endpoint and per-account lanes (adapters/redis/delivery-lanes.ts) */
  lanes: DeliveryLanes;
  /** the delays before each retry (WEBHOOK_RETRY_SCHEDULE_MS): attempts in all = its length + 1 */
  retryScheduleMs: readonly number[];
  /** one attempt's deadline, ms (WEBHOOK_TIMEOUT_MS): resolving the host, connect, TLS, the status line */
  timeoutMs: number;
  /** operators' counters: each attempt's outcome (`svc_webhook_deliveries_total`); none by default */
  metrics?: Metrics;
}

/** `queued`: the endpoint or the account had no free lane; the row waits for a lane's hand-off. */
export type DeliveryOutcome = "delivered" | "retrying" | "failed" | "stale" | "queued";

type EventRow = Prisma.WebhookEventGetPayload<object>;
type EndpointRow = Prisma.WebhookEndpointGetPayload<object>;

/**
 * One delivery attempt of one outbox row (the `webhooks` worker's `deliver` job): the body
 * `{type, timestamp, data}` signed as Standard Webhooks (`webhook-id` = the row's id on every
 * attempt, `webhook-timestamp` = now, `webhook-signature` = v1 HMAC-SHA256 with the endpoint's
 * secret), POSTed to the endpoint's URL after its addresses are checked again (a name now resolving
 * somewhere private is refused, and the connection goes to the address checked). A 2xx delivers it;
 * anything else (another status, a refusal, the deadline, an address refused) is retried after the
 * next delay of the schedule; when the last attempt fails the row is `failed` and its endpoint is
 * disabled (`webhook.disabled`). Each step is a conditional write on (status, attempts), so a
 * stale or doubled job changes nothing. Every outcome but `stale` and `queued` is counted for
 * operators, the moment its row is written.
 *
 * Lanes: an attempt runs only with a lease on its endpoint's lane (one at a time) and one of its
 * account's (`WEBHOOK_ACCOUNT_IN_FLIGHT`). A job that finds them full ends at once (`queued`), its row
 * still due; whoever releases a lane of the account hands the free lanes to the account's next due
 * rows (`handOff`), and the sweeper queues any row left behind. So a receiver that hangs until the
 * deadline holds its account's lanes, never another account's worker slots.
 */
export class WebhookDelivery {
  constructor(private readonly deps: DeliveryDeps) {}

  get maxAttempts(): number {
    return this.deps.retryScheduleMs.length + 1;
  }

  /** The longest an attempt may take (DNS, then the deadline), and a margin for its writes. */
  private get leaseMs(): number {
    return RESOLVE_TIMEOUT_MS + this.deps.timeoutMs + LEASE_MARGIN_MS;
  }

  async deliver(eventId: string, attempt: number): Promise<DeliveryOutcome> {
    const { db } = this.deps;
    const event = await db.webhookEvent.findUnique({ where: { id: eventId }, include: { endpoint: true } });
    if (event?.status !== "pending" || event.attempts !== attempt) return "stale";
    const endpoint = event.endpoint;
    if (endpoint.status !== "active") {
      await db.webhookEvent.updateMany({
        where: { id: eventId, status: "pending" },
        data: { status: "failed", lastError: "the endpoint is disabled" },
      });
      this.count("failed");
      return "failed";
    }
    const lease = await this.deps.lanes.take(endpoint.accountId, endpoint.id, this.leaseMs);
    if (!lease) return "queued";
    try {
      // read again under the lease: another job of this row may have attempted it meanwhile
      const current = await db.webhookEvent.findUnique({
        where: { id: eventId },
        select: { status: true, attempts: true },
      });
      if (current?.status !== "pending" || current.attempts !== attempt) return "stale";
      return await this.exchange(event, endpoint);
    } finally {
      await this.handOff(lease);
    }
  }

  /** The POST and its outcome's writes (under the lanes' lease). */
  private async exchange(event: EventRow, endpoint: EndpointRow): Promise<DeliveryOutcome> {
    const { clock, timeoutMs } = this.deps;
    const body = JSON.stringify({ type: event.type, timestamp: event.createdAt.toISOString(), data: event.payload });
    const now = clock.now();
    // one deadline for the attempt: resolving the host counts against it
    const started = Date.now();
    let result: { status: number | null; error: string | null };
    const target = await checkTarget(endpoint.url, this.deps.rules);
    const left = timeoutMs - (Date.now() - started);
    if (!target.ok) {
      result = { status: null, error: `address refused: ${target.reason}` };
    } else if (left <= 0) {
      result = { status: null, error: `no answer within ${timeoutMs} ms` };
    } else {
      const secret = openSecret(this.deps.secrets, endpoint);
      const signature = new Webhook(secret).sign(event.id, now, body);
      const r = await this.deps.post({
        url: target.url,
        address: target.address,
        message: { id: event.id, timestamp: Math.floor(now.getTime() / 1000).toString(), signature },
        body,
        timeoutMs: left,
      });
      result = r.ok
        ? { status: r.status, error: r.status >= 200 && r.status < 300 ? null : `HTTP ${r.status}` }
        : { status: null, error: r.timedOut ? `no answer within ${timeoutMs} ms` : r.error };
    }
    const at = clock.now();
    if (result.error === null) return this.delivered(event, endpoint.accountId, result.status, at);
    return this.failedAttempt(event, endpoint, result, at);
  }

  /** Counts an attempt's outcome for operators, as soon as its row says it (a reader of both agrees). */
  private count(outcome: "delivered" | "retrying" | "failed"): void {
    (this.deps.metrics ?? noMetrics).webhookDelivery(outcome);
  }

  /**
   * Gives the lanes back, then hands the account's free lanes to its next due rows (one job each,
   * named after this lease so it never collides with a row's own job). Never throws: a lease not
   * released lapses with its TTL, a row not handed on is queued by the sweeper.
   */
  private async handOff(lease: DeliveryLease): Promise<void> {
    const { lanes, outbox, queue } = this.deps;
    try {
      await lanes.release(lease);
      const busy = await lanes.busyEndpoints(lease.accountId);
      const next = await outbox.nextDue(lease.accountId, busy, WEBHOOK_ACCOUNT_IN_FLIGHT - busy.length);
      for (const row of next) await queue.enqueue(row.id, row.attempts, 0, lease.token);
    } catch (err) {
      logger.warn(
        { err, accountId: lease.accountId },
        "webhook lanes not handed on; the sweeper will queue what is due",
      );
    }
  }

  private async delivered(
    event: { id: string; endpointId: string; attempts: number },
    accountId: string,
    status: number | null,
    at: Date,
  ): Promise<DeliveryOutcome> {
    const { db } = this.deps;
    const moved = await db.webhookEvent.updateMany({
      where: { id: event.id, status: "pending", attempts: event.attempts },
      data: {
        status: "delivered",
        attempts: event.attempts + 1,
        lastStatusCode: status,
        lastError: null,
        lastAttemptAt: at,
        deliveredAt: at,
      },
    });
    if (moved.count !== 1) return "stale";
    this.count("delivered");
    await db.webhookEndpoint.updateMany({ where: { id: event.endpointId }, data: { consecutiveFailures: 0 } });
    this.publish(accountId, `delivery:${event.id}:delivered`, at);
    return "delivered";
  }

  private async failedAttempt(
    event: { id: string; endpointId: string; attempts: number; type: string },
    endpoint: { id: string; accountId: string; url: string },
    result: { status: number | null; error: string | null },
    at: Date,
  ): Promise<DeliveryOutcome> {
    const { db } = this.deps;
    const attempts = event.attempts + 1;
    const error = (result.error ?? "failed").slice(0, MAX_ERROR_LENGTH);
    if (attempts < this.maxAttempts) {
      const delay = this.deps.retryScheduleMs[event.attempts] ?? 0;
      const moved = await db.webhookEvent.updateMany({
        where: { id: event.id, status: "pending", attempts: event.attempts },
        data: {
          attempts,
          lastStatusCode: result.status,
          lastError: error,
          lastAttemptAt: at,
          nextAttemptAt: new Date(at.getTime() + delay),
        },
      });
      if (moved.count !== 1) return "stale";
      this.count("retrying");
      await db.webhookEndpoint.updateMany({
        where: { id: endpoint.id },
        data: { consecutiveFailures: { increment: 1 } },
      });
      try {
        await this.deps.queue.enqueue(event.id, attempts, delay);
      } catch (err) {
        logger.warn({ err, eventId: event.id }, "webhook retry not queued; the sweeper will queue it when due");
      }
      this.publish(endpoint.accountId, `delivery:${event.id}:pending`, at);
      return "retrying";
    }
    // the last attempt failed: the event fails and its endpoint is disabled, with a notice to the
    // account's other endpoints that take `webhook.disabled`
    const reason = `Every attempt to deliver ${event.type} ${event.id} failed (${attempts} attempts over the retry schedule); the last: ${error}`;
    const notices = await db.$transaction(async (tx) => {
      const moved = await tx.webhookEvent.updateMany({
        where: { id: event.id, status: "pending", attempts: event.attempts },
        data: { status: "failed", attempts, lastStatusCode: result.status, lastError: error, lastAttemptAt: at },
      });
      if (moved.count !== 1) return null;
      const disabled = await tx.webhookEndpoint.updateMany({
        where: { id: endpoint.id, status: "active" },
        data: {
          status: "disabled",
          disabledReason: reason.slice(0, 1000),
          disabledAt: at,
          updatedAt: at,
          consecutiveFailures: { increment: 1 },
        },
      });
      if (disabled.count !== 1) return [];
      await tx.webhookEvent.updateMany({
        where: { endpointId: endpoint.id, status: "pending" },
        data: { status: "failed", lastError: "the endpoint was disabled" },
      });
      return this.deps.outbox.emit(
        tx,
        endpoint.accountId,
        "webhook.disabled",
        webhookDisabledData({ id: endpoint.id, url: endpoint.url, disabledReason: reason, disabledAt: at }),
      );
    });
    if (notices === null) return "stale";
    this.count("failed");
    await this.deps.outbox.dispatch(notices);
    logger.warn({ endpointId: endpoint.id, eventId: event.id }, "webhook endpoint disabled after repeated failures");
    this.publish(endpoint.accountId, `webhook:${endpoint.id}:disabled`, at);
    return "failed";
  }

  /** The owner's dashboard hears of it (GraphQL `webhookUpdated`); a failed publish changes nothing. */
  private publish(accountId: string, kind: string, at: Date): void {
    this.deps.bus.publish("webhookUpdated", accountId, { accountId, kind, at: at.toISOString() });
  }
}
