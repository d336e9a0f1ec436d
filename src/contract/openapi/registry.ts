import { OpenAPIRegistry, type ResponseConfig, type RouteConfig } from "@asteasolutions/zod-to-openapi";
import { errorBody, HEADERS, type HeaderName, z } from "../common.js";

/**
 * The registry every route family registers into (../openapi.ts assembles them), with what they
 * share: the security schemes, the payment and tracing headers, each status's error response once,
 * and the helpers that describe a JSON body, a JSON or text answer and a route's errors.
 */

export type HeadersObject = Record<string, { $ref: string }>;

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

export const BEARER = [{ bearerAuth: [] }];
export const SESSION = [{ cookieAuth: [] }];
export const PUBLIC: RouteConfig["security"] = [];

// The x402 payment headers are request header parameters of the paid routes, not security schemes:
// a payment is not a credential (signup and the pay-per-request routes declare `security: []`), and
// what a paid route costs is its `x-payment-info` (docs/decisions.md "x402 discovery for
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
export const FUNDING_PAYMENT_HEADERS = z.object({ "X-PAYMENT": X_PAYMENT, "PAYMENT-SIGNATURE": PAYMENT_SIGNATURE });
export const V2_PAYMENT_HEADER = z.object({ "PAYMENT-SIGNATURE": PAYMENT_SIGNATURE });

// the tracing and hint headers, once, under components/headers (SPEC "Identifiers used for tracing")
for (const h of Object.values(HEADERS)) {
  registry.registerComponent("headers", h.name, { description: h.description, schema: { ...h.schema } });
}

/** Response headers: X-Svc-Request-Id (on every response) plus the named ones, as references. */
export function headers(...names: HeaderName[]): HeadersObject {
  const out: HeadersObject = {};
  for (const n of ["requestId", ...names] as HeaderName[]) {
    const name = HEADERS[n].name;
    out[name] = { $ref: `#/components/headers/${name}` };
  }
  return out;
}

export const ERROR_DESCRIPTIONS: Record<number, string> = {
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

export const ERROR_HEADERS: Record<number, HeaderName[]> = {
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

export function errorResponse(status: number, description?: string): ResponseConfig {
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

export function errorResponses(
  statuses: number[],
  overrides: Record<number, string> = {},
): Record<string, ResponseConfig | { $ref: string }> {
  // every route can fail unexpectedly
  const all = [...new Set([...statuses, 500])].sort((a, b) => a - b);
  return Object.fromEntries(
    all.map((s) => [String(s), (overrides[s] === undefined && ERROR_REFS.get(s)) || errorResponse(s, overrides[s])]),
  );
}

export function jsonResponse(schema: z.ZodTypeAny, description: string, ...extra: HeaderName[]): ResponseConfig {
  return { description, headers: headers(...extra), content: { "application/json": { schema } } };
}

export function jsonBody(schema: z.ZodTypeAny): NonNullable<RouteConfig["request"]>["body"] {
  return { required: true, content: { "application/json": { schema } } };
}

export function textResponse(mime: string, description: string): ResponseConfig {
  return { description, headers: headers(), content: { [mime]: { schema: { type: "string" } } } };
}

/** What a body-carrying request adds: 400 (bad JSON or fields), 413 and 415 from the one JSON parser. */
export const BODY_ERRORS = [400, 413, 415];

/** The buyer history: a JSON page, or with `format=csv` the same rows as text/csv. */
export function historyResponses(schema: z.ZodTypeAny): ResponseConfig {
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

export const KEY_UPDATE_ERRORS = {
  400: "A field is invalid (named in `error.field`) or the body names none; nothing was changed.",
  404: "No such active key on this account (a revoked key included).",
  409: "The key has expired: an expired key cannot be changed (revoke it, mint another).",
};
