import { MAX_OFFER_PRICE_CENTS, MICRO, MIN_OFFER_PRICE_CENTS, parseDecimal6 } from "../lib/money.js";
import { decimal6, pageQuery, timestamp, uuid, uuidField, z } from "./common.js";

/**
 * SPEC "Supplier (session)". Bodies and the GraphQL mutations' arguments: each field's type and
 * bounds are checked here (400 naming the field, nothing changed) — the price 1-80, the quantity's
 * six decimals and bounds, the label's and the secret's lengths — for REST and GraphQL alike; the
 * service checks what needs the database or the whole request (one live offer per key, a
 * schedule's order, something to change).
 */

/** Sanity bound on one offer (docs/decisions.md "Supply"): 1 000 000 DIEM. */
export const MAX_OFFER_QUANTITY_MICRO_DIEM = 1_000_000n * MICRO;
export const MAX_LABEL_LENGTH = 64;
export const MAX_UPSTREAM_SECRET_LENGTH = 512;

const TEXT = { required_error: "is required", invalid_type_error: "must be a string" };

/** An upstream key's label: trimmed, 1-64 characters. */
export const upstreamKeyLabel = z
  .string(TEXT)
  .trim()
  .min(1, `must be 1-${MAX_LABEL_LENGTH} characters`)
  .max(MAX_LABEL_LENGTH, `must be 1-${MAX_LABEL_LENGTH} characters`);

const SECRET_MESSAGE = `must be 1-${MAX_UPSTREAM_SECRET_LENGTH} printable characters without spaces`;

/** An upstream secret as sent: 1-512 printable ASCII characters, no spaces. */
export const upstreamSecret = z
  .string(TEXT)
  .min(1, "must be a non-empty string")
  .max(MAX_UPSTREAM_SECRET_LENGTH, SECRET_MESSAGE)
  .regex(/^[\x21-\x7e]+$/, SECRET_MESSAGE);

export const registerUpstreamKeyBody = z
  .object({
    upstreamApiKey: upstreamSecret.openapi({
      description: "the upstream provider key; stored encrypted, never shown again",
    }),
    label: upstreamKeyLabel,
  })
  .openapi("RegisterUpstreamKeyRequest");

const PRICE_MESSAGE = `must be an integer ${MIN_OFFER_PRICE_CENTS}-${MAX_OFFER_PRICE_CENTS}`;
const QUANTITY_TYPE_MESSAGE = 'must be a decimal string such as "25.000000"';

/** An offer's price (and a schedule step's): an integer 1-80. */
export const offerPriceCents = z
  .number({ required_error: "is required", invalid_type_error: PRICE_MESSAGE })
  .int(PRICE_MESSAGE)
  .min(MIN_OFFER_PRICE_CENTS, PRICE_MESSAGE)
  .max(MAX_OFFER_PRICE_CENTS, PRICE_MESSAGE);

/** An offer's quantity in micro-DIEM (GraphQL `MicroDiem`): above 0, at most 1 000 000 DIEM. */
export const offerQuantityMicroDiem = z
  .bigint({ required_error: "is required", invalid_type_error: "must be micro-DIEM" })
  .refine((q) => q > 0n, "must be greater than 0")
  .refine((q) => q <= MAX_OFFER_QUANTITY_MICRO_DIEM, "must be at most 1000000 DIEM");

/** A decimal string with exactly six decimals ("12.500000"): nothing rounded or padded ("12.5", "1" are refused). */
const SIX_DECIMALS = /^\d{1,15}\.\d{6}$/;

/** The same quantity as DIEM text with six decimals (REST), parsed to micro-DIEM. */
export const offerQuantityDiem = z
  .string({ required_error: "is required", invalid_type_error: QUANTITY_TYPE_MESSAGE })
  .regex(SIX_DECIMALS, 'must be a decimal string with exactly six decimals, e.g. "25.000000"')
  .transform((v) => parseDecimal6(v) ?? 0n)
  .pipe(offerQuantityMicroDiem);
/** At most this many steps in a schedule (the service's `MAX_SCHEDULE_STEPS`, documented here). */
const MAX_STEPS = 24;

/** One step of a price schedule: from `fromUtc` on (UTC, today) the offer's price is this. */
export const priceStep = z
  .object({
    fromUtc: z
      .string({ required_error: "is required", invalid_type_error: 'must be a UTC time "HH:MM"' })
      .openapi({ pattern: "^([01]\\d|2[0-3]):[0-5]\\d$", example: "20:00", description: "UTC, HH:MM" }),
    priceCentsPerDollar: offerPriceCents.openapi({
      type: "integer",
      minimum: MIN_OFFER_PRICE_CENTS,
      maximum: MAX_OFFER_PRICE_CENTS,
    }),
  })
  .openapi("PriceStep");

/** What makes an offer standing and scheduled; on PATCH `null` removes a cap or a schedule. */
const standingFields = {
  repostDaily: z.boolean({ invalid_type_error: "must be true or false" }).optional().openapi({
    description: "a standing offer: posted again on the same key at each UTC midnight (default false)",
  }),
  dailyQuantityDiem: offerQuantityDiem.nullable().optional().openapi({
    description:
      "caps the quantity of each daily repost (DIEM, six decimals); absent or null: the key's whole fresh balance",
    example: "20.000000",
  }),
  schedule: z
    .array(priceStep, { invalid_type_error: "must be a list of steps {fromUtc, priceCentsPerDollar}, or null" })
    .nullable()
    .optional()
    .openapi({
      minItems: 1,
      maxItems: MAX_STEPS,
      description: `price steps through the UTC day: 1-${MAX_STEPS}, \`fromUtc\` strictly increasing; the effective price is the step whose time most recently passed today, else \`priceCentsPerDollar\`; null: none`,
    }),
};

export const postOfferBody = z
  .object({
    priceCentsPerDollar: offerPriceCents.openapi({
      type: "integer",
      minimum: MIN_OFFER_PRICE_CENTS,
      maximum: MAX_OFFER_PRICE_CENTS,
    }),
    quantityDiem: offerQuantityDiem.openapi({
      description: "DIEM, a decimal string with exactly six decimals",
      example: "25.000000",
    }),
    upstreamKeyId: uuidField("upstreamKeyId")
      .transform((s) => s.toLowerCase())
      .openapi({ format: "uuid" }),
    ...standingFields,
  })
  .openapi("PostOfferRequest");

/**
 * Reprice, pause (`status: paused`) or unpause (`status: active`), and the standing settings
 * (`repostDaily`, `dailyQuantityDiem`, `schedule`).
 */
export const patchOfferBody = z
  .object({
    priceCentsPerDollar: offerPriceCents
      .optional()
      .openapi({ type: "integer", minimum: MIN_OFFER_PRICE_CENTS, maximum: MAX_OFFER_PRICE_CENTS }),
    status: z.enum(["paused", "active"], { errorMap: () => ({ message: 'must be "paused" or "active"' }) }).optional(),
    ...standingFields,
  })
  .openapi("PatchOfferRequest");

/**
 * The GraphQL twins of the offer bodies (graphql/validate.ts `withInput`): the same field rules on
 * GraphQL's names (`quantity` and `dailyQuantity` in micro-DIEM). `registerUpstreamKey` and the
 * id inputs use the REST schemas themselves (`registerUpstreamKeyBody`, `idParam`).
 */
export const postOfferInput = z.object({
  priceCentsPerDollar: offerPriceCents,
  quantity: offerQuantityMicroDiem,
  upstreamKeyId: uuidField("upstreamKeyId").transform((s) => s.toLowerCase()),
  dailyQuantity: offerQuantityMicroDiem.nullish(),
  schedule: z.array(priceStep).nullish(),
});

export const updateOfferInput = z.object({
  priceCentsPerDollar: offerPriceCents.nullish(),
  dailyQuantity: offerQuantityMicroDiem.nullish(),
  schedule: z.array(priceStep).nullish(),
});

/**
 * The record's two derived fields, defined beside the schemas that show them: REST, GraphQL and the
 * webhook payloads (`offer.*`, `upstream_key.unhealthy`) all compute them here.
 */

/** The masked display of an upstream key (`maskedKey`): `…` plus the last four characters the row keeps. */
export function maskedKey(secretLast4: string): string {
  return `…${secretLast4}`;
}

/** What an offer has sold (`soldDiem`): its quantity less what remains (in-flight holds are not sold yet). */
export function soldMicroDiem(o: { quantityMicroDiem: bigint; remainingMicroDiem: bigint }): bigint {
  return o.quantityMicroDiem - o.remainingMicroDiem;
}

export const upstreamKeyStatus = z.enum(["active", "auth_failed", "revoked"]);

export const upstreamKeyResponse = z
  .object({
    id: uuid,
    label: z.string(),
    status: upstreamKeyStatus,
    maskedKey: z.string(),
    balanceDiem: decimal6.nullable(),
    lastBalanceAt: timestamp.nullable(),
    authFailedAt: timestamp.nullable(),
    cooldownUntil: timestamp.nullable(),
    createdAt: timestamp,
    revokedAt: timestamp.nullable(),
    liveOfferId: uuid.nullable(),
  })
  .openapi("UpstreamKey");

export const upstreamKeyList = z.object({ data: z.array(upstreamKeyResponse) }).openapi("UpstreamKeyList");

export const revokeUpstreamKeyResponse = z
  .object({ status: z.literal("ok"), cancelledOffers: z.number().int(), upstreamKey: upstreamKeyResponse })
  .openapi("RevokedUpstreamKey");

export const offerResponse = z
  .object({
    id: uuid,
    upstreamKeyId: uuid,
    keyLabel: z.string(),
    keyStatus: upstreamKeyStatus,
    priceCentsPerDollar: z.number().int().openapi({ description: "the offer's own price" }),
    effectivePriceCentsPerDollar: z.number().int().openapi({
      description:
        "the price it clears at now: its schedule's step that most recently passed today, else priceCentsPerDollar",
    }),
    schedule: z.array(priceStep).nullable(),
    repostDaily: z.boolean(),
    dailyQuantityDiem: decimal6.nullable(),
    repostedFromId: uuid
      .nullable()
      .openapi({ description: "the expired offer this one re-posts; null: posted by you" }),
    quantityDiem: decimal6,
    remainingDiem: decimal6,
    reservedDiem: decimal6,
    soldDiem: decimal6,
    status: z.enum(["active", "paused", "depleted", "expired", "cancelled"]),
    expiresAt: timestamp.openapi({ description: "DIEM expires at UTC midnight" }),
    createdAt: timestamp,
    updatedAt: timestamp,
    endedAt: timestamp.nullable(),
  })
  .openapi("Offer");

export const offerList = z
  .object({ data: z.array(offerResponse), nextCursor: z.string().nullable() })
  .openapi("OfferList");

export const supplyPageQuery = pageQuery;

const payout = z.object({
  id: uuid,
  period: z.string(),
  toAddress: z.string(),
  amountUsdc: decimal6,
  status: z.enum(["pending", "submitted", "confirmed", "failed"]),
  transaction: z.string().nullable(),
  failureReason: z.string().nullable(),
  createdAt: timestamp,
  submittedAt: timestamp.nullable(),
  confirmedAt: timestamp.nullable(),
});

export const supplierLedgerResponse = z
  .object({
    payableUsdc: decimal6.openapi({
      description:
        "Earnings payable and not yet paid out. Negative while a refund of a share already paid out is recovered from later earnings (carried forward; only a balance at or above payoutMinimumUsdc is paid).",
    }),
    heldUsdc: decimal6.openapi({
      description: "Earnings on hold: shares of video jobs not yet final (payable once delivered or expired).",
    }),
    paidOutUsdc: decimal6,
    payoutPendingUsdc: decimal6,
    payoutMinimumUsdc: decimal6,
    recentPayouts: z.array(payout),
    data: z.array(
      z.object({
        id: z.string(),
        book: z.enum(["supplier_payable", "supplier_held"]),
        kind: z.string(),
        amountUsdc: decimal6,
        transactionId: z.string(),
        transactionKind: z.string(),
        createdAt: timestamp,
      }),
    ),
    nextCursor: z.string().nullable(),
  })
  .openapi("SupplierLedger");

export const supplierHistoryResponse = z
  .object({
    data: z.array(
      z.object({
        clearId: z.string(),
        offerId: uuid,
        upstreamKeyId: uuid,
        model: z.string(),
        modality: z.string(),
        priceCentsPerDollar: z.number().int(),
        burnDiem: decimal6,
        grossUsdc: decimal6,
        feeUsdc: decimal6,
        earnedUsdc: decimal6,
        refunded: z.boolean(),
        refundedAt: timestamp.nullable(),
        createdAt: timestamp,
      }),
    ),
    nextCursor: z.string().nullable(),
  })
  .openapi("SupplierInferenceHistory");
