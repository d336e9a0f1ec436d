// GraphQL types, queries, mutations and the subscription of webhooks. Same service calls
// as src/http/routes/webhooks.ts (WebhookService): the same checks, ownership and answers; the
// signing secret appears only in the payload of createWebhook and rotateWebhookSecret.
import type { AccountEvent } from "../../adapters/pubsub.js";
import { idParam } from "../../contract/common.js";
import {
  createWebhookInput,
  MAX_WEBHOOK_THRESHOLD_MICRO_USDC,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_TESTS_PER_MINUTE,
  type WebhookEventType,
  webhookDeliveriesArgs,
} from "../../contract/webhooks.js";
import type { WebhookDeliveryView, WebhookView } from "../../domain/webhooks/webhook-service.js";
import { builder } from "../builder.js";
import { withArgs, withInput } from "../validate.js";
import { viewerOrThrow } from "./account.js";
import { JsonRef } from "./catalog.js";

/** `credit.confirmed` ⇄ `CREDIT_CONFIRMED` (GraphQL enum values cannot hold dots). */
const enumName = (type: string) => type.replace(/[.]/g, "_").toUpperCase();

const WebhookEventTypeEnum = builder.enumType("WebhookEventType", {
  description:
    "What a webhook endpoint receives. Supplier events (OFFER_*, UPSTREAM_KEY_UNHEALTHY, PAYOUT_SENT) need a session.",
  values: Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((t) => [enumName(t), { value: t, description: `\`${t}\`` }]),
  ) as unknown as {
    [K in WebhookEventType as Uppercase<K extends `${infer A}.${infer B}` ? `${A}_${B}` : K>]: { value: K };
  },
});

const WebhookStatusEnum = builder.enumType("WebhookStatus", {
  description: "DISABLED: an event failed every attempt of the retry schedule; nothing is sent until enableWebhook.",
  values: { ACTIVE: { value: "active" }, DISABLED: { value: "disabled" } } as const,
});

const WebhookDeliveryStatusEnum = builder.enumType("WebhookDeliveryStatus", {
  values: {
    PENDING: { value: "pending" },
    DELIVERED: { value: "delivered" },
    FAILED: { value: "failed" },
  } as const,
});

const WebhookRef = builder.objectRef<WebhookView>("Webhook").implement({
  description: "A webhook endpoint of the viewer's account (its secret is never shown again).",
  fields: (t) => ({
    id: t.exposeID("id"),
    url: t.exposeString("url"),
    description: t.exposeString("description", { nullable: true }),
    events: t.field({
      type: [WebhookEventTypeEnum],
      resolve: (w) =>
        w.events.filter((e): e is WebhookEventType => (WEBHOOK_EVENT_TYPES as readonly string[]).includes(e)),
    }),
    balanceLowThresholdUsdc: t.field({
      type: "MicroUsdc",
      nullable: true,
      description: "balance.low fires when a charge takes the confirmed balance below this",
      resolve: (w) => w.balanceLowThresholdMicroUsdc,
    }),
    status: t.field({ type: WebhookStatusEnum, resolve: (w) => w.status }),
    disabledReason: t.exposeString("disabledReason", {
      nullable: true,
      description: "the webhook.disabled notice: why it was disabled",
    }),
    disabledAt: t.field({ type: "DateTime", nullable: true, resolve: (w) => w.disabledAt }),
    consecutiveFailures: t.exposeInt("consecutiveFailures"),
    createdAt: t.field({ type: "DateTime", resolve: (w) => w.createdAt }),
    updatedAt: t.field({ type: "DateTime", resolve: (w) => w.updatedAt }),
  }),
});

const WebhookDeliveryRef = builder.objectRef<WebhookDeliveryView>("WebhookDelivery").implement({
  description: "One event sent to an endpoint: the delivery log. `id` is its `webhook-id`, the same on every attempt.",
  fields: (t) => ({
    id: t.exposeID("id"),
    webhookId: t.exposeID("webhookId"),
    type: t.exposeString("type", { description: "the event type (`webhook.test` for a test)" }),
    status: t.field({ type: WebhookDeliveryStatusEnum, resolve: (d) => d.status }),
    attempts: t.exposeInt("attempts"),
    lastStatusCode: t.exposeInt("lastStatusCode", { nullable: true }),
    lastError: t.exposeString("lastError", { nullable: true }),
    lastAttemptAt: t.field({ type: "DateTime", nullable: true, resolve: (d) => d.lastAttemptAt }),
    nextAttemptAt: t.field({ type: "DateTime", nullable: true, resolve: (d) => d.nextAttemptAt }),
    deliveredAt: t.field({ type: "DateTime", nullable: true, resolve: (d) => d.deliveredAt }),
    createdAt: t.field({ type: "DateTime", resolve: (d) => d.createdAt }),
    data: t.field({ type: JsonRef, resolve: (d) => d.data }),
  }),
});

const WebhookDeliveryPageRef = builder
  .objectRef<{ items: WebhookDeliveryView[]; nextCursor: string | null }>("WebhookDeliveryPage")
  .implement({
    fields: (t) => ({
      nodes: t.field({ type: [WebhookDeliveryRef], resolve: (p) => p.items }),
      nextCursor: t.string({ nullable: true, resolve: (p) => p.nextCursor }),
    }),
  });

builder.queryField("myWebhooks", (t) =>
  t.field({
    type: [WebhookRef],
    authScopes: { authenticated: true },
    description: "The viewer's webhook endpoints (GET /v1/webhooks), oldest first; at most 10.",
    resolve: (_root, _args, ctx) => ctx.services.webhooks.list(viewerOrThrow(ctx, "account").accountId),
  }),
);

builder.queryField("myWebhookDeliveries", (t) =>
  t.field({
    type: WebhookDeliveryPageRef,
    authScopes: { authenticated: true },
    description: "One endpoint's delivery log, newest first (GET /v1/webhooks/{id}/deliveries).",
    args: {
      webhookId: t.arg.id({ required: true }),
      limit: t.arg.int({ required: false }),
      cursor: t.arg.string({ required: false }),
    },
    resolve: withArgs(webhookDeliveriesArgs, (_root, args, ctx) =>
      ctx.services.webhooks.deliveries({
        accountId: viewerOrThrow(ctx, "account").accountId,
        webhookId: args.webhookId,
        limit: args.limit,
        cursor: args.cursor ?? undefined,
      }),
    ),
  }),
);

// Parsed by the contract's twin of REST's body (`createWebhookInput`): a refusal reads as REST's 400.
const CreateWebhookInput = builder.inputType("CreateWebhookInput", {
  fields: (t) => ({
    url: t.string({ required: true, description: "https; not a loopback, private, link-local or metadata address" }),
    events: t.field({ type: [WebhookEventTypeEnum], required: true }),
    description: t.string({ description: "at most 256 characters" }),
    balanceLowThresholdUsdc: t.field({
      type: "MicroUsdc",
      description: `required with BALANCE_LOW; micro-USDC, above 0, at most ${MAX_WEBHOOK_THRESHOLD_MICRO_USDC}`,
    }),
  }),
});

/** A payload carrying the endpoint and, once, its secret. */
const WebhookWithSecretRef = builder
  .objectRef<{ webhook: WebhookView; secret: string }>("WebhookWithSecret")
  .implement({
    fields: (t) => ({
      webhook: t.field({ type: WebhookRef, resolve: (p) => p.webhook }),
      secret: t.exposeString("secret", { description: "`whsec_…`, shown this once: verify deliveries with it" }),
    }),
  });

builder.mutationField("createWebhook", (t) =>
  t.field({
    type: WebhookWithSecretRef,
    authScopes: { authenticated: true },
    description:
      "Registers a webhook endpoint (at most 10 per account: webhook_limit_reached). Supplier events need a session.",
    args: { input: t.arg({ type: CreateWebhookInput, required: true }) },
    resolve: withInput(createWebhookInput, (_root, { input }, ctx) => {
      const v = viewerOrThrow(ctx, "account");
      return ctx.services.webhooks.register({
        accountId: v.accountId,
        credential: v.credential,
        url: input.url,
        events: input.events,
        description: input.description,
        balanceLowThresholdMicroUsdc: input.balanceLowThresholdUsdc,
      });
    }),
  }),
);

const WebhookIdInput = builder.inputType("WebhookIdInput", {
  fields: (t) => ({ id: t.id({ required: true }) }),
});

builder.mutationField("deleteWebhook", (t) =>
  t.field({
    type: builder.objectRef<{ id: string }>("DeleteWebhookPayload").implement({
      fields: (f) => ({ id: f.exposeID("id") }),
    }),
    authScopes: { authenticated: true },
    description: "Deletes one of the viewer's endpoints and its delivery log.",
    args: { input: t.arg({ type: WebhookIdInput, required: true }) },
    resolve: withInput(idParam, async (_root, { input }, ctx) => {
      await ctx.services.webhooks.remove(viewerOrThrow(ctx, "account").accountId, input.id);
      return { id: input.id };
    }),
  }),
);

builder.mutationField("rotateWebhookSecret", (t) =>
  t.field({
    type: WebhookWithSecretRef,
    authScopes: { authenticated: true },
    description: "A new signing secret, shown once; the old one stops at once.",
    args: { input: t.arg({ type: WebhookIdInput, required: true }) },
    resolve: withInput(idParam, (_root, { input }, ctx) =>
      ctx.services.webhooks.rotateSecret(viewerOrThrow(ctx, "account").accountId, input.id),
    ),
  }),
);

builder.mutationField("enableWebhook", (t) =>
  t.field({
    type: WebhookRef,
    authScopes: { authenticated: true },
    description: "A disabled endpoint receives events again (from now on).",
    args: { input: t.arg({ type: WebhookIdInput, required: true }) },
    resolve: withInput(idParam, (_root, { input }, ctx) =>
      ctx.services.webhooks.enable(viewerOrThrow(ctx, "account").accountId, input.id),
    ),
  }),
);

builder.mutationField("sendTestWebhook", (t) =>
  t.field({
    type: WebhookDeliveryRef,
    authScopes: { authenticated: true },
    description: `Sends \`webhook.test\` to the endpoint; its delivery-log row (queued). At most ${WEBHOOK_TESTS_PER_MINUTE} a minute per account (with REST's test route): then \`rate_limited\`, nothing sent.`,
    args: { input: t.arg({ type: WebhookIdInput, required: true }) },
    resolve: withInput(idParam, (_root, { input }, ctx) =>
      ctx.services.webhooks.sendTest(viewerOrThrow(ctx, "account").accountId, input.id),
    ),
  }),
);

builder.subscriptionField("webhookUpdated", (t) =>
  t.field({
    type: builder.objectRef<AccountEvent>("WebhookUpdated").implement({
      description:
        "A delivery of the viewer's moved (`delivery:<id>:<status>`) or an endpoint was disabled (`webhook:<id>:disabled`); re-read `myWebhooks` / `myWebhookDeliveries`.",
      fields: (f) => ({
        kind: f.exposeString("kind"),
        at: f.field({ type: "DateTime", resolve: (e) => new Date(e.at) }),
      }),
    }),
    authScopes: { authenticated: true },
    description: "Owner only: fires when a webhook delivery or endpoint of the viewer changes, from any process.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("webhookUpdated", viewerOrThrow(ctx, "account").accountId),
    resolve: (e) => e,
  }),
);
