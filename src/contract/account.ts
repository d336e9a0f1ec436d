import { MAX_EXPORT_PAGE_SIZE } from "../lib/cursor.js";
import { MAX_KEY_LIMIT_MICRO_USDC, MAX_KEY_MODEL_ID_LENGTH, MAX_KEY_MODELS } from "../lib/key-bounds.js";
import { formatDecimal6, MAX_CEILING_CENTS, MIN_CEILING_CENTS } from "../lib/money.js";
import {
  decimal6,
  keyName,
  pageQuery,
  positiveMicroUsdc,
  positiveUsdc,
  timestamp,
  uuid,
  uuidField,
  walletAddress,
  z,
} from "./common.js";
import { parseWith } from "./parse.js";

/** SPEC "Account" and "Account (session)": the session routes' requests and responses. */

/**
 * SPEC "Account": enum `idp`, `siwe`. The session routes answer the provider of the caller's session
 * (docs/decisions.md "`authProvider` is `idp` or `siwe` everywhere"); an account a paid signup created is never shown as such.
 */
export const authProvider = z.enum(["idp", "siwe"]).openapi("AuthProvider", {
  description: "How the session was signed in: idp (identity provider) or siwe (Sign-In with Ethereum).",
});

const CEILING_MESSAGE = `maxPriceCentsPerDollar must be an integer ${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}; nothing was changed.`;

/** The buyer ceiling: an integer 30-80, never clamped (SPEC "Limits"). */
export const ceilingCents = z
  .number({ required_error: CEILING_MESSAGE, invalid_type_error: CEILING_MESSAGE })
  .int({ message: CEILING_MESSAGE })
  .min(MIN_CEILING_CENTS, { message: CEILING_MESSAGE })
  .max(MAX_CEILING_CENTS, { message: CEILING_MESSAGE })
  .openapi({ description: "Buyer ceiling in cents per 1 USD of DIEM face (30-80).", example: 60 });

/**
 * `PATCH /v1/account/max-price` and `PATCH /v1/agent/max-price`: `maxPriceCentsPerDollar` integer
 * 30-80, required; other fields (such as `walletAddress`) are ignored: the credential decides the account.
 */
export const maxPriceBody = z.object({ maxPriceCentsPerDollar: ceilingCents }).openapi("MaxPriceBody");

/** A ceiling from any caller (REST body, GraphQL argument, MCP tool): the integer, or the 400 naming the field. */
export function parseCeiling(value: unknown): number {
  return parseWith(maxPriceBody, { maxPriceCentsPerDollar: value }).maxPriceCentsPerDollar;
}

export const maxPriceResponse = z
  .object({ walletAddress, maxPriceCentsPerDollar: z.number().int() })
  .openapi("MaxPriceResponse");

export const meResponse = z.object({ accountId: uuid, walletAddress, authProvider }).openapi("Me");

export const ledgerLine = z
  .object({
    id: z.string(),
    kind: z.string().openapi({ description: "top_up, confirmation, buyer_debit, supplier_credit, refund, payout…" }),
    book: z.string(),
    amountUsdc: decimal6.openapi({ description: "signed change to the book" }),
    transactionId: z.string(),
    transactionKind: z.string(),
    createdAt: timestamp,
  })
  .openapi("LedgerLine");

export const accountResponse = z
  .object({
    accountId: uuid,
    walletAddress,
    authProvider,
    maxPriceCentsPerDollar: z.number().int(),
    confirmedUsdc: decimal6,
    pendingUsdc: decimal6,
    reservedUsdc: decimal6,
    availableUsdc: decimal6,
    supplierPayableUsdc: decimal6,
    hasEverFunded: z.boolean(),
    firstFundedAt: timestamp.nullable(),
    createdAt: timestamp,
    recentLedger: z.array(ledgerLine),
  })
  .openapi("Account");

/** A buyer inference record (history row; `GET /v1/agent/requests/{support_reference}`). */
export const historyRow = z
  .object({
    requestId: uuid,
    supportReference: uuid,
    keyId: uuid.nullable().openapi({ description: "the API key the request was made with (null while a stream runs)" }),
    keyName: z.string().nullable().openapi({ description: "that key's name" }),
    route: z.string(),
    modality: z.string(),
    model: z.string(),
    stream: z.boolean(),
    status: z.string(),
    errorCode: z.string().nullable(),
    maxPriceCents: z.number().int(),
    clearingPriceCents: z.number().int().nullable(),
    costUsdc: decimal6.nullable(),
    burnDiem: decimal6.nullable(),
    usage: z.object({
      promptTokens: z.number().int().nullable(),
      completionTokens: z.number().int().nullable(),
      cachedTokens: z
        .number()
        .int()
        .nullable()
        .openapi({ description: "prompt tokens read from the provider's cache (priced at the cache-read rate)" }),
      cacheWriteTokens: z
        .number()
        .int()
        .nullable()
        .openapi({ description: "prompt tokens written to the provider's cache (priced at the cache-write rate)" }),
    }),
    attempts: z.number().int(),
    timings: z.object({
      startedAt: timestamp,
      firstByteAt: timestamp.nullable(),
      completedAt: timestamp.nullable(),
      durationMs: z.number().int().nullable(),
    }),
  })
  .openapi("InferenceRecord");

/** Rows of one CSV page at most (`?format=csv`); a JSON page holds at most 100. */
const CSV_MAX_ROWS = MAX_EXPORT_PAGE_SIZE;

const FROM_TO_MESSAGE = "must be an ISO 8601 timestamp such as 2026-01-31T00:00:00Z";

/**
 * `GET /v1/account/inference-history` and `GET /v1/agent/requests`: keyset pages, filtered by
 * modality, key and period (`from` inclusive, `to` exclusive, on the request's start), as JSON or CSV.
 */
export const historyQuery = pageQuery.extend({
  limit: z
    .string()
    .regex(/^\d+$/, { message: `must be an integer 1-100 (1-${CSV_MAX_ROWS} with format=csv)` })
    .transform(Number)
    .refine((n) => n >= 1 && n <= CSV_MAX_ROWS, {
      message: `must be an integer 1-100 (1-${CSV_MAX_ROWS} with format=csv)`,
    })
    .optional()
    .openapi({
      type: "integer",
      minimum: 1,
      maximum: CSV_MAX_ROWS,
      description: `page size: default 20, at most 100; with format=csv default and most ${CSV_MAX_ROWS}`,
    }),
  modality: z.string().optional().openapi({ description: "text, image or video" }),
  keyId: uuidField("keyId")
    .transform((s) => s.toLowerCase())
    .optional()
    .openapi({ format: "uuid", description: "only the requests made with this API key (a revoked one too)" }),
  from: z
    .string()
    .datetime({ offset: true, message: FROM_TO_MESSAGE })
    .optional()
    .openapi({ format: "date-time", description: "only requests started at or after this instant" }),
  to: z
    .string()
    .datetime({ offset: true, message: FROM_TO_MESSAGE })
    .optional()
    .openapi({ format: "date-time", description: "only requests started before this instant" }),
  format: z
    .enum(["json", "csv"], { errorMap: () => ({ message: 'must be "json" or "csv"' }) })
    .optional()
    .openapi({
      description: "csv: text/csv, a header row then one row per request (the next page's cursor in X-Svc-Next-Cursor)",
    }),
});

export const historyResponse = z
  .object({ data: z.array(historyRow), nextCursor: z.string().nullable() })
  .openapi("InferenceHistory");

export const savingsResponse = z
  .object({
    clears: z.number().int(),
    faceValueUsdc: decimal6,
    atCeilingUsdc: decimal6,
    paidUsdc: decimal6,
    savedVsFaceUsdc: decimal6,
    savedVsCeilingUsdc: decimal6,
  })
  .openapi("Savings");

// ───────────────────────────── API keys and their policy ───────────────────────────────────────

/** How often a key's limit starts again: UTC day, ISO week (from Monday), calendar month, never. */
export const limitReset = z
  .enum(["daily", "weekly", "monthly", "never"], {
    errorMap: () => ({ message: "limitReset must be one of daily, weekly, monthly, never; nothing was changed." }),
  })
  .openapi("KeyLimitReset", {
    description:
      "When a key's spending limit starts again, on UTC boundaries: daily (00:00 UTC), weekly (Monday 00:00 UTC), monthly (the 1st, 00:00 UTC) or never.",
  });

const LIMIT_MESSAGE = `limitUsdc must be a decimal string with six decimals, above 0 and at most ${formatDecimal6(MAX_KEY_LIMIT_MICRO_USDC)} (e.g. "5.000000"); nothing was changed.`;

/** `limitUsdc`: six decimals, > 0 (micro-USDC after parsing). */
const limitUsdc = positiveUsdc({
  message: LIMIT_MESSAGE,
  maxMicro: MAX_KEY_LIMIT_MICRO_USDC,
  description: "the key's spending limit per period, USDC with six decimals (> 0)",
});

const CEILING_FIELD_MESSAGE = `maxPriceCentsPerDollar must be an integer ${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}; nothing was changed.`;
const keyCeiling = z
  .number({ invalid_type_error: CEILING_FIELD_MESSAGE })
  .int({ message: CEILING_FIELD_MESSAGE })
  .min(MIN_CEILING_CENTS, { message: CEILING_FIELD_MESSAGE })
  .max(MAX_CEILING_CENTS, { message: CEILING_FIELD_MESSAGE })
  .openapi({
    description: "the key's own price ceiling, cents per 1 USD of DIEM face (30-80)",
    example: 50,
  });

const MODELS_MESSAGE = `models must be a list of 1-${MAX_KEY_MODELS} catalog model ids (GET /v1/models); send null to allow every model; nothing was changed.`;
/**
 * `models`: 1-100 non-empty ids; any fault is reported on `models` itself (not on an element), so
 * the list is checked whole before the array schema reads it.
 */
const models = z
  .preprocess(
    (ids, ctx) => {
      const ok =
        !Array.isArray(ids) ||
        (ids.length >= 1 &&
          ids.length <= MAX_KEY_MODELS &&
          ids.every((id) => typeof id === "string" && id.length >= 1 && id.length <= MAX_KEY_MODEL_ID_LENGTH));
      if (ok) return ids;
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: MODELS_MESSAGE, fatal: true });
      return z.NEVER;
    },
    z.array(z.string({ invalid_type_error: MODELS_MESSAGE }), { invalid_type_error: MODELS_MESSAGE }),
  )
  .openapi({
    type: "array",
    items: { type: "string", minLength: 1, maxLength: MAX_KEY_MODEL_ID_LENGTH },
    minItems: 1,
    maxItems: MAX_KEY_MODELS,
    description:
      "the catalog ids the key is limited to, bare or `svc/`-prefixed (stored bare); ids the catalog does not list are refused; absent or null: every model",
    example: ["zai-org-glm-5-1"],
  });

const EXPIRES_MESSAGE =
  "expiresAt must be an ISO 8601 timestamp in the future, such as 2026-12-31T00:00:00Z; nothing was changed.";
const expiresAt = z
  .string({ invalid_type_error: EXPIRES_MESSAGE })
  .datetime({ offset: true, message: EXPIRES_MESSAGE })
  .transform((s) => new Date(s))
  .openapi({
    type: "string",
    format: "date-time",
    description: "after this instant the key is refused (401) as a revoked key is; must be in the future",
  });

/** The policy fields of a create or an update: each optional; `null` = no such limit (removes it on PATCH). */
const keyPolicyFields = {
  limitUsdc: limitUsdc.nullish(),
  limitReset: limitReset.nullish(),
  maxPriceCentsPerDollar: keyCeiling.nullish(),
  models: models.nullish(),
  expiresAt: expiresAt.nullish(),
};

const SCOPES_MESSAGE = "scopes must be a list of 1-3 of inference, keys, account; nothing was changed.";

/** A key's scopes (docs/decisions.md "Key scopes and the key tree"). */
export const keyScopes = z
  .preprocess(
    (scopes, ctx) => {
      const known = ["inference", "keys", "account"];
      const ok =
        Array.isArray(scopes) &&
        scopes.length >= 1 &&
        scopes.length <= 3 &&
        scopes.every((s) => typeof s === "string" && known.includes(s));
      if (ok) return scopes;
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: SCOPES_MESSAGE, fatal: true });
      return z.NEVER;
    },
    z.array(z.enum(["inference", "keys", "account"])),
  )
  .openapi({
    type: "array",
    items: { type: "string", enum: ["inference", "keys", "account"] },
    minItems: 1,
    maxItems: 3,
    description:
      "what the key may do: inference (model routes, its own key and history), keys (mint, list, change, revoke keys below it), account (ceiling, webhooks, refill, account-wide reads)",
  });

/** API key metadata (never the plaintext), its policy and what it spent this period. */
export const apiKeyMetadata = z
  .object({
    id: uuid,
    name: z.string(),
    keyPrefix: z.string(),
    source: z.enum(["session", "agent", "signup"]),
    createdAt: timestamp,
    lastUsedAt: timestamp.nullable(),
    scopes: keyScopes,
    parentId: uuid.nullable().openapi({
      description: "the key it lives below (the key that minted it); null: an account-level or session-minted key",
    }),
    limitUsdc: decimal6.nullable().openapi({ description: "the key's spending limit per period; null: no limit" }),
    limitReset,
    maxPriceCentsPerDollar: z.number().int().nullable().openapi({ description: "the key's own ceiling; null: none" }),
    models: z
      .array(z.string())
      .nullable()
      .openapi({ description: "the catalog ids the key is limited to; null: every model" }),
    expiresAt: timestamp.nullable().openapi({ description: "when the key stops working; null: never" }),
    spentUsdc: decimal6.openapi({
      description:
        "what the key and every key below it were charged for requests started in the current period (all time when limitReset is never)",
    }),
    remainingUsdc: decimal6.nullable().openapi({ description: "limitUsdc − spentUsdc, at least 0; null: no limit" }),
    resetsAt: timestamp
      .nullable()
      .openapi({ description: "when the current period ends (UTC); null: no limit, or it never resets" }),
  })
  .openapi("ApiKey");

export const createdApiKey = apiKeyMetadata
  .extend({ apiKey: z.string().openapi({ description: "plaintext `svc_…`, returned once" }) })
  .openapi("CreatedApiKey");

export const apiKeyList = z
  .object({ keys: z.array(apiKeyMetadata), cap: z.number().int(), active: z.number().int() })
  .openapi("ApiKeyList");

/** `POST /v1/account/api-keys` and `POST /v1/agent/keys`: `name` 1-64 characters and an optional policy. */
export const createKeyBody = z
  .object({
    name: keyName(1),
    ...keyPolicyFields,
    scopes: keyScopes.optional().openapi({
      description:
        "default: every scope of the minting key, or inference alone when the key has a policy; never more than the minting key holds",
    }),
  })
  .openapi("CreateKeyBody");

/**
 * `PATCH /v1/account/api-keys/{id}` and `PATCH /v1/agent/keys/{id}`: only the fields sent change;
 * `null` removes a setting; a body that names none of them is refused.
 */
export const updateKeyBody = z
  .object({ name: keyName(1).optional(), ...keyPolicyFields })
  .openapi("UpdateKeyBody", { minProperties: 1 });

/**
 * The GraphQL twins of the key bodies (graphql/validate.ts `withInput` on `createApiKey` and
 * `updateApiKey`): REST's field rules and messages on GraphQL's units. `limitUsdc` arrives in
 * micro-USDC (the `MicroUsdc` scalar) and is held to REST's range; `expiresAt` arrives a Date (the
 * `DateTime` scalar; "in the future" is the service's check, as for REST); `scopes: null` is absent,
 * as a nullable GraphQL input reads. The update's `id` is `idParam`, REST's path rule.
 */
const keyPolicyInputFields = {
  ...keyPolicyFields,
  limitUsdc: positiveMicroUsdc({ message: LIMIT_MESSAGE, maxMicro: MAX_KEY_LIMIT_MICRO_USDC }).nullish(),
  expiresAt: z.date({ invalid_type_error: EXPIRES_MESSAGE }).nullish(),
};
export const createKeyInput = z.object({ name: keyName(1), ...keyPolicyInputFields, scopes: keyScopes.nullish() });
export const updateKeyInput = z.object({ name: keyName(1).optional(), ...keyPolicyInputFields });

/** GraphQL `myInferenceRequest(supportReference:)`: a uuid, lower-cased (REST's is `supportReferenceParam`). */
export const requestDetailArgs = z.object({
  supportReference: uuidField("supportReference").transform((s) => s.toLowerCase()),
});
