import { Webhook } from "standardwebhooks";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { PostWebhook } from "../../adapters/webhooks/http-post.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import { type Metrics, noMetrics } from "../../lib/metrics.js";
import type { SecretBox } from "../../lib/secret-box.js";
import type { DeliveryQueue, WebhookOutbox } from "./outbox.js";
import { webhookDisabledData } from "./payloads.js";
import { checkTarget, type UrlRules } from "./url-guard.js";
import { openSecret } from "./webhook-secret.js";

/** One attempt's whole exchange (connect, send, the status line) is bounded by this. */
export const DELIVERY_TIMEOUT_MS = 10_000;
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
  /** the delays before each retry (WEBHOOK_RETRY_SCHEDULE_MS): attempts in all = its length + 1 */
  retryScheduleMs: readonly number[];
  /** operators' counters: each attempt's outcome (`svc_webhook_deliveries_total`); none by default */
  metrics?: Metrics;
}

export type DeliveryOutcome = "delivered" | "retrying" | "failed" | "stale";

/**
 * One delivery attempt of one outbox row (the `webhooks` worker's `deliver` job): the body
 * `{type, timestamp, data}` signed as Standard Webhooks (`webhook-id` = the row's id on every
 * attempt, `webhook-timestamp` = now, `webhook-signature` = v1 HMAC-SHA256 with the endpoint's
 * secret), POSTed to the endpoint's URL after its addresses are checked again (a name now resolving
 * somewhere private is refused, and the connection goes to the address checked). A 2xx delivers it;
 * anything else (another status, a refusal, a timeout, an address refused) is retried after the
 * next delay of the schedule; when the last attempt fails the row is `failed` and its endpoint is
 * disabled (`webhook.disabled`). Each step is a conditional write on (status, attempts), so a
 * stale or doubled job changes nothing. Every outcome but `stale` is counted for operators.
 */
export class WebhookDelivery {
  constructor(private readonly deps: DeliveryDeps) {}

  get maxAttempts(): number {
    return this.deps.retryScheduleMs.length + 1;
  }

  async deliver(eventId: string, attempt: number): Promise<DeliveryOutcome> {
    const outcome = await this.attempt(eventId, attempt);
    if (outcome !== "stale") (this.deps.metrics ?? noMetrics).webhookDelivery(outcome);
    return outcome;
  }

  private async attempt(eventId: string, attempt: number): Promise<DeliveryOutcome> {
    const { db, clock } = this.deps;
    const event = await db.webhookEvent.findUnique({ where: { id: eventId }, include: { endpoint: true } });
    if (event?.status !== "pending" || event.attempts !== attempt) return "stale";
    const endpoint = event.endpoint;
    if (endpoint.status !== "active") {
      await db.webhookEvent.updateMany({
        where: { id: eventId, status: "pending" },
        data: { status: "failed", lastError: "the endpoint is disabled" },
      });
      return "failed";
    }
    const body = JSON.stringify({ type: event.type, timestamp: event.createdAt.toISOString(), data: event.payload });
    const now = clock.now();
    let result: { status: number | null; error: string | null };
    const target = await checkTarget(endpoint.url, this.deps.rules);
    if (!target.ok) {
      result = { status: null, error: `address refused: ${target.reason}` };
    } else {
      const secret = openSecret(this.deps.secrets, endpoint);
      const signature = new Webhook(secret).sign(event.id, now, body);
      const r = await this.deps.post({
        url: target.url,
        address: target.address,
        headers: {
          "content-type": "application/json",
          "user-agent": "svc-webhooks/1",
          "webhook-id": event.id,
          "webhook-timestamp": Math.floor(now.getTime() / 1000).toString(),
          "webhook-signature": signature,
        },
        body,
        timeoutMs: DELIVERY_TIMEOUT_MS,
      });
      result = r.ok
        ? { status: r.status, error: r.status >= 200 && r.status < 300 ? null : `HTTP ${r.status}` }
        : { status: null, error: r.error };
    }
    const at = clock.now();
    if (result.error === null) return this.delivered(event, endpoint.accountId, result.status, at);
    return this.failedAttempt(event, endpoint, result, at);
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
