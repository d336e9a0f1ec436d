import { randomUUID } from "node:crypto";
import { lockAccountRow } from "../../adapters/account-lock.js";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { CostBudget } from "../../adapters/redis/budget.js";
import type { DeliveryLanes } from "../../adapters/redis/delivery-lanes.js";
import type { PostWebhook } from "../../adapters/webhooks/http-post.js";
import type { ResolveHost } from "../../adapters/webhooks/resolve-host.js";
import { assertUuid } from "../../contract/common.js";
import { parseWith } from "../../contract/parse.js";
import {
  isSupplierEvent,
  MAX_WEBHOOKS_PER_ACCOUNT,
  WEBHOOK_TEST_EVENT,
  WEBHOOK_TESTS_PER_MINUTE,
  type WebhookEventType,
  webhookFields,
} from "../../contract/webhooks.js";
import type { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { decodeCursor, keysetBefore, type Page, pageOf, pageSize } from "../../lib/cursor.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { Metrics } from "../../lib/metrics.js";
import type { SecretBox } from "../../lib/secret-box.js";
import { type DeliveryOutcome, WebhookDelivery } from "./delivery.js";
import { type DeliveryQueue, WebhookOutbox } from "./outbox.js";
import { webhookTestData } from "./payloads.js";
import { assertWebhookUrl, type UrlRules } from "./url-guard.js";
import { newWebhookSecret, sealSecret } from "./webhook-secret.js";

/** An endpoint as every transport shows it (never its secret). */
export interface WebhookView {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  balanceLowThresholdMicroUsdc: bigint | null;
  status: "active" | "disabled";
  disabledReason: string | null;
  disabledAt: Date | null;
  consecutiveFailures: number;
  createdAt: Date;
  updatedAt: Date;
}

/** One outbox row of an endpoint: the delivery log. */
export interface WebhookDeliveryView {
  id: string;
  webhookId: string;
  type: string;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  deliveredAt: Date | null;
  createdAt: Date;
  data: Record<string, unknown>;
}

/** Who registers: a Bearer key may take buyer events only (supply is session-only). */
export type Credential = "bearer" | "session";

export interface WebhookDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  secrets: SecretBox;
  /** WEBHOOK_ALLOW_PRIVATE */
  allowPrivate: boolean;
  /** WEBHOOK_RETRY_SCHEDULE_MS */
  retryScheduleMs: readonly number[];
  /** WEBHOOK_TIMEOUT_MS: one attempt's deadline */
  timeoutMs: number;
  resolveHost: ResolveHost;
  post: PostWebhook;
  queue: DeliveryQueue;
  /** the delivery lanes: one attempt per endpoint, WEBHOOK_ACCOUNT_IN_FLIGHT per account */
  lanes: DeliveryLanes;
  /** test events per account and minute (WEBHOOK_TESTS_PER_MINUTE points a minute) */
  testBudget: CostBudget;
  /** operators' counters (delivery outcomes); none by default */
  metrics?: Metrics;
}

const VIEW_SELECT = {
  id: true,
  url: true,
  description: true,
  events: true,
  balanceLowThresholdMicroUsdc: true,
  status: true,
  disabledReason: true,
  disabledAt: true,
  consecutiveFailures: true,
  createdAt: true,
  updatedAt: true,
} as const satisfies Prisma.WebhookEndpointSelect;

/**
 * Webhook endpoints (docs/decisions.md "Webhooks"): register, list, delete,
 * rotate the secret, enable again, send a test event, read the delivery log; and, for the worker,
 * one delivery attempt and the sweeper. Every method that takes an `accountId` checks ownership
 * itself: another account's endpoint is 404.
 */
export class WebhookService {
  /** the outbox other services write events to, in their own transactions */
  readonly outbox: WebhookOutbox;
  private readonly delivery: WebhookDelivery;
  private readonly rules: UrlRules;

  constructor(private readonly deps: WebhookDeps) {
    this.rules = { allowPrivate: deps.allowPrivate, resolveHost: deps.resolveHost };
    this.outbox = new WebhookOutbox({ db: deps.db, clock: deps.clock, queue: deps.queue });
    this.delivery = new WebhookDelivery({
      db: deps.db,
      clock: deps.clock,
      bus: deps.bus,
      secrets: deps.secrets,
      rules: this.rules,
      post: deps.post,
      queue: deps.queue,
      outbox: this.outbox,
      lanes: deps.lanes,
      retryScheduleMs: deps.retryScheduleMs,
      timeoutMs: deps.timeoutMs,
      metrics: deps.metrics,
    });
  }

  /**
   * Registers an endpoint: the fields checked (`webhookFields`), the URL checked (https, no
   * private or metadata address, after DNS), at most 10 per account (counted under the account
   * row's lock, as API keys are). Answers it with its signing secret, shown this once.
   * @throws invalid_request a field (named); a supplier event through a Bearer key;
   *   webhook_limit_reached 10 endpoints already
   */
  async register(input: {
    accountId: string;
    credential: Credential;
    url: unknown;
    events: unknown;
    description?: unknown;
    balanceLowThresholdMicroUsdc?: unknown;
  }): Promise<{ webhook: WebhookView; secret: string }> {
    const fields = parseWith(webhookFields, {
      url: input.url,
      events: input.events,
      description: input.description,
      balanceLowThresholdMicroUsdc: input.balanceLowThresholdMicroUsdc,
    });
    const events = fields.events as WebhookEventType[];
    const supplierEvent = events.find(isSupplierEvent);
    if (input.credential === "bearer" && supplierEvent) {
      throw new DomainError(
        "invalid_request",
        `events: ${supplierEvent} is a supplier event; register it signed in (session). An API key may take buyer events only.`,
        { field: "events" },
      );
    }
    const threshold = fields.balanceLowThresholdMicroUsdc ?? null;
    if (events.includes("balance.low") && threshold === null) {
      throw new DomainError(
        "invalid_request",
        "balanceLowThresholdUsdc is required with balance.low (the confirmed balance it fires below); nothing was changed.",
        { field: "balanceLowThresholdUsdc" },
      );
    }
    const url = await assertWebhookUrl(fields.url, this.rules);
    const id = randomUUID();
    const secret = newWebhookSecret();
    const now = this.deps.clock.now();
    const row = await this.deps.db.$transaction(async (tx) => {
      await lockAccountRow(tx, input.accountId);
      const count = await tx.webhookEndpoint.count({ where: { accountId: input.accountId } });
      if (count >= MAX_WEBHOOKS_PER_ACCOUNT) {
        throw new DomainError(
          "webhook_limit_reached",
          `An account may have at most ${MAX_WEBHOOKS_PER_ACCOUNT} webhook endpoints; delete one first (DELETE /v1/webhooks/{id}). Nothing was created.`,
          { cap: MAX_WEBHOOKS_PER_ACCOUNT },
        );
      }
      return tx.webhookEndpoint.create({
        data: {
          id,
          accountId: input.accountId,
          url: url.toString(),
          description: fields.description ?? null,
          events,
          balanceLowThresholdMicroUsdc: threshold,
          ...sealSecret(this.deps.secrets, input.accountId, id, secret),
          createdAt: now,
          updatedAt: now,
        },
        select: VIEW_SELECT,
      });
    });
    return { webhook: viewOf(row), secret };
  }

  /** The account's endpoints, oldest first (at most 10). */
  async list(accountId: string): Promise<WebhookView[]> {
    const rows = await this.deps.db.webhookEndpoint.findMany({
      where: { accountId },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      select: VIEW_SELECT,
    });
    return rows.map(viewOf);
  }

  /** One of the account's endpoints. @throws invalid_request id not a uuid; not_found */
  async get(accountId: string, webhookId: string): Promise<WebhookView> {
    return viewOf(await this.owned(accountId, webhookId));
  }

  /** Deletes an endpoint and its delivery log; pending deliveries stop. @throws not_found */
  async remove(accountId: string, webhookId: string): Promise<void> {
    const id = assertUuid(webhookId, "id");
    const gone = await this.deps.db.webhookEndpoint.deleteMany({ where: { id, accountId } });
    if (gone.count !== 1) throw notFound();
  }

  /**
   * A new signing secret, shown once; the old one stops at once (every later attempt, retries of
   * earlier events included, is signed with the new one). @throws not_found
   */
  async rotateSecret(accountId: string, webhookId: string): Promise<{ webhook: WebhookView; secret: string }> {
    const current = await this.owned(accountId, webhookId);
    const secret = newWebhookSecret();
    const row = await this.deps.db.webhookEndpoint.update({
      where: { id: current.id },
      data: { ...sealSecret(this.deps.secrets, accountId, current.id, secret), updatedAt: this.deps.clock.now() },
      select: VIEW_SELECT,
    });
    return { webhook: viewOf(row), secret };
  }

  /**
   * A disabled endpoint receives events again (from now on: events while it was disabled are not
   * sent). Enabling an active one changes nothing. @throws not_found
   */
  async enable(accountId: string, webhookId: string): Promise<WebhookView> {
    const current = await this.owned(accountId, webhookId);
    if (current.status === "active") return viewOf(current);
    const row = await this.deps.db.webhookEndpoint.update({
      where: { id: current.id },
      data: {
        status: "active",
        disabledReason: null,
        disabledAt: null,
        consecutiveFailures: 0,
        updatedAt: this.deps.clock.now(),
      },
      select: VIEW_SELECT,
    });
    return viewOf(row);
  }

  /**
   * Sends `webhook.test` to the endpoint (through the outbox, as every event): its delivery-log row.
   * At most WEBHOOK_TESTS_PER_MINUTE per account and minute (a fixed window in Redis, whichever the
   * transport); a refused call writes and sends nothing. A Redis that does not answer lets the call
   * through (logged): the delivery lanes still bound what the endpoint costs.
   * @throws not_found; conflict the endpoint is disabled (enable it first); rate_limited (429, Retry-After)
   */
  async sendTest(accountId: string, webhookId: string): Promise<WebhookDeliveryView> {
    const endpoint = await this.owned(accountId, webhookId);
    if (endpoint.status !== "active") {
      throw new DomainError("conflict", "This endpoint is disabled; enable it first (POST /v1/webhooks/{id}/enable).", {
        status: endpoint.status,
      });
    }
    await this.spendTest(accountId);
    const ids = await this.deps.db.$transaction((tx) =>
      this.outbox.emitTo(tx, endpoint.id, WEBHOOK_TEST_EVENT, webhookTestData(endpoint.id)),
    );
    await this.outbox.dispatch(ids);
    const row = await this.deps.db.webhookEvent.findUniqueOrThrow({ where: { id: ids[0] } });
    return deliveryViewOf(row);
  }

  /** An endpoint's delivery log, newest first, keyset-paginated. @throws not_found; invalid_request cursor or limit */
  async deliveries(input: {
    accountId: string;
    webhookId: string;
    limit?: number;
    cursor?: string;
  }): Promise<Page<WebhookDeliveryView>> {
    const endpoint = await this.owned(input.accountId, input.webhookId);
    const take = pageSize(input.limit);
    const after = input.cursor ? decodeCursor(input.cursor) : undefined;
    const rows = await this.deps.db.webhookEvent.findMany({
      where: { endpointId: endpoint.id, ...keysetBefore(after) },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      take: take + 1,
    });
    return pageOf(rows, take, deliveryViewOf, (r) => ({ at: r.createdAt, id: r.id }));
  }

  /** Worker `webhooks`, job `deliver`: one attempt of one outbox row (`WebhookDelivery`). */
  deliver(eventId: string, attempt: number): Promise<DeliveryOutcome> {
    return this.delivery.deliver(eventId, attempt);
  }

  /** Worker `webhooks`, job `sweep`: queues the pending rows whose job was lost (`WebhookOutbox.sweep`). */
  sweep(): Promise<number> {
    return this.outbox.sweep();
  }

  private async spendTest(accountId: string): Promise<void> {
    let spent: Awaited<ReturnType<CostBudget["spend"]>>;
    try {
      spent = await this.deps.testBudget.spend(accountId, 1, this.deps.clock.now());
    } catch (err) {
      logger.warn({ err, accountId }, "webhook test budget unavailable; test event let through");
      return;
    }
    if (!spent.ok) {
      throw new DomainError(
        "rate_limited",
        `At most ${WEBHOOK_TESTS_PER_MINUTE} test events a minute per account; retry after ${spent.retryAfterSeconds} s. Nothing was sent.`,
        { retryAfterSeconds: spent.retryAfterSeconds },
      );
    }
  }

  private async owned(accountId: string, webhookId: string) {
    const id = assertUuid(webhookId, "id");
    const row = await this.deps.db.webhookEndpoint.findUnique({
      where: { id },
      select: { ...VIEW_SELECT, accountId: true },
    });
    if (!row || row.accountId !== accountId) throw notFound();
    return row;
  }
}

function notFound(): DomainError {
  return new DomainError("not_found", "Webhook endpoint not found.");
}

function viewOf(r: Prisma.WebhookEndpointGetPayload<{ select: typeof VIEW_SELECT }>): WebhookView {
  return {
    id: r.id,
    url: r.url,
    description: r.description,
    events: r.events,
    balanceLowThresholdMicroUsdc: r.balanceLowThresholdMicroUsdc,
    status: r.status,
    disabledReason: r.disabledReason,
    disabledAt: r.disabledAt,
    consecutiveFailures: r.consecutiveFailures,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

function deliveryViewOf(r: Prisma.WebhookEventGetPayload<object>): WebhookDeliveryView {
  return {
    id: r.id,
    webhookId: r.endpointId,
    type: r.type,
    status: r.status,
    attempts: r.attempts,
    lastStatusCode: r.lastStatusCode,
    lastError: r.lastError,
    lastAttemptAt: r.lastAttemptAt,
    nextAttemptAt: r.status === "pending" ? r.nextAttemptAt : null,
    deliveredAt: r.deliveredAt,
    createdAt: r.createdAt,
    data: (r.payload ?? {}) as Record<string, unknown>,
  };
}
