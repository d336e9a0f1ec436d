import { MAX_CEILING_CENTS, MIN_CEILING_CENTS } from "../lib/money.js";
import { decimal6, keyName, pageQuery, timestamp, uuid, uuidField, walletAddress, z } from "./common.js";
import { parseWith } from "./parse.js";

/** SPEC "Account" and "Account (session)": the session routes' requests and responses. */

/**
 * SPEC "Account": enum `idp`, `siwe`. The session routes answer the provider of the caller's session
 * (docs/decisions.md "Issue 26 — finding 6"); an account a paid signup created is never shown as such.
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
    usage: z.object({ promptTokens: z.number().int().nullable(), completionTokens: z.number().int().nullable() }),
    attempts: z.number().int(),
    timings: z.object({
      startedAt: timestamp,
      firstByteAt: timestamp.nullable(),
      completedAt: timestamp.nullable(),
      durationMs: z.number().int().nullable(),
    }),
  })
  .openapi("InferenceRecord");

export const historyQuery = pageQuery.extend({
  modality: z.string().optional().openapi({ description: "text, image or video" }),
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

/** API key metadata (never the plaintext). */
export const apiKeyMetadata = z
  .object({
    id: uuid,
    name: z.string(),
    keyPrefix: z.string(),
    source: z.enum(["session", "agent", "signup"]),
    createdAt: timestamp,
    lastUsedAt: timestamp.nullable(),
  })
  .openapi("ApiKey");

export const createdApiKey = apiKeyMetadata
  .extend({ apiKey: z.string().openapi({ description: "plaintext `svc_…`, returned once" }) })
  .openapi("CreatedApiKey");

export const apiKeyList = z
  .object({ keys: z.array(apiKeyMetadata), cap: z.number().int(), active: z.number().int() })
  .openapi("ApiKeyList");

/** `POST /v1/account/api-keys` and `POST /v1/agent/keys`: `name` 1-64 characters. */
export const createKeyBody = z.object({ name: keyName(1) }).openapi("CreateKeyBody");

/** GraphQL `myInferenceRequest(supportReference:)`: a uuid, lower-cased (REST's is `supportReferenceParam`). */
export const requestDetailArgs = z.object({
  supportReference: uuidField("supportReference").transform((s) => s.toLowerCase()),
});
