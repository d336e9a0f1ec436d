import { MAX_OFFER_PRICE_CENTS, MIN_OFFER_PRICE_CENTS } from "../lib/money.js";
import { decimal6, pageQuery, timestamp, uuid, z } from "./common.js";

/**
 * SPEC "Supplier (session)". Bodies: types are checked here (400 naming the field); ranges and
 * rules (price 1-80, the quantity's six decimals, one live offer per key) in the service.
 */

export const registerUpstreamKeyBody = z
  .object({
    upstreamApiKey: z
      .string({ required_error: "is required", invalid_type_error: "must be a string" })
      .openapi({ description: "the upstream provider key; stored encrypted, never shown again" }),
    label: z.string({ required_error: "is required", invalid_type_error: "must be a string" }),
  })
  .openapi("RegisterUpstreamKeyRequest");

const PRICE_MESSAGE = `must be an integer ${MIN_OFFER_PRICE_CENTS}-${MAX_OFFER_PRICE_CENTS}`;

export const postOfferBody = z
  .object({
    priceCentsPerDollar: z
      .number({ required_error: "is required", invalid_type_error: PRICE_MESSAGE })
      .openapi({ type: "integer", minimum: MIN_OFFER_PRICE_CENTS, maximum: MAX_OFFER_PRICE_CENTS }),
    quantityDiem: z
      .string({ required_error: "is required", invalid_type_error: 'must be a decimal string such as "25.000000"' })
      .openapi({ description: "DIEM, a decimal string with exactly six decimals", example: "25.000000" }),
    upstreamKeyId: z
      .string({ required_error: "is required", invalid_type_error: "must be a uuid" })
      .openapi({ format: "uuid" }),
  })
  .openapi("PostOfferRequest");

/** Reprice, pause (`status: paused`) or unpause (`status: active`). */
export const patchOfferBody = z
  .object({
    priceCentsPerDollar: z
      .number({ invalid_type_error: PRICE_MESSAGE })
      .optional()
      .openapi({ type: "integer", minimum: MIN_OFFER_PRICE_CENTS, maximum: MAX_OFFER_PRICE_CENTS }),
    status: z.enum(["paused", "active"], { errorMap: () => ({ message: 'must be "paused" or "active"' }) }).optional(),
  })
  .openapi("PatchOfferRequest");

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
    priceCentsPerDollar: z.number().int(),
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
    payableUsdc: decimal6,
    paidOutUsdc: decimal6,
    payoutPendingUsdc: decimal6,
    payoutMinimumUsdc: decimal6,
    recentPayouts: z.array(payout),
    data: z.array(
      z.object({
        id: z.string(),
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
