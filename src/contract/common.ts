import { extendZodWithOpenApi } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { DomainError, ERROR_CODES, type ErrorCode } from "../lib/errors.js";
import { parseDecimal6 } from "../lib/money.js";

/**
 * The API contract's shared pieces. Every contract file imports `z` from here, so zod carries
 * `.openapi()` before any schema is built (ESM runs this module body first).
 *
 * Message convention: a message that begins with its field's name is a whole sentence and is sent as
 * is (`maxPriceCentsPerDollar must be an integer 30-80; nothing was changed.`), so a route that now
 * parses with the contract answers the same 400 the domain answered before; any other message is
 * prefixed with the field (`name: is required`). See http/validate.ts `parse`.
 */
extendZodWithOpenApi(z);

export { z };

/**
 * The code base's one uuid check (zod's `uuid`, 8-4-4-4-12 hex digits, any case): the contract's
 * schemas, the GraphQL arguments and the domain's `assertUuid` all use it.
 */
function uuidString(message?: string) {
  return message
    ? z.string({ required_error: message, invalid_type_error: message }).uuid({ message })
    : z.string().uuid();
}

/** A uuid from a caller, named `field`: the message is the whole sentence `<field> must be a uuid.`. */
export function uuidField(field: string) {
  return uuidString(`${field} must be a uuid.`);
}

/** A UUID the service issued (ids, support references, request ids). */
export const uuid = uuidString().openapi({ format: "uuid", example: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11" });

/** True for a uuid (the check `uuid` makes). */
export function isUuid(value: unknown): value is string {
  return uuid.safeParse(value).success;
}

/**
 * Ids from callers (REST paths and bodies, GraphQL ID arguments, the domain's own guard before a
 * `::uuid` cast): the id lower-cased, or 400 `invalid_request` "`<field>` must be a uuid." naming the field.
 */
export function assertUuid(value: unknown, field: string): string {
  if (!isUuid(value)) throw new DomainError("invalid_request", `${field} must be a uuid.`, { field });
  return value.toLowerCase();
}

/** A six-decimal amount string: USDC or DIEM ("1.250000"); money never leaves as a JSON number. */
export const decimal6 = z
  .string()
  .regex(/^-?\d+\.\d{6}$/)
  .openapi({ pattern: "^-?\\d+\\.\\d{6}$", example: "1.250000" });

/**
 * A positive USDC amount in a request body: a decimal string with six decimals, above 0 and at most
 * `maxMicro`, parsed to micro-USDC (a bigint). `message` is the one answer to every way it can be
 * wrong (it names the field).
 */
export function positiveUsdc(opts: { message: string; maxMicro: bigint; description: string }) {
  return z
    .string({ invalid_type_error: opts.message })
    .regex(/^\d+\.\d{6}$/, { message: opts.message })
    .transform((s, ctx) => {
      const micro = parseDecimal6(s);
      if (micro === undefined || micro <= 0n || micro > opts.maxMicro) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: opts.message });
        return z.NEVER;
      }
      return micro;
    })
    .openapi({ type: "string", pattern: "^\\d+\\.\\d{6}$", example: "5.000000", description: opts.description });
}

/**
 * The same amount as GraphQL's `MicroUsdc` scalar gives it (micro-USDC, already a bigint): the range
 * of `positiveUsdc`, refused with the same `message`, so a GraphQL input and a REST body agree.
 */
export function positiveMicroUsdc(opts: { message: string; maxMicro: bigint }) {
  return z
    .bigint({ invalid_type_error: opts.message })
    .refine((micro) => micro > 0n && micro <= opts.maxMicro, { message: opts.message });
}

/** ISO-8601 timestamp (UTC, `Date.toISOString()`). */
export const timestamp = z.string().datetime().openapi({ format: "date-time", example: "2025-01-31T12:00:00.000Z" });

/** `0x` plus 40 hex characters. */
export const walletAddress = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/)
  .openapi({ pattern: "^0x[0-9a-fA-F]{40}$", example: "0x1111111111111111111111111111111111111111" });

/** `GET /v1/agent/requests/{support_reference}`: the reference from `X-Svc-Support-Reference`. */
export const supportReference = uuidField("support_reference").openapi({
  format: "uuid",
  description: "The support reference of a stored attempt (X-Svc-Support-Reference).",
});

/** Path (and MCP tool) parameter object: `{support_reference}` (lower-cased after validation). */
export const supportReferenceParam = z.object({
  support_reference: supportReference.transform((s) => s.toLowerCase()),
});

/** A path `{id}` that must be a uuid (key and offer ids). */
export const idParam = z.object({
  id: uuidField("id")
    .transform((s) => s.toLowerCase())
    .openapi({ format: "uuid" }),
});

export const errorCode = z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]).openapi("ErrorCode");

/**
 * SPEC "Errors" 3: `{"error":{"code","message",...}}`. The error's details (the offending `field`,
 * supply hints, `supportReference`, `requestId` on a 500, funding's `transaction`/`reconciling`) are
 * rendered inside `error` and mirrored at the top level (docs/decisions.md "Error bodies").
 */
export const errorDetail = z
  .object({
    code: errorCode,
    message: z.string().openapi({ description: "Safe to show." }),
    field: z.string().optional().openapi({ description: "The request field that failed validation." }),
    supportReference: uuid.optional(),
    requestId: uuid.optional(),
    buyerMaxCents: z.number().int().optional(),
    cheapestPostedCents: z.number().int().nullable().optional(),
    routableDiemAboveMax: z.string().optional(),
    eligibleRoutableDiem: z.string().optional(),
    maxEligibleOfferDiem: z.string().optional(),
    maxPriceCeilingCents: z.number().int().optional().openapi({
      description: "the ceiling the request's `provider.max_price` maps to for `model` (cents per dollar)",
    }),
    model: z.string().optional().openapi({ description: "the model a supply refusal is about" }),
    fallbacks: z
      .array(z.object({ model: z.string(), code: errorCode, supportReference: uuid.optional() }))
      .optional()
      .openapi({ description: "the `models` passed over before this error, each with its refusal" }),
    transaction: z.string().nullable().optional(),
    reconciling: z.boolean().optional(),
    credited: z.boolean().optional(),
  })
  .passthrough()
  .openapi("ErrorDetail");

export const errorBody = z
  .object({ error: errorDetail })
  .passthrough()
  .openapi("ErrorBody", { description: "The error body; details are also mirrored at the top level." });
export type ErrorBody = z.infer<typeof errorBody>;

/** `{"status":"ok"}` (logout, key revocation, offer cancellation). */
export const statusOk = z.object({ status: z.literal("ok") }).openapi("StatusOk");

/** `?limit=&cursor=`: keyset pages (the cursor is opaque). */
export const pageQuery = z.object({
  limit: z
    .string()
    .regex(/^\d+$/, { message: "must be an integer 1-100" })
    .transform(Number)
    .refine((n) => n >= 1 && n <= 100, { message: "must be an integer 1-100" })
    .optional()
    .openapi({ type: "integer", minimum: 1, maximum: 100, description: "page size (default 50)" }),
  cursor: z.string().max(200).optional().openapi({ description: "`nextCursor` of the previous page" }),
});

/**
 * An optional integer argument `field` in `min`-`max` (GraphQL page sizes), `fallback` when absent
 * or null; outside the bounds: "`<field>` must be an integer `<min>`-`<max>`."
 */
export function boundedInt(field: string, min: number, max: number, fallback: number) {
  const message = `${field} must be an integer ${min}-${max}.`;
  return z
    .number({ invalid_type_error: message })
    .int({ message })
    .min(min, { message })
    .max(max, { message })
    .nullish()
    .transform((n) => n ?? fallback);
}

/** A key name: 1-64 characters (session route), at most 64 (agent route, signup). */
export const keyName = (min: number) =>
  z
    .string({ required_error: "is required", invalid_type_error: "must be a string" })
    .min(min, { message: `must be ${min}-64 characters` })
    .max(64, { message: "must be at most 64 characters" });

/** Response headers (SPEC "Identifiers used for tracing", "Errors" rule 1, "Limits"). */
export const HEADERS = {
  requestId: {
    name: "X-Svc-Request-Id",
    schema: { type: "string", format: "uuid" },
    description: "Per-request id; on every response, including errors.",
  },
  supportReference: {
    name: "X-Svc-Support-Reference",
    schema: { type: "string", format: "uuid" },
    description: "Resolves at GET /v1/agent/requests/{support_reference}; sent when an attempt record was stored.",
  },
  costUsdc: {
    name: "X-Svc-Cost-Usdc",
    schema: { type: "string", example: "0.001234" },
    description: "Cost of the request in USDC (six decimals).",
  },
  clearingPriceCents: {
    name: "X-Svc-Clearing-Price-Cents",
    schema: { type: "integer" },
    description: "Posted ask (cents per 1 USD of DIEM face) the request cleared at.",
  },
  balanceRemaining: {
    name: "X-Balance-Remaining",
    schema: { type: "string", example: "4.998766" },
    description: "Confirmed USDC after settlement (six decimals).",
  },
  errorCode: {
    name: "X-Svc-Error-Code",
    schema: { type: "string" },
    description: "Stable machine code of the error (the body's error.code).",
  },
  retryAfter: {
    name: "Retry-After",
    schema: { type: "integer" },
    description: "Whole seconds to wait before retrying; on every 429 and 503.",
  },
  paymentResponse: {
    name: "X-PAYMENT-RESPONSE",
    schema: { type: "string" },
    description: "Base64 x402 v1 settlement receipt; sent when the payment came as X-PAYMENT.",
  },
  paymentResponseV2: {
    name: "PAYMENT-RESPONSE",
    schema: { type: "string" },
    description:
      "Base64 x402 v2 settlement receipt (network `eip155:8453` on Base); sent when the payment came as PAYMENT-SIGNATURE.",
  },
  paymentRequired: {
    name: "PAYMENT-REQUIRED",
    schema: { type: "string" },
    description:
      "Base64 x402 v2 PaymentRequired on every funding 402: the body's requirement in v2 form (network `eip155:8453` on Base, `amount` = `maxAmountRequired`), for v2 clients.",
  },
  buyerMaxCents: {
    name: "X-Svc-Buyer-Max-Cents",
    schema: { type: "integer" },
    description: "The buyer's ceiling (no_eligible_supply).",
  },
  cheapestPostedCents: {
    name: "X-Svc-Cheapest-Posted-Cents",
    schema: { type: "integer" },
    description: "The cheapest posted price (no_eligible_supply): send it to PATCH /v1/agent/max-price.",
  },
  routableDiemAboveMax: {
    name: "X-Svc-Routable-Diem-Above-Max",
    schema: { type: "string" },
    description: "Routable DIEM priced above the ceiling (no_eligible_supply).",
  },
  maxEligibleOfferDiem: {
    name: "X-Svc-Max-Eligible-Offer-Diem",
    schema: { type: "string" },
    description: "The largest single eligible offer (insufficient_routable_at_price).",
  },
  nextCursor: {
    name: "X-Svc-Next-Cursor",
    schema: { type: "string" },
    description: "The history as CSV: the `cursor` of the next page; absent on the last page.",
  },
  eligibleRoutableDiem: {
    name: "X-Svc-Eligible-Routable-Diem",
    schema: { type: "string" },
    description: "Routable DIEM at or below the ceiling (insufficient_routable_at_price).",
  },
  shouldRetry: {
    name: "x-should-retry",
    schema: { type: "string", example: "false" },
    description:
      "Messages routes: `true` or `false`, whether the error is worth retrying (the code's `retryable`); the Anthropic SDK obeys it.",
  },
} as const;
export type HeaderName = keyof typeof HEADERS;
