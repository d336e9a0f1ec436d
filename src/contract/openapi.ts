import {
  OpenAPIRegistry,
  OpenApiGeneratorV3,
  type ResponseConfig,
  type RouteConfig,
} from "@asteasolutions/zod-to-openapi";
import {
  accountResponse,
  apiKeyList,
  apiKeyMetadata,
  createdApiKey,
  createKeyBody,
  historyQuery,
  historyResponse,
  maxPriceBody,
  maxPriceResponse,
  meResponse,
  savingsResponse,
  updateKeyBody,
} from "./account.js";
import {
  agentKeyResponse,
  agentMeResponse,
  agentRequestResponse,
  agentRequestsQuery,
  agentRequestsResponse,
} from "./agent.js";
import { idpVerifyBody, sessionIdentityResponse, siweNonceResponse, siweVerifyBody } from "./auth.js";
import { capacityQuery, modelIdParam, modelList, modelRow, modelStatsQuery, modelStatsResponse } from "./catalog.js";
import {
  errorBody,
  HEADERS,
  type HeaderName,
  idParam,
  pageQuery,
  statusOk,
  supportReferenceParam,
  z,
} from "./common.js";
import { x402DiscoveryDocument, x402Manifest } from "./discovery.js";
import { fundedResponse, fundingBody, paymentChallenge, signupBody, signupResponse } from "./funding.js";
import {
  chatCompletionBody,
  chatCompletionResponse,
  imageGenerateBody,
  imageGenerateResponse,
  openAiImageBody,
  openAiImageResponse,
  responsesBody,
  responsesResponse,
  videoBody,
  videoCompleteResponse,
  videoQueueResponse,
  videoQuoteResponse,
  videoRetrieveBody,
  videoStatusResponse,
} from "./inference.js";
import { capacityResponse, marketStatsResponse, poolSummaryResponse } from "./market.js";
import {
  anthropicErrorBody,
  anthropicErrorType,
  anthropicMessageResponse,
  anthropicTool,
  countTokensBody,
  countTokensResponse,
  messagesBody,
} from "./messages.js";
import {
  BASE_USDC,
  PAID_ROUTES,
  PAY_PER_REQUEST_ROUTES,
  type PaymentNetwork,
  paymentInfo,
  SERVICE_NAME,
} from "./paid-routes.js";
import {
  offerList,
  offerResponse,
  patchOfferBody,
  postOfferBody,
  registerUpstreamKeyBody,
  revokeUpstreamKeyResponse,
  supplierHistoryResponse,
  supplierLedgerResponse,
  upstreamKeyList,
  upstreamKeyResponse,
} from "./supply.js";
import {
  createdWebhookResponse,
  createWebhookBody,
  WEBHOOK_TESTS_PER_MINUTE,
  webhookDelivery,
  webhookDeliveryList,
  webhookList,
  webhookResponse,
} from "./webhooks.js";

/**
 * The OpenAPI registry: every route the app serves, described from the same zod schemas the routes
 * validate with (SPEC "Public" /openapi.json, "Versioning" 2). `registry` holds the routes whose
 * paths are fixed; `buildOpenApiDocument` adds the ones that live at the deployment's URLs (the MCP
 * connector under `{mcp_url}`, the docs site at `{docs_url}`) and renders OpenAPI 3.0.
 */

type OpenAPIObject = ReturnType<OpenApiGeneratorV3["generateDocument"]>;
type HeadersObject = Record<string, { $ref: string }>;

export const OPENAPI_VERSION = "3.0.3";
export const API_VERSION = "1.0.0";

export const registry = new OpenAPIRegistry();
registry.register("ErrorBody", errorBody);

registry.registerComponent("securitySchemes", "bearerAuth", {
  type: "http",
  scheme: "bearer",
  bearerFormat: "svc_…",
  description:
    "An API key (`svc_` prefix) in `Authorization: Bearer <key>`: inference, `/v1/agent/*`, refill, MCP. A session cookie is refused here (401).",
});
registry.registerComponent("securitySchemes", "cookieAuth", {
  type: "apiKey",
  in: "cookie",
  name: "svc_session",
  description:
    "The HttpOnly session cookie set by `POST /auth/idp/verify` (or SIWE). Cookie-authenticated writes must come from an allowed Origin (403 `csrf_rejected`).",
});
registry.registerComponent("securitySchemes", "anthropicApiKey", {
  type: "apiKey",
  in: "header",
  name: "x-api-key",
  description:
    "The same API key (`svc_…`) in Anthropic's header, on the Messages routes only (`Authorization: Bearer` works there too; both at once must be the same key).",
});

const BEARER = [{ bearerAuth: [] }];
const SESSION = [{ cookieAuth: [] }];
const PUBLIC: RouteConfig["security"] = [];

// The x402 payment headers are request header parameters of the paid routes, not security schemes:
// a payment is not a credential (signup and the pay-per-request routes declare `security: []`), and
// what a paid route costs is its `x-payment-info` (issue 41; docs/decisions.md "x402 discovery for
// indexers").
const X_PAYMENT = registry.registerParameter(
  "XPayment",
  z
    .string()
    .optional()
    .openapi({
      param: {
        name: "X-PAYMENT",
        in: "header",
        description:
          "Base64 x402 v1 `exact` payment payload (EIP-3009 authorization on Base) answering the 402 challenge of a funding route; absent on the first call. On signup it is the only credential.",
      },
    }),
);
const PAYMENT_SIGNATURE = registry.registerParameter(
  "PaymentSignature",
  z
    .string()
    .optional()
    .openapi({
      param: {
        name: "PAYMENT-SIGNATURE",
        in: "header",
        description:
          "Base64 x402 v2 payment payload (`accepted` = the PAYMENT-REQUIRED requirement, `payload` = the signed authorization, `extensions` = the 402's, with a `payment-identifier` id for idempotent retries) answering the 402; absent on the first call. On a funding route instead of X-PAYMENT (both at once is 400); the same authorization in either envelope is one payment.",
      },
    }),
);
/** The payment headers a paid route takes: funding both versions, pay per request v2 only. */
const FUNDING_PAYMENT_HEADERS = z.object({ "X-PAYMENT": X_PAYMENT, "PAYMENT-SIGNATURE": PAYMENT_SIGNATURE });
const V2_PAYMENT_HEADER = z.object({ "PAYMENT-SIGNATURE": PAYMENT_SIGNATURE });

// the tracing and hint headers, once, under components/headers (SPEC "Identifiers used for tracing")
for (const h of Object.values(HEADERS)) {
  registry.registerComponent("headers", h.name, { description: h.description, schema: { ...h.schema } });
}

/** Response headers: X-Svc-Request-Id (on every response) plus the named ones, as references. */
function headers(...names: HeaderName[]): HeadersObject {
  const out: HeadersObject = {};
  for (const n of ["requestId", ...names] as HeaderName[]) {
    const name = HEADERS[n].name;
    out[name] = { $ref: `#/components/headers/${name}` };
  }
  return out;
}

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "Invalid request: malformed JSON, a field out of range (named in `error.field`), a model that is not live.",
  401: "Authentication failed: missing or invalid credential, or the wrong kind (a cookie on a Bearer route).",
  402: "Insufficient confirmed balance (inference): no `accepts`; fund first. Pending credit does not count.",
  403: "Forbidden: a cookie-authenticated write from another origin (`csrf_rejected`), or the payer is not the caller (`payer_mismatch`).",
  404: "Not found.",
  405: "Method not allowed.",
  409: "Conflict.",
  410: "Gone: the video was already delivered, or the job was refunded or expired.",
  413: "Request body too large.",
  415: "Unsupported body encoding.",
  429: "Too many in flight (`key_concurrency_limit`, `buyer_concurrency_limit`, `model_throttled`), the signup fuse, or a rate limit (`rate_limited`); retry after Retry-After seconds.",
  500: "Internal error, or `settle_failed` (nothing charged); `error.requestId` names the request in logs.",
  502: "`upstream_error`: the upstream could not complete; safe to retry.",
  503: "No supply: `no_eligible_supply` (raise the ceiling to `cheapestPostedCents`; with `provider.max_price`, `maxPriceCeilingCents` is what it maps to), `pool_empty`, `insufficient_routable_at_price`, `key_wait_timeout`, `keys_busy`; or not configured, or a dependency down (`service_unavailable`). Every 503 carries Retry-After.",
};

const ERROR_HEADERS: Record<number, HeaderName[]> = {
  429: ["errorCode", "retryAfter"],
  503: [
    "errorCode",
    "retryAfter",
    "supportReference",
    "buyerMaxCents",
    "cheapestPostedCents",
    "routableDiemAboveMax",
    "maxEligibleOfferDiem",
    "eligibleRoutableDiem",
  ],
};

function errorResponse(status: number, description?: string): ResponseConfig {
  return {
    description: description ?? ERROR_DESCRIPTIONS[status] ?? "Error.",
    headers: headers(...(ERROR_HEADERS[status] ?? ["errorCode"])),
    content: { "application/json": { schema: errorBody } },
  };
}

// each status's error response once, under components/responses (`Error400`…); a route that says
// more about a status inlines its own description
const ERROR_REFS = new Map<number, { $ref: string }>();
for (const status of Object.keys(ERROR_DESCRIPTIONS).map(Number)) {
  const { ref } = registry.registerComponent("responses", `Error${status}`, {
    description: ERROR_DESCRIPTIONS[status] ?? "Error.",
    headers: headers(...(ERROR_HEADERS[status] ?? ["errorCode"])),
    content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorBody" } } },
  });
  ERROR_REFS.set(status, ref);
}

function errorResponses(
  statuses: number[],
  overrides: Record<number, string> = {},
): Record<string, ResponseConfig | { $ref: string }> {
  // every route can fail unexpectedly
  const all = [...new Set([...statuses, 500])].sort((a, b) => a - b);
  return Object.fromEntries(
    all.map((s) => [String(s), (overrides[s] === undefined && ERROR_REFS.get(s)) || errorResponse(s, overrides[s])]),
  );
}

function jsonResponse(schema: z.ZodTypeAny, description: string, ...extra: HeaderName[]): ResponseConfig {
  return { description, headers: headers(...extra), content: { "application/json": { schema } } };
}

function jsonBody(schema: z.ZodTypeAny): NonNullable<RouteConfig["request"]>["body"] {
  return { required: true, content: { "application/json": { schema } } };
}

function textResponse(mime: string, description: string): ResponseConfig {
  return { description, headers: headers(), content: { [mime]: { schema: { type: "string" } } } };
}

/** The buyer history: a JSON page, or with `format=csv` the same rows as text/csv. */
function historyResponses(schema: z.ZodTypeAny): ResponseConfig {
  return {
    description:
      "A page, newest first. With `format=csv`: text/csv (RFC 4180, CRLF), a header row `time,key_name,model,modality,status,cost_usdc,clearing_price_cents,burn_diem,support_reference` then one row per request; a cell that would begin with `=`, `+`, `-` or `@` begins with `'` (no spreadsheet formula runs); the next page's cursor in X-Svc-Next-Cursor.",
    headers: headers("nextCursor"),
    content: {
      "application/json": { schema },
      "text/csv": { schema: { type: "string" } },
    },
  };
}

const KEY_UPDATE_ERRORS = {
  400: "A field is invalid (named in `error.field`) or the body names none; nothing was changed.",
  404: "No such active key on this account (a revoked key included).",
  409: "The key has expired: an expired key cannot be changed (revoke it, mint another).",
};

/** What a body-carrying request adds: 400 (bad JSON or fields), 413 and 415 from the one JSON parser. */
const BODY_ERRORS = [400, 413, 415];

// ---- public ----------------------------------------------------------------------------------

registry.registerPath({
  method: "get",
  path: "/healthz",
  operationId: "healthz",
  tags: ["Public"],
  summary: "Liveness",
  security: PUBLIC,
  responses: { 200: textResponse("text/plain", "`ok`") },
});
registry.registerPath({
  method: "get",
  path: "/readyz",
  operationId: "readyz",
  tags: ["Public"],
  summary: "Readiness: Postgres and Redis answer",
  security: PUBLIC,
  responses: {
    200: textResponse("text/plain", "`ready`"),
    503: textResponse("text/plain", "`not ready`"),
  },
});
registry.registerPath({
  method: "get",
  path: "/metrics",
  operationId: "metrics",
  tags: ["Public"],
  summary: "Prometheus metrics of this process (docs/operations.md): requests, clears, fall-forwards, escrow, queues",
  security: PUBLIC,
  responses: {
    200: textResponse("text/plain", "Prometheus text exposition format 0.0.4"),
  },
});
registry.registerPath({
  method: "get",
  path: "/openapi.json",
  operationId: "getOpenApi",
  tags: ["Public"],
  summary: "This OpenAPI 3.0 document",
  security: PUBLIC,
  responses: {
    200: {
      description: "OpenAPI 3.0 document",
      headers: headers(),
      content: { "application/json": { schema: { type: "object" } } },
    },
  },
});

registry.registerPath({
  method: "get",
  path: "/.well-known/x402",
  operationId: "getX402Discovery",
  tags: ["Public"],
  summary: "x402 discovery: the paid routes as `POST <url>` and instructions for an agent",
  description:
    "x402scan's fan-out document: `version` 1, `resources` (signup, top-up, refill, then the pay-per-request routes under /x402/v1, at this deployment's base URL), `instructions`. Cached 5 minutes; any origin may read it. The priced description of every paid route is this document's `x-payment-info`.",
  security: PUBLIC,
  responses: { 200: jsonResponse(x402DiscoveryDocument, "The discovery document") },
});
registry.registerPath({
  method: "get",
  path: "/.well-known/x402.json",
  operationId: "getX402Manifest",
  tags: ["Public"],
  summary: "x402 discovery manifest (the x402 draft `well-known-discovery` extension): every paid route",
  description:
    "`x402Version` 2, `lastUpdated`, and one item per paid route: `resource` (URL, description, service name, tags, icon), `type` http, advisory `accepts` (the live 402 is authoritative), `input` (POST, JSON body schema) and `output` (the 200's example and schema). Cached 5 minutes; any origin may read it.",
  security: PUBLIC,
  responses: { 200: jsonResponse(x402Manifest, "The manifest") },
});

const DOCUMENTS: [string, string, string, string][] = [
  ["/llms.txt", "getLlmsTxt", "text/plain", "Integration guide for agents (plain text)"],
  ["/SKILL.md", "getSkill", "text/markdown", "The agent skill"],
  ["/skill.md", "getSkillLower", "text/markdown", "The agent skill (same document as /SKILL.md)"],
  ["/pricing.md", "getPricing", "text/markdown", "How charges are computed: the debit formula, rounding, fees"],
  ["/marketplace.md", "getMarketplace", "text/markdown", "Supply, offers, ceilings, clearing, capacity"],
  ["/MCP.md", "getMcpGuide", "text/markdown", "MCP connector setup"],
];
for (const [path, operationId, mime, summary] of DOCUMENTS) {
  registry.registerPath({
    method: "get",
    path,
    operationId,
    tags: ["Documents"],
    summary,
    security: PUBLIC,
    responses: { 200: textResponse(mime, summary) },
  });
}

registry.registerPath({
  method: "get",
  path: "/v1/models",
  operationId: "listModels",
  tags: ["Catalog"],
  summary: "The catalog: live and coming-soon rows",
  security: PUBLIC,
  responses: { 200: jsonResponse(modelList, "Catalog rows"), ...errorResponses([]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/models/stats",
  operationId: "modelStats",
  tags: ["Catalog"],
  summary: "Model statistics: rank and usage share (no raw counts)",
  security: PUBLIC,
  request: { query: modelStatsQuery },
  responses: { 200: jsonResponse(modelStatsResponse, "Model statistics"), ...errorResponses([400]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/models/{id}",
  operationId: "getModel",
  tags: ["Catalog"],
  summary: "One catalog row (`id` bare, or `svc/`-prefixed with the slash percent-encoded)",
  security: PUBLIC,
  request: { params: modelIdParam },
  responses: {
    200: jsonResponse(modelRow, "The row; a coming_soon row is 200 too"),
    ...errorResponses([404], { 404: "Unknown, disabled or unlisted model." }),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/models/svc/{id}",
  operationId: "getModelPrefixed",
  tags: ["Catalog"],
  summary: "One catalog row by its `svc/`-prefixed id (the response `id` is bare)",
  security: PUBLIC,
  request: { params: modelIdParam },
  responses: {
    200: jsonResponse(modelRow, "The row"),
    ...errorResponses([404], { 404: "Unknown, disabled or unlisted model." }),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/capacity",
  operationId: "capacity",
  tags: ["Market"],
  summary: "Routable capacity by price (cached 30 s; a pre-flight view, not a reservation)",
  security: PUBLIC,
  request: { query: capacityQuery },
  responses: {
    200: jsonResponse(capacityResponse, "The ladder; when nothing is eligible `prices` is [] and totals are 0"),
    ...errorResponses([400], { 400: "`maxPriceCents` outside 30-80 (never clamped)." }),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/supply/pool/summary",
  operationId: "poolSummary",
  tags: ["Market"],
  summary: "The pool's price ladder (no supplier identities)",
  security: PUBLIC,
  responses: { 200: jsonResponse(poolSummaryResponse, "Price rows"), ...errorResponses([]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/market/stats",
  operationId: "marketStats",
  tags: ["Market"],
  summary: "Corridor depth, buyer savings, today's clears",
  security: PUBLIC,
  responses: { 200: jsonResponse(marketStatsResponse, "Market statistics"), ...errorResponses([]) },
});

// ---- identity and session --------------------------------------------------------------------

registry.registerComponent("headers", "Set-Cookie", {
  description: "`svc_session` (HttpOnly)",
  schema: { type: "string" },
});
const SET_COOKIE: HeadersObject = { "Set-Cookie": { $ref: "#/components/headers/Set-Cookie" } };

registry.registerPath({
  method: "post",
  path: "/auth/idp/verify",
  operationId: "idpVerify",
  tags: ["Session"],
  summary: "Sign in with the identity provider's access and identity tokens",
  security: PUBLIC,
  request: { body: jsonBody(idpVerifyBody) },
  responses: {
    200: { ...jsonResponse(sessionIdentityResponse, "Signed in"), headers: { ...headers(), ...SET_COOKIE } },
    ...errorResponses([...BODY_ERRORS, 401, 403]),
  },
});
registry.registerPath({
  method: "post",
  path: "/auth/siwe/nonce",
  operationId: "siweNonce",
  tags: ["Session"],
  summary: "A single-use Sign-In-With-Ethereum nonce (10 minutes)",
  security: PUBLIC,
  responses: { 200: jsonResponse(siweNonceResponse, "The nonce and the message's fields"), ...errorResponses([403]) },
});
registry.registerPath({
  method: "post",
  path: "/auth/siwe/verify",
  operationId: "siweVerify",
  tags: ["Session"],
  summary: "Sign in with a signed EIP-4361 message",
  security: PUBLIC,
  request: { body: jsonBody(siweVerifyBody) },
  responses: {
    200: { ...jsonResponse(sessionIdentityResponse, "Signed in"), headers: { ...headers(), ...SET_COOKIE } },
    ...errorResponses([...BODY_ERRORS, 401, 403]),
  },
});
registry.registerPath({
  method: "post",
  path: "/auth/logout",
  operationId: "logout",
  tags: ["Session"],
  summary: "End the session",
  security: SESSION,
  responses: {
    200: { ...jsonResponse(statusOk, "Signed out; the cookie is cleared"), headers: { ...headers(), ...SET_COOKIE } },
    ...errorResponses([401, 403]),
  },
});

// ---- account (session) -----------------------------------------------------------------------

registry.registerPath({
  method: "get",
  path: "/v1/me",
  operationId: "me",
  tags: ["Account"],
  security: SESSION,
  responses: { 200: jsonResponse(meResponse, "The signed-in identity"), ...errorResponses([401]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/account",
  operationId: "account",
  tags: ["Account"],
  summary: "Balances, ceiling and the recent ledger",
  security: SESSION,
  responses: { 200: jsonResponse(accountResponse, "Account summary"), ...errorResponses([401]) },
});
registry.registerPath({
  method: "patch",
  path: "/v1/account/max-price",
  operationId: "setAccountMaxPrice",
  tags: ["Account"],
  summary: "Set the buyer ceiling (30-80; nothing clamped)",
  security: SESSION,
  request: { body: jsonBody(maxPriceBody) },
  responses: { 200: jsonResponse(maxPriceResponse, "The new ceiling"), ...errorResponses([...BODY_ERRORS, 401, 403]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/account/api-keys",
  operationId: "listAccountKeys",
  tags: ["Account"],
  summary: "Active API keys (metadata only) and the cap",
  security: SESSION,
  responses: { 200: jsonResponse(apiKeyList, "Keys"), ...errorResponses([401]) },
});
registry.registerPath({
  method: "post",
  path: "/v1/account/api-keys",
  operationId: "createAccountKey",
  tags: ["Account"],
  summary: "Mint an API key (plaintext returned once)",
  security: SESSION,
  request: { body: jsonBody(createKeyBody) },
  responses: {
    201: jsonResponse(createdApiKey, "The key, with its plaintext"),
    ...errorResponses([...BODY_ERRORS, 401, 403, 409], { 409: "At the active-key cap (10)." }),
  },
});
registry.registerPath({
  method: "patch",
  path: "/v1/account/api-keys/{id}",
  operationId: "updateAccountKey",
  tags: ["Account"],
  summary: "Change a key's name or policy (only the fields sent; null removes a setting)",
  security: SESSION,
  request: { params: idParam, body: jsonBody(updateKeyBody) },
  responses: {
    200: jsonResponse(apiKeyMetadata, "The key with its policy and usage"),
    ...errorResponses([...BODY_ERRORS, 401, 403, 404, 409], KEY_UPDATE_ERRORS),
  },
});
registry.registerPath({
  method: "delete",
  path: "/v1/account/api-keys/{id}",
  operationId: "revokeAccountKey",
  tags: ["Account"],
  security: SESSION,
  request: { params: idParam },
  responses: {
    200: jsonResponse(statusOk, "Revoked"),
    ...errorResponses([400, 401, 403, 404], { 404: "No such key on this account." }),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/account/inference-history",
  operationId: "accountInferenceHistory",
  tags: ["Account"],
  summary: "Buyer inference records, newest first (keyset pages), by key and period; JSON or CSV",
  security: SESSION,
  request: { query: historyQuery },
  responses: { 200: historyResponses(historyResponse), ...errorResponses([400, 401]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/account/savings",
  operationId: "accountSavings",
  tags: ["Account"],
  summary: "Savings against face value and against the ceiling",
  security: SESSION,
  responses: { 200: jsonResponse(savingsResponse, "Savings"), ...errorResponses([401]) },
});

// ---- funding (x402) ----------------------------------------------------------------------------

function fundingResponses(ok: z.ZodTypeAny, extra: number[]): RouteConfig["responses"] {
  return {
    200: jsonResponse(
      ok,
      "Payment settled; credit recorded as pending until confirmed. The receipt is X-PAYMENT-RESPONSE for an X-PAYMENT payment, PAYMENT-RESPONSE for a PAYMENT-SIGNATURE one. A PAYMENT-SIGNATURE sent again with the same `payment-identifier` id and the same payment and body answers this recorded 200 (its receipt; `idempotent: true`, never the key).",
      "paymentResponse",
      "paymentResponseV2",
    ),
    402: {
      description:
        "Payment challenge: `accepts` present; no money moved (`payment_required`, or `invalid_payment` when the payment sent was refused before it settled). The body is the x402 v1 challenge: sign one requirement and retry with X-PAYMENT (`accepts[0].outputSchema` describes the request and its 200 for v1 indexes). The PAYMENT-REQUIRED header carries the same requirement as x402 v2, with the service metadata on `resource` and the `bazaar` and `payment-identifier` extensions: sign it and retry with PAYMENT-SIGNATURE.",
      headers: headers("errorCode", "paymentRequired"),
      content: { "application/json": { schema: paymentChallenge } },
    },
    ...errorResponses([...BODY_ERRORS, 409, 503, ...extra], {
      409: "Money moved, or may have, and the request did not finish (`payment_unfinished`, never with `accepts`): `transaction` and `reconciling` (true: credited from the chain exactly once if the transfer happened; false: a human must recover it), or `credited: true` without `reconciling` (signup's key cap; a payment already used by another funding route). The receipt (X-PAYMENT-RESPONSE, or PAYMENT-RESPONSE for a v2 payment) says `success: false` while the outcome is unknown. Do not pay again. Or `payment_identifier_conflict`: the PAYMENT-SIGNATURE's `payment-identifier` id was used by this payer with another payment or request; nothing was charged by this one.",
      503: "`not_configured`, or `facilitator_unavailable`: the facilitator could not be reached and nothing moved; retry the same request and payment header after Retry-After. `service_unavailable`: a replayed payment from a contract wallet whose signature the chain could not check just now; retry it after Retry-After.",
    }),
    409: { ...errorResponse(409), headers: headers("errorCode", "paymentResponse", "paymentResponseV2") },
  };
}

registry.registerPath({
  method: "post",
  path: "/v1/x402/signup",
  operationId: "signup",
  tags: ["Funding"],
  summary: "Create an account and an API key, prepaid with USDC (the payer's wallet is the account)",
  security: PUBLIC,
  request: { headers: FUNDING_PAYMENT_HEADERS, body: jsonBody(signupBody) },
  responses: fundingResponses(signupResponse, [429]),
});
registry.registerPath({
  method: "post",
  path: "/v1/x402/top-up",
  operationId: "topUp",
  tags: ["Funding"],
  summary: "Add prepaid USDC to the signed-in account (payer = session wallet)",
  security: SESSION,
  request: { headers: FUNDING_PAYMENT_HEADERS, body: jsonBody(fundingBody) },
  responses: fundingResponses(fundedResponse, [401, 403]),
});
registry.registerPath({
  method: "post",
  path: "/v1/x402/refill",
  operationId: "refill",
  tags: ["Funding"],
  summary: "Add prepaid USDC to the account behind this API key (payer = key's wallet)",
  security: BEARER,
  request: { headers: FUNDING_PAYMENT_HEADERS, body: jsonBody(fundingBody) },
  responses: fundingResponses(fundedResponse, [401, 403]),
});

// ---- agent self-service (Bearer) -------------------------------------------------------------

registry.registerPath({
  method: "get",
  path: "/v1/agent/me",
  operationId: "agentMe",
  tags: ["Agent"],
  summary: "Wallet, balances, ceiling and confirmation depth",
  security: BEARER,
  responses: { 200: jsonResponse(agentMeResponse, "The key's account"), ...errorResponses([401]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/agent/requests/{support_reference}",
  operationId: "agentRequest",
  tags: ["Agent"],
  summary: "One request by support reference: cost, clearing price, status, timings",
  security: BEARER,
  request: { params: supportReferenceParam },
  responses: {
    200: jsonResponse(agentRequestResponse, "The request record"),
    ...errorResponses([400, 401, 404], { 404: "The reference is not on this account." }),
  },
});
registry.registerPath({
  method: "patch",
  path: "/v1/agent/max-price",
  operationId: "setAgentMaxPrice",
  tags: ["Agent"],
  summary: "Set the buyer ceiling (30-80; nothing clamped; a `walletAddress` in the body is ignored)",
  security: BEARER,
  request: { body: jsonBody(maxPriceBody) },
  responses: { 200: jsonResponse(maxPriceResponse, "The new ceiling"), ...errorResponses([...BODY_ERRORS, 401]) },
});
registry.registerPath({
  method: "post",
  path: "/v1/agent/keys",
  operationId: "createAgentKey",
  tags: ["Agent"],
  summary: "Mint another API key (rotation: mint, store, verify, revoke the old one)",
  security: BEARER,
  request: { body: jsonBody(createKeyBody) },
  responses: {
    201: jsonResponse(createdApiKey, "The key, with its plaintext"),
    ...errorResponses([...BODY_ERRORS, 401, 409], { 409: "At the active-key cap (10); nothing paid." }),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/agent/keys",
  operationId: "listAgentKeys",
  tags: ["Agent"],
  summary: "Active keys (metadata only) and the cap",
  security: BEARER,
  responses: { 200: jsonResponse(apiKeyList, "Keys"), ...errorResponses([401]) },
});
registry.registerPath({
  method: "patch",
  path: "/v1/agent/keys/{id}",
  operationId: "updateAgentKey",
  tags: ["Agent"],
  summary: "Change a key's name or policy (only the fields sent; null removes a setting)",
  security: BEARER,
  request: { params: idParam, body: jsonBody(updateKeyBody) },
  responses: {
    200: jsonResponse(apiKeyMetadata, "The key with its policy and usage"),
    ...errorResponses([...BODY_ERRORS, 401, 404, 409], KEY_UPDATE_ERRORS),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/agent/key",
  operationId: "agentKey",
  tags: ["Agent"],
  summary: "The calling key: its policy and what it spent this period",
  security: BEARER,
  responses: { 200: jsonResponse(agentKeyResponse, "The calling key"), ...errorResponses([401]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/agent/requests",
  operationId: "agentRequests",
  tags: ["Agent"],
  summary: "The account's inference records, newest first (keyset pages), by key and period; JSON or CSV",
  security: BEARER,
  request: { query: agentRequestsQuery },
  responses: { 200: historyResponses(agentRequestsResponse), ...errorResponses([400, 401]) },
});
registry.registerPath({
  method: "delete",
  path: "/v1/agent/keys/{id}",
  operationId: "revokeAgentKey",
  tags: ["Agent"],
  summary: "Revoke a key (the calling key included)",
  security: BEARER,
  request: { params: idParam },
  responses: {
    200: jsonResponse(statusOk, "Revoked"),
    ...errorResponses([400, 401, 404], { 404: "No such key on this account." }),
  },
});

// ---- inference (Bearer) ----------------------------------------------------------------------

/** The keyed inference routes that have a pay-per-request twin under /x402/v1, by path. */
const TWINS = new Map<string, RouteConfig>();
function registerTwin(config: RouteConfig): void {
  registry.registerPath(config);
  TWINS.set(config.path, config);
}

const COST_HEADERS: HeaderName[] = ["supportReference", "costUsdc", "clearingPriceCents", "balanceRemaining"];
const INFERENCE_ERRORS = [...BODY_ERRORS, 401, 402, 404, 429, 502, 503];
const SSE = {
  "text/event-stream": {
    schema: {
      type: "string" as const,
      description:
        "With `stream: true`: SSE frames; no cost headers. Chat: content chunks, the usage chunk (its `usage` with `cost` and `cost_details` as on a buffered body), one `svc.cost` frame (costUsdc, clearingPriceCents, supportReference), then `[DONE]`.",
    },
  },
};

registerTwin({
  method: "post",
  path: "/v1/chat/completions",
  operationId: "createChatCompletion",
  tags: ["Inference"],
  summary: "OpenAI-compatible chat completion, routed to the cheapest eligible offer",
  security: BEARER,
  request: { body: jsonBody(chatCompletionBody) },
  responses: {
    200: {
      description: "Buffered completion (JSON, with the cost headers) or, with `stream: true`, an SSE stream",
      headers: headers(...COST_HEADERS),
      content: { "application/json": { schema: chatCompletionResponse }, ...SSE },
    },
    ...errorResponses(INFERENCE_ERRORS),
  },
});
registerTwin({
  method: "post",
  path: "/v1/responses",
  operationId: "createResponse",
  tags: ["Inference"],
  summary: "Stateless Responses facade (nothing stored)",
  security: BEARER,
  request: { body: jsonBody(responsesBody) },
  responses: {
    200: {
      description:
        "Buffered response (JSON, with the cost headers) or, with `stream: true`, `response.*` SSE events (cost on `response.completed`: flat `costUsdc` and `response.usage.cost`)",
      headers: headers(...COST_HEADERS),
      content: { "application/json": { schema: responsesResponse }, ...SSE },
    },
    ...errorResponses(INFERENCE_ERRORS),
  },
});
for (const path of ["/v1/responses", "/v1/responses/{id}"]) {
  registry.registerPath({
    method: "get",
    path,
    operationId: path.endsWith("{id}") ? "getResponse" : "listResponses",
    tags: ["Inference"],
    summary: "Responses are not stored: always 404",
    security: BEARER,
    request: path.endsWith("{id}") ? { params: z.object({ id: z.string() }) } : undefined,
    responses: errorResponses([401, 404], { 404: "Responses are not stored; there is nothing to retrieve." }),
  });
}

// ---- Anthropic's Messages API (Bearer or x-api-key; errors in Anthropic's shape) ----------------

registry.register("AnthropicErrorBody", anthropicErrorBody);
registry.register("AnthropicTool", anthropicTool);
const ANTHROPIC_AUTH: RouteConfig["security"] = [{ bearerAuth: [] }, { anthropicApiKey: [] }];

/** The Messages routes' errors: the same statuses and headers, Anthropic's body, `x-should-retry`. */
function anthropicErrorResponses(statuses: number[]): Record<string, ResponseConfig> {
  const all = [...new Set([...statuses, 500])].sort((a, b) => a - b);
  return Object.fromEntries(
    all.map((s) => [
      String(s),
      {
        description: `${ERROR_DESCRIPTIONS[s] ?? "Error."} Anthropic's shape: \`error.type\` ${anthropicErrorType(s)}, the service's code in \`error.code\` and \`error.details.error_code\`.`,
        headers: headers(...(ERROR_HEADERS[s] ?? ["errorCode"]), "shouldRetry"),
        content: { "application/json": { schema: { $ref: "#/components/schemas/AnthropicErrorBody" } } },
      },
    ]),
  );
}

registerTwin({
  method: "post",
  path: "/v1/messages",
  operationId: "createMessage",
  tags: ["Inference"],
  summary: "Anthropic's Messages API, on the same pipeline as chat (Anthropic SDKs, Claude Code)",
  description:
    "Anthropic's request (`model` a catalog id, `max_tokens`, `messages` with text, image, tool_use and tool_result blocks, `system`, `tools`, `tool_choice`, `stop_sequences`, `temperature`, `top_p`, `top_k`, `metadata`, `stream`), translated onto the upstream's chat completions; unknown fields are ignored. Same key, scopes, budgets, debit, clearing and fall-forward as chat. Errors are Anthropic's `{type: error, error: {type, message}}` plus the service's `error.code`. See docs/decisions.md \"Anthropic Messages API\".",
  security: ANTHROPIC_AUTH,
  request: { body: jsonBody(messagesBody) },
  responses: {
    200: {
      description:
        "A message (JSON, with the cost headers; `usage.cost` and `usage.cost_details`) or, with `stream: true`, Anthropic's SSE events",
      headers: headers(...COST_HEADERS),
      content: {
        "application/json": { schema: anthropicMessageResponse },
        "text/event-stream": {
          schema: {
            type: "string" as const,
            description:
              "`message_start`, `ping`, per block `content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`, `thinking_delta`) / `content_block_stop`, then `message_delta` (stop reason; `usage` with `cost` and `cost_details`; flat `costUsdc`, `clearingPriceCents`, `supportReference`), `message_stop`. No cost headers. A stream that ends without usage: an `error` event (`stream_incomplete`, with the flat cost fields) and no `message_stop`; a settlement that does not commit: an `error` event (`settle_failed`).",
          },
        },
      },
    },
    ...anthropicErrorResponses([...BODY_ERRORS, 401, 402, 403, 404, 429, 502, 503]),
  },
});
registry.registerPath({
  method: "post",
  path: "/v1/messages/count_tokens",
  operationId: "countMessageTokens",
  tags: ["Inference"],
  summary: "The prompt estimate admission makes for a Messages body (free)",
  description:
    "`input_tokens` = ceil(UTF-8 bytes / 3) + 16 per message, over the translated messages and tool definitions: the generous estimate the service reserves for, not a tokenizer's count. Nothing is charged or recorded.",
  security: ANTHROPIC_AUTH,
  request: { body: jsonBody(countTokensBody) },
  responses: {
    200: jsonResponse(countTokensResponse, "The estimate"),
    ...anthropicErrorResponses([...BODY_ERRORS, 401, 403, 404]),
  },
});

registerTwin({
  method: "post",
  path: "/v1/image/generate",
  operationId: "generateImage",
  tags: ["Inference"],
  summary: "Synchronous image generation (one in flight per wallet)",
  security: BEARER,
  request: { body: jsonBody(imageGenerateBody) },
  responses: {
    200: jsonResponse(imageGenerateResponse, "Base64 images, one per variant", ...COST_HEADERS),
    ...errorResponses(INFERENCE_ERRORS),
  },
});
registerTwin({
  method: "post",
  path: "/v1/images/generations",
  operationId: "createImage",
  tags: ["Inference"],
  summary: "OpenAI-compatible image generation",
  security: BEARER,
  request: { body: jsonBody(openAiImageBody) },
  responses: {
    200: jsonResponse(openAiImageResponse, "OpenAI images result", ...COST_HEADERS),
    ...errorResponses(INFERENCE_ERRORS),
  },
});
registry.registerPath({
  method: "post",
  path: "/v1/video/quote",
  operationId: "quoteVideo",
  tags: ["Video"],
  summary: "Price a video job and say whether it clears now (no charge, no job)",
  security: BEARER,
  request: { body: jsonBody(videoBody) },
  responses: {
    200: jsonResponse(videoQuoteResponse, "The quote"),
    ...errorResponses([...BODY_ERRORS, 401, 404, 502, 503], { 503: "`keys_busy` (retry shortly), or no supply." }),
  },
});
registry.registerPath({
  method: "post",
  path: "/v1/video/queue",
  operationId: "queueVideo",
  tags: ["Video"],
  summary: "Queue a video job; the charge settles up front",
  security: BEARER,
  request: { body: jsonBody(videoBody) },
  responses: {
    200: jsonResponse(videoQueueResponse, "Queued", ...COST_HEADERS),
    ...errorResponses(INFERENCE_ERRORS),
  },
});
registry.registerPath({
  method: "post",
  path: "/v1/video/retrieve",
  operationId: "retrieveVideo",
  tags: ["Video"],
  summary: "Poll a job: JSON while rendering, `video/mp4` once; branch on Content-Type",
  security: BEARER,
  request: { body: jsonBody(videoRetrieveBody) },
  responses: {
    200: {
      description: "JSON status while rendering (or terminal), or the video bytes once (then 410)",
      headers: headers(),
      content: {
        "application/json": { schema: videoStatusResponse },
        "video/mp4": { schema: { type: "string", format: "binary" } },
      },
    },
    ...errorResponses([...BODY_ERRORS, 401, 404, 410, 502]),
  },
});
registry.registerPath({
  method: "post",
  path: "/v1/video/complete",
  operationId: "completeVideo",
  tags: ["Video"],
  summary: "Delete the provider-side media",
  security: BEARER,
  request: { body: jsonBody(videoRetrieveBody) },
  responses: {
    200: jsonResponse(videoCompleteResponse, "Media deleted"),
    ...errorResponses([...BODY_ERRORS, 401, 404, 502], { 400: "Invalid body, or the media is already gone." }),
  },
});

// ---- pay per request (x402 upto, no key; issue 41) -----------------------------------------------

/**
 * The pay-per-request twins of the inference routes (the catalog's `/x402/v1/…`, paid-routes.ts):
 * the same body and answers as the keyed route, no credential, an x402 v2 `upto` payment per
 * request. The 401 and the balance's 402 of the twin give way to the payment challenge; the 200
 * carries the receipt; 409 is a payment whose request still runs, or used for another request, or an
 * identifier reused.
 */
for (const route of PAY_PER_REQUEST_ROUTES) {
  const twin = TWINS.get(route.twin ?? "");
  if (!twin) throw new Error(`no keyed twin documented for ${route.path}`);
  const anthropic = twin.path === "/v1/messages";
  const errorContent = {
    "application/json": { schema: { $ref: `#/components/schemas/${anthropic ? "AnthropicErrorBody" : "ErrorBody"}` } },
  };
  const errorHeaders = (...names: HeaderName[]) =>
    headers("errorCode", ...names, ...(anthropic ? (["shouldRetry"] as HeaderName[]) : []));
  const kept = Object.entries(twin.responses).filter(([status]) => status !== "401" && status !== "402");
  const twinOk = twin.responses[200] as ResponseConfig;
  const { "X-Balance-Remaining": _balance, ...okHeaders } = (twinOk.headers ?? {}) as HeadersObject;
  const ok = { ...twinOk, headers: okHeaders };
  registry.registerPath({
    ...twin,
    path: route.path,
    operationId: `${twin.operationId}PayPerRequest`,
    tags: ["Pay per request"],
    summary: `${twin.summary}: paid per request (x402 upto), no API key`,
    description:
      `The request and answers of \`POST ${twin.path}\`, with no API key (an Authorization header is ignored). ` +
      "Unpaid: 402 with PAYMENT-REQUIRED, an x402 v2 `upto` requirement (USDC; `amount` = the request's maximum charge at its ceiling, `svc.maxPriceCentsPerDollar` or 80). " +
      "Send the same request again with PAYMENT-SIGNATURE: it runs, and the exact charge (at most that amount, 0 when nothing is charged) is settled; PAYMENT-RESPONSE, `usage.cost` and the cost headers carry it. " +
      "A stream settles after its last byte: its cost frame says so.",
    security: PUBLIC,
    request: { ...twin.request, headers: V2_PAYMENT_HEADER },
    responses: {
      ...Object.fromEntries(kept),
      200: {
        ...ok,
        description: `${ok.description} The receipt is PAYMENT-RESPONSE (buffered answers; settled before the body is released). A settlement whose outcome is not known yet still answers 200, with PAYMENT-RESPONSE \`success: false\`: it is reconciled from the chain, do not pay again.`,
        // no X-Balance-Remaining: the payment, not a prepaid balance, pays the request
        headers: { ...ok.headers, ...headers("paymentResponseV2") },
      },
      402: {
        description:
          "Payment challenge (`payment_required`, or `invalid_payment` when the payment sent was refused before anything moved): the x402 v2 PaymentRequired is the PAYMENT-REQUIRED header (`upto`, the request's maximum charge, the `bazaar` and `payment-identifier` extensions). No money moved. Also `invalid_payment` with PAYMENT-RESPONSE `success: false` when the payment could not settle the charge of an answer that was ready: the answer is withheld.",
        headers: errorHeaders("paymentRequired"),
        content: errorContent,
      },
      409: {
        description:
          "`payment_unfinished` (`inFlight: true`): this payment's request is still running; send the same request with the same payment again later for its recorded answer. `conflict`: this payment already paid for another request (a payment pays for one request); sign a new one. `payment_identifier_conflict`: the `payment-identifier` id was used by this payer with another payment or request; nothing was charged by this one.",
        headers: errorHeaders("paymentResponseV2"),
        content: errorContent,
      },
    },
  });
}

// ---- supplier (session) ----------------------------------------------------------------------

registry.registerPath({
  method: "post",
  path: "/v1/supply/upstream-keys",
  operationId: "registerUpstreamKey",
  tags: ["Supply"],
  summary: "Register an upstream key (stored encrypted)",
  security: SESSION,
  request: { body: jsonBody(registerUpstreamKeyBody) },
  responses: {
    201: jsonResponse(upstreamKeyResponse, "Registered"),
    ...errorResponses([...BODY_ERRORS, 401, 403, 409, 502]),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/supply/upstream-keys/mine",
  operationId: "listUpstreamKeys",
  tags: ["Supply"],
  security: SESSION,
  responses: { 200: jsonResponse(upstreamKeyList, "Your keys"), ...errorResponses([401]) },
});
registry.registerPath({
  method: "delete",
  path: "/v1/supply/upstream-keys/{id}",
  operationId: "revokeUpstreamKey",
  tags: ["Supply"],
  summary: "Revoke the key row and cancel its offers",
  security: SESSION,
  request: { params: idParam },
  responses: {
    200: jsonResponse(revokeUpstreamKeyResponse, "Revoked"),
    ...errorResponses([400, 401, 403, 404]),
  },
});
registry.registerPath({
  method: "post",
  path: "/v1/supply/offers",
  operationId: "postOffer",
  tags: ["Supply"],
  summary: "Post an offer (one live offer per key; expires at UTC midnight)",
  security: SESSION,
  request: { body: jsonBody(postOfferBody) },
  responses: { 201: jsonResponse(offerResponse, "Posted"), ...errorResponses([...BODY_ERRORS, 401, 403, 404, 409]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/supply/offers/mine",
  operationId: "listOffers",
  tags: ["Supply"],
  summary: "Your offers, excluding cancelled",
  security: SESSION,
  request: { query: pageQuery },
  responses: { 200: jsonResponse(offerList, "A page"), ...errorResponses([400, 401]) },
});
registry.registerPath({
  method: "patch",
  path: "/v1/supply/offers/{id}",
  operationId: "updateOffer",
  tags: ["Supply"],
  summary: "Reprice, pause or unpause",
  security: SESSION,
  request: { params: idParam, body: jsonBody(patchOfferBody) },
  responses: { 200: jsonResponse(offerResponse, "Updated"), ...errorResponses([...BODY_ERRORS, 401, 403, 404, 409]) },
});
registry.registerPath({
  method: "delete",
  path: "/v1/supply/offers/{id}",
  operationId: "cancelOffer",
  tags: ["Supply"],
  summary: "Cancel a live offer",
  security: SESSION,
  request: { params: idParam },
  responses: { 200: jsonResponse(offerResponse, "Cancelled"), ...errorResponses([400, 401, 403, 404, 409]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/supply/ledger",
  operationId: "supplierLedger",
  tags: ["Supply"],
  summary: "Supplier ledger and payouts",
  security: SESSION,
  request: { query: pageQuery },
  responses: { 200: jsonResponse(supplierLedgerResponse, "A page"), ...errorResponses([400, 401]) },
});
registry.registerPath({
  method: "get",
  path: "/v1/supply/inference-history",
  operationId: "supplierInferenceHistory",
  tags: ["Supply"],
  summary: "Clears of your offers",
  security: SESSION,
  request: { query: pageQuery },
  responses: { 200: jsonResponse(supplierHistoryResponse, "A page"), ...errorResponses([400, 401]) },
});

// ---- webhooks (issue 30) ------------------------------------------------------------------------

/** Buyers with a Bearer key or a session, suppliers with a session (one credential, not both). */
const BEARER_OR_SESSION: RouteConfig["security"] = [{ bearerAuth: [] }, { cookieAuth: [] }];
const WEBHOOK_DESCRIPTION =
  "Deliveries are Standard Webhooks: `POST` of `{type, timestamp, data}` with `webhook-id` (the same on every retry), `webhook-timestamp` and `webhook-signature` (verify with the `standardwebhooks` package and the endpoint's `whsec_` secret). Retried with exponential back-off for over 24 h; an endpoint whose event fails every attempt is disabled.";

registry.registerPath({
  method: "post",
  path: "/v1/webhooks",
  operationId: "createWebhook",
  tags: ["Webhooks"],
  summary: "Register a webhook endpoint (at most 10 per account); the signing secret is shown once",
  description: WEBHOOK_DESCRIPTION,
  security: BEARER_OR_SESSION,
  request: { body: jsonBody(createWebhookBody) },
  responses: {
    201: jsonResponse(createdWebhookResponse, "Registered, with its `secret` (shown this once)"),
    ...errorResponses([...BODY_ERRORS, 401, 403, 409], {
      400: "A field is invalid (named in `error.field`): not https, a host that resolves to a loopback, private, link-local or metadata address, an unknown event, a supplier event with a Bearer key, `balance.low` without `balanceLowThresholdUsdc`. Nothing was created.",
      409: "`webhook_limit_reached`: the account has 10 endpoints; delete one first.",
    }),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/webhooks",
  operationId: "listWebhooks",
  tags: ["Webhooks"],
  summary: "Your webhook endpoints (with their status and `disabledReason`)",
  security: BEARER_OR_SESSION,
  responses: { 200: jsonResponse(webhookList, "Your endpoints"), ...errorResponses([401]) },
});
registry.registerPath({
  method: "delete",
  path: "/v1/webhooks/{id}",
  operationId: "deleteWebhook",
  tags: ["Webhooks"],
  summary: "Delete an endpoint and its delivery log",
  security: BEARER_OR_SESSION,
  request: { params: idParam },
  responses: { 200: jsonResponse(statusOk, "Deleted"), ...errorResponses([400, 401, 403, 404]) },
});
registry.registerPath({
  method: "post",
  path: "/v1/webhooks/{id}/rotate-secret",
  operationId: "rotateWebhookSecret",
  tags: ["Webhooks"],
  summary: "A new signing secret, shown once; the old one stops at once",
  security: BEARER_OR_SESSION,
  request: { params: idParam },
  responses: {
    200: jsonResponse(createdWebhookResponse, "Rotated, with the new `secret`"),
    ...errorResponses([400, 401, 403, 404]),
  },
});
registry.registerPath({
  method: "post",
  path: "/v1/webhooks/{id}/enable",
  operationId: "enableWebhook",
  tags: ["Webhooks"],
  summary: "Receive events again after the endpoint was disabled",
  security: BEARER_OR_SESSION,
  request: { params: idParam },
  responses: { 200: jsonResponse(webhookResponse, "Active"), ...errorResponses([400, 401, 403, 404]) },
});
registry.registerPath({
  method: "post",
  path: "/v1/webhooks/{id}/test",
  operationId: "testWebhook",
  tags: ["Webhooks"],
  summary: "Send a `webhook.test` event to the endpoint",
  description: `Queued like every event; its delivery shows in the log. At most ${WEBHOOK_TESTS_PER_MINUTE} a minute per account (this route and GraphQL \`sendTestWebhook\` together, a fixed window per UTC minute); past it 429 \`rate_limited\` with Retry-After (the seconds until the minute turns), and nothing is sent.`,
  security: BEARER_OR_SESSION,
  request: { params: idParam },
  responses: {
    202: jsonResponse(webhookDelivery, "Queued: its delivery-log row"),
    ...errorResponses([400, 401, 403, 404, 409, 429], {
      409: "The endpoint is disabled; enable it first.",
      429: `\`rate_limited\`: ${WEBHOOK_TESTS_PER_MINUTE} test events this minute already; retry after Retry-After seconds. Nothing was sent.`,
    }),
  },
});
registry.registerPath({
  method: "get",
  path: "/v1/webhooks/{id}/deliveries",
  operationId: "webhookDeliveries",
  tags: ["Webhooks"],
  summary: "The endpoint's delivery log, newest first (status, attempts, last response code)",
  security: BEARER_OR_SESSION,
  request: { params: idParam, query: pageQuery },
  responses: { 200: jsonResponse(webhookDeliveryList, "A page"), ...errorResponses([400, 401, 404]) },
});

// ---- GraphQL ---------------------------------------------------------------------------------

const graphqlRequest = z
  .object({
    query: z.string(),
    variables: z.record(z.unknown()).nullable().optional(),
    operationName: z.string().nullable().optional(),
  })
  .openapi("GraphQLRequest");
const graphqlResult = z
  .object({
    data: z.record(z.unknown()).nullable().optional(),
    errors: z
      .array(
        z
          .object({
            message: z.string(),
            extensions: z.object({ code: z.string().optional() }).passthrough().optional(),
          })
          .passthrough(),
      )
      .optional(),
  })
  .openapi("GraphQLResult");
const GRAPHQL_DESCRIPTION =
  "The GraphQL API (schema at `schema.graphql`; errors carry `extensions.code` with the REST codes). Session cookie or Bearer key; subscriptions over graphql-sse.";

registry.registerPath({
  method: "post",
  path: "/graphql",
  operationId: "graphqlPost",
  tags: ["GraphQL"],
  summary: "GraphQL query or mutation",
  description: GRAPHQL_DESCRIPTION,
  security: [{}, { cookieAuth: [] }, { bearerAuth: [] }],
  request: { body: jsonBody(graphqlRequest) },
  responses: {
    200: {
      description: "GraphQL result (or an SSE stream for subscriptions)",
      headers: headers(),
      content: { "application/json": { schema: graphqlResult }, "text/event-stream": { schema: { type: "string" } } },
    },
    400: jsonResponse(graphqlResult, "Invalid GraphQL request"),
    403: errorResponse(403, "A cookie-authenticated request from another origin (`csrf_rejected`)."),
  },
});
registry.registerPath({
  method: "get",
  path: "/graphql",
  operationId: "graphqlGet",
  tags: ["GraphQL"],
  summary: "GraphQL query over GET (GraphiQL in a browser)",
  description: GRAPHQL_DESCRIPTION,
  security: [{}, { cookieAuth: [] }, { bearerAuth: [] }],
  request: {
    query: z.object({
      query: z.string().optional(),
      variables: z.string().optional().openapi({ description: "JSON-encoded" }),
      operationName: z.string().optional(),
    }),
  },
  responses: {
    200: {
      description: "GraphQL result, or GraphiQL (text/html) for a browser",
      headers: headers(),
      content: { "application/json": { schema: graphqlResult }, "text/html": { schema: { type: "string" } } },
    },
    400: jsonResponse(graphqlResult, "Invalid GraphQL request"),
  },
});

// ---- the document ----------------------------------------------------------------------------

export interface DocumentUrls {
  /** `{base_url}`: the API host */
  base: string;
  /** `{mcp_url}`: the MCP connector is at `{mcp_url}/mcp` */
  mcp: string;
  /** `{docs_url}`: the documentation site */
  docs: string;
}

/** Path of a deployment URL (`""` for a bare host), and a server override when it lives elsewhere. */
function placed(url: string, base: string): { path: string; servers?: { url: string }[] } {
  const u = new URL(url);
  const path = u.pathname.replace(/\/+$/, "");
  return u.origin === new URL(base).origin ? { path } : { path, servers: [{ url: u.origin }] };
}

/** `{mcp_url}/mcp`'s path on this listener (`/mcp` by default). */
export function mcpPathOf(urls: DocumentUrls): string {
  return `${placed(urls.mcp, urls.base).path}/mcp`;
}

/** `{docs_url}`'s path on this listener (`/docs` by default). */
export function docsPathOf(urls: DocumentUrls): string {
  return placed(urls.docs, urls.base).path || "/";
}

const jsonRpc = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: z.union([z.string(), z.number()]).optional(),
    method: z.string().openapi({ example: "tools/call" }),
    params: z.record(z.unknown()).optional(),
  })
  .passthrough()
  .openapi("JsonRpcRequest");

/**
 * Every route of a deployment, with its zod schemas: `registry` plus the routes at the deployment's
 * URLs (the MCP connector, the docs site). The document is generated from it; the fuzz tests
 * (test/integration/fuzz) walk its routes.
 */
export function deploymentRegistry(urls: DocumentUrls): OpenAPIRegistry {
  const local = new OpenAPIRegistry([registry]);
  const mcp = placed(urls.mcp, urls.base);
  local.registerPath({
    method: "post",
    path: mcpPathOf(urls),
    operationId: "mcp",
    tags: ["MCP"],
    summary: "The hosted MCP connector (Streamable HTTP, stateless JSON-RPC)",
    description:
      'Model Context Protocol over Streamable HTTP with the same Bearer key. Tools include `agent_me`, capacity, models, model stats, video quote, request lookup, set max price, and the paid `chat_completion` and `generate_image`. With no Authorization header at all the two paid tools are served paid per call (the x402 MCP transport binding: `_meta["x402/payment"]`, receipt in `_meta["x402/payment-response"]`) and the others answer the tool error `authentication_failed`; a key that is sent must be valid (401). See /MCP.md.',
    ...(mcp.servers ? { servers: mcp.servers } : {}),
    security: BEARER,
    request: { body: jsonBody(jsonRpc) },
    responses: {
      200: {
        description: "JSON-RPC result (tool errors carry the REST error codes)",
        headers: headers(),
        content: { "application/json": { schema: { type: "object" } } },
      },
      ...errorResponses([...BODY_ERRORS, 401, 406]),
    },
  });
  const docs = placed(urls.docs, urls.base);
  local.registerPath({
    method: "get",
    path: docsPathOf(urls),
    operationId: "docsSite",
    tags: ["Documents"],
    summary: "The documentation site: the documents as pages, the API reference, GraphiQL",
    ...(docs.servers ? { servers: docs.servers } : {}),
    security: PUBLIC,
    responses: { 200: textResponse("text/html", "The documentation site") },
  });
  return local;
}

/** Short guidance for agents in `info.x-guidance` (what x402scan and `@agentcash/discovery` read first). */
const GUIDANCE =
  'Two ways to pay, both x402 with USDC on Base. Prepaid: POST /v1/x402/signup with {"amountMicroUsdc": 1000000-1000000000} answers 402; pay it (scheme exact) and repeat the request: the 200 carries an API key (svc_…, shown once). Then call the OpenAI-compatible API under /v1 (and Anthropic\'s Messages API at /v1/messages) with Authorization: Bearer <key>; refill with POST /v1/x402/refill. Per request, no account: POST the same bodies to /x402/v1/chat/completions, /responses, /messages, /image/generate or /images/generations; the 402 asks an x402 v2 `upto` payment of the request\'s maximum charge, and the exact cost is settled. Errors are {"error":{"code","message"}}. Guides: /llms.txt, /SKILL.md.';

/**
 * The OpenAPI 3.0 document for a deployment: its URLs decide the servers and the MCP and docs paths,
 * `network` the network and asset every paid operation's `x-payment-info` names (the catalog's,
 * paid-routes.ts: the structured shape of x402scan's DISCOVERY.md).
 */
export function buildOpenApiDocument(urls: DocumentUrls, network: PaymentNetwork = BASE_USDC): OpenAPIObject {
  const doc = generate(urls);
  for (const route of PAID_ROUTES) {
    const op = doc.paths?.[route.path]?.[route.method.toLowerCase() as "post"];
    if (!op) throw new Error(`paid route ${route.method} ${route.path} is not documented`);
    (op as unknown as Record<string, unknown>)["x-payment-info"] = paymentInfo(route, network);
  }
  return doc;
}

function generate(urls: DocumentUrls): OpenAPIObject {
  return new OpenApiGeneratorV3(deploymentRegistry(urls).definitions).generateDocument({
    openapi: OPENAPI_VERSION,
    info: {
      title: "svc: prepaid inference marketplace",
      version: API_VERSION,
      contact: { name: SERVICE_NAME, url: urls.docs },
      "x-guidance": GUIDANCE,
      description:
        'Buyers prepay USDC on Base (x402 `exact`), or pay per request with no account (x402 `upto`, under /x402/v1), and call an OpenAI-compatible API (and Anthropic\'s Messages API at /v1/messages) routed to the cheapest eligible supplier offer; suppliers sell expiring DIEM capacity. Errors are `{"error":{"code","message",...}}` with `X-Svc-Error-Code` (on /v1/messages inside Anthropic\'s `{"type":"error","error":{…}}`). Guides: /llms.txt, /SKILL.md, /pricing.md, /marketplace.md, /MCP.md.',
    },
    servers: [{ url: urls.base }],
    tags: [
      { name: "Public" },
      { name: "Documents" },
      { name: "Catalog" },
      { name: "Market" },
      { name: "Session" },
      { name: "Account" },
      { name: "Funding" },
      { name: "Agent" },
      { name: "Inference" },
      { name: "Pay per request" },
      { name: "Video" },
      { name: "Supply" },
      { name: "Webhooks" },
      { name: "GraphQL" },
      { name: "MCP" },
    ],
  });
}
