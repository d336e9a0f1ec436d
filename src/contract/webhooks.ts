import { formatDecimal6 } from "../lib/money.js";
import {
  boundedInt,
  decimal6,
  pageQuery,
  positiveMicroUsdc,
  positiveUsdc,
  timestamp,
  uuid,
  uuidField,
  z,
} from "./common.js";

/**
 * Webhooks: the event types, the registration body and the answers of `/v1/webhooks`,
 * shared by the REST routes, GraphQL and the domain (docs/decisions.md "Webhooks").
 */

/** Events about the buyer side of an account: a Bearer key or a session may subscribe to them. */
export const BUYER_WEBHOOK_EVENTS = [
  "credit.confirmed",
  "balance.low",
  "key.budget_exhausted",
  "video.completed",
  "video.refunded",
] as const;

/** Events about the supplier side: only a session may subscribe to them (supply is session-only). */
export const SUPPLIER_WEBHOOK_EVENTS = [
  "offer.depleted",
  "offer.expired",
  "offer.reposted",
  "offer.price_stepped",
  "upstream_key.unhealthy",
  "payout.sent",
] as const;

/** About the webhooks themselves: another endpoint of the account was disabled. */
export const ACCOUNT_WEBHOOK_EVENTS = ["webhook.disabled"] as const;

export const WEBHOOK_EVENT_TYPES = [
  ...BUYER_WEBHOOK_EVENTS,
  ...SUPPLIER_WEBHOOK_EVENTS,
  ...ACCOUNT_WEBHOOK_EVENTS,
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** What `POST /v1/webhooks/{id}/test` sends: to that endpoint only, whatever it subscribes to. */
export const WEBHOOK_TEST_EVENT = "webhook.test";

export const MAX_WEBHOOKS_PER_ACCOUNT = 10;
/** `POST /v1/webhooks/{id}/test` (and GraphQL `sendTestWebhook`) calls per account per minute; then 429 `rate_limited` */
export const WEBHOOK_TESTS_PER_MINUTE = 5;
export const MAX_WEBHOOK_URL_LENGTH = 2048;
export const MAX_WEBHOOK_DESCRIPTION_LENGTH = 256;
/** a balance.low threshold is at most 1,000,000,000 USDC, as a key's limit */
export const MAX_WEBHOOK_THRESHOLD_MICRO_USDC = 1_000_000_000_000_000n;

export function isSupplierEvent(type: string): boolean {
  return (SUPPLIER_WEBHOOK_EVENTS as readonly string[]).includes(type);
}

const NOTHING = "; nothing was changed.";
export const WEBHOOK_URL_MESSAGE = `url must be an absolute https URL of at most ${MAX_WEBHOOK_URL_LENGTH} characters${NOTHING}`;
export const WEBHOOK_EVENTS_MESSAGE = `events must be a list of 1-${WEBHOOK_EVENT_TYPES.length} event types from: ${WEBHOOK_EVENT_TYPES.join(", ")}${NOTHING}`;
export const WEBHOOK_DESCRIPTION_MESSAGE = `description must be a string of at most ${MAX_WEBHOOK_DESCRIPTION_LENGTH} characters${NOTHING}`;
export const WEBHOOK_THRESHOLD_MESSAGE = `balanceLowThresholdUsdc must be a decimal string with six decimals, above 0 and at most ${formatDecimal6(MAX_WEBHOOK_THRESHOLD_MICRO_USDC)} (e.g. "5.000000")${NOTHING}`;

/** `url`: a string that parses as an absolute http(s) URL; the domain adds https, DNS and address rules. */
const url = z
  .string({ required_error: WEBHOOK_URL_MESSAGE, invalid_type_error: WEBHOOK_URL_MESSAGE })
  .min(1, { message: WEBHOOK_URL_MESSAGE })
  .max(MAX_WEBHOOK_URL_LENGTH, { message: WEBHOOK_URL_MESSAGE })
  .refine((s) => /^https?:\/\//i.test(s) && URL.canParse(s), { message: WEBHOOK_URL_MESSAGE })
  .openapi({
    format: "uri",
    maxLength: MAX_WEBHOOK_URL_LENGTH,
    example: "https://example.com/hooks/svc",
    description:
      "https only; it must not resolve to a loopback, private, link-local or metadata address (checked again at every delivery)",
  });

/**
 * `events`: 1 or more known types, each once (a repeat is dropped), in the order sent; any fault is
 * reported on `events` itself (not on an element), so the list is checked whole first.
 */
const events = z
  .preprocess(
    (list, ctx) => {
      const known = WEBHOOK_EVENT_TYPES as readonly unknown[];
      if (Array.isArray(list) && list.length >= 1 && list.length <= 100 && list.every((t) => known.includes(t))) {
        return list;
      }
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: WEBHOOK_EVENTS_MESSAGE, fatal: true });
      return z.NEVER;
    },
    z.array(z.enum(WEBHOOK_EVENT_TYPES)),
  )
  .transform((list) => [...new Set(list)])
  .openapi({
    type: "array",
    items: { type: "string", enum: [...WEBHOOK_EVENT_TYPES] },
    minItems: 1,
    description: `the event types to receive. Supplier events (${SUPPLIER_WEBHOOK_EVENTS.join(", ")}) need a session.`,
    example: ["credit.confirmed", "balance.low"],
  });

const description = z
  .string({ invalid_type_error: WEBHOOK_DESCRIPTION_MESSAGE })
  .max(MAX_WEBHOOK_DESCRIPTION_LENGTH, { message: WEBHOOK_DESCRIPTION_MESSAGE })
  .openapi({ maxLength: MAX_WEBHOOK_DESCRIPTION_LENGTH, example: "billing alerts" });

/** `balanceLowThresholdUsdc`: six decimals, > 0 (micro-USDC after parsing). */
const thresholdUsdc = positiveUsdc({
  message: WEBHOOK_THRESHOLD_MESSAGE,
  maxMicro: MAX_WEBHOOK_THRESHOLD_MICRO_USDC,
  description:
    "`balance.low` fires when a charge takes your confirmed balance from at or above this to below it (required with `balance.low`)",
});

/**
 * A registration as the domain takes it (REST body parsed, or GraphQL's input): the one check of
 * its fields (`WebhookService.register` runs it for every transport). The threshold is micro-USDC.
 */
export const webhookFields = z.object({
  url,
  events,
  description: description.nullish(),
  balanceLowThresholdMicroUsdc: z
    .bigint({ invalid_type_error: WEBHOOK_THRESHOLD_MESSAGE })
    .refine((n) => n > 0n && n <= MAX_WEBHOOK_THRESHOLD_MICRO_USDC, {
      message: WEBHOOK_THRESHOLD_MESSAGE,
      path: [],
    })
    .nullish(),
});
export type WebhookFields = z.infer<typeof webhookFields>;

/** `POST /v1/webhooks`. */
export const createWebhookBody = z
  .object({
    url,
    events,
    description: description.nullish(),
    balanceLowThresholdUsdc: thresholdUsdc.nullish(),
  })
  .openapi("CreateWebhookBody");

/**
 * The GraphQL twin of `createWebhookBody` (graphql/validate.ts `withInput` on `createWebhook`): the
 * same field rules and messages; `balanceLowThresholdUsdc` arrives in micro-USDC (the `MicroUsdc`
 * scalar) and is held to REST's range; `events` arrive as the enum's values (`balance.low`).
 */
export const createWebhookInput = z.object({
  url,
  events,
  description: description.nullish(),
  balanceLowThresholdUsdc: positiveMicroUsdc({
    message: WEBHOOK_THRESHOLD_MESSAGE,
    maxMicro: MAX_WEBHOOK_THRESHOLD_MICRO_USDC,
  }).nullish(),
});

export const webhookResponse = z
  .object({
    id: uuid,
    url: z.string(),
    description: z.string().nullable(),
    events: z.array(z.string()),
    balanceLowThresholdUsdc: decimal6.nullable(),
    status: z.enum(["active", "disabled"]).openapi({
      description:
        "`disabled`: every attempt of an event failed for the whole retry schedule (over 24 h); nothing is sent until `POST /v1/webhooks/{id}/enable`",
    }),
    disabledReason: z
      .string()
      .nullable()
      .openapi({ description: "why it was disabled (the `webhook.disabled` notice)" }),
    disabledAt: timestamp.nullable(),
    consecutiveFailures: z.number().int().openapi({ description: "failed attempts since the last delivered one" }),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .openapi("Webhook");

export const createdWebhookResponse = webhookResponse
  .extend({
    secret: z.string().openapi({
      description: "the signing secret (`whsec_` + base64), shown once: verify deliveries with it (Standard Webhooks)",
      example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    }),
  })
  .openapi("CreatedWebhook");

export const webhookList = z.object({ data: z.array(webhookResponse), cap: z.number().int() }).openapi("WebhookList");

export const webhookDelivery = z
  .object({
    id: uuid.openapi({ description: "the event's `webhook-id`, the same on every attempt" }),
    webhookId: uuid,
    type: z.string(),
    status: z.enum(["pending", "delivered", "failed"]),
    attempts: z.number().int(),
    lastStatusCode: z.number().int().nullable().openapi({ description: "the receiver's last HTTP status" }),
    lastError: z.string().nullable(),
    lastAttemptAt: timestamp.nullable(),
    nextAttemptAt: timestamp.nullable().openapi({ description: "when it is tried again (pending only)" }),
    deliveredAt: timestamp.nullable(),
    createdAt: timestamp,
    data: z.record(z.unknown()).openapi({ description: "the event's `data`, as sent" }),
  })
  .openapi("WebhookDelivery");

export const webhookDeliveryList = z
  .object({ data: z.array(webhookDelivery), nextCursor: z.string().nullable() })
  .openapi("WebhookDeliveryList");

export const webhookDeliveriesQuery = pageQuery;

/** GraphQL `myWebhookDeliveries(webhookId:, limit:, cursor:)`: REST's page rules (1-100, 20 by default). */
export const webhookDeliveriesArgs = z.object({
  webhookId: uuidField("webhookId").transform((s) => s.toLowerCase()),
  limit: boundedInt("limit", 1, 100, 20),
});
