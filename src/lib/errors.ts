/**
 * The one set of domain errors, with the stable codes of SPEC "Errors". Services throw
 * `DomainError`; transports map it in exactly one place each (http/error-response.ts,
 * graphql/errors.ts). Adding a code = one row in ERROR_TABLE + a test.
 *
 * Every 429 and 503 code has `retryAfterSeconds`: the `Retry-After` (whole seconds) its answers
 * carry when the refusal does not know better itself (`details.retryAfterSeconds`: a limiter's
 * reset, a fuse's window); see `retryAfterOf` and docs/decisions.md "Retry-After".
 */

export const ERROR_TABLE = {
  // 400
  invalid_request: { status: 400, retryable: false },
  model_not_live: { status: 400, retryable: false },
  unsupported_modality: { status: 400, retryable: false },
  // 401
  authentication_failed: { status: 401, retryable: false },
  // 402
  insufficient_balance: { status: 402, retryable: false },
  /** the calling API key's budget for the period cannot cover the request; no `accepts` (funding cannot lift it) */
  key_budget_exceeded: { status: 402, retryable: false },
  /** funding: the x402 challenge, no payment sent yet (the body carries `accepts`) */
  payment_required: { status: 402, retryable: false },
  /** funding: the payment sent cannot settle (malformed, mismatched, refused); no money moved; `accepts` */
  invalid_payment: { status: 402, retryable: false },
  // 403
  payer_mismatch: { status: 403, retryable: false },
  csrf_rejected: { status: 403, retryable: false },
  /** the calling API key may not call this model (its policy's `models`) */
  model_not_allowed: { status: 403, retryable: false },
  /** the calling API key lacks the scope this route needs (`details.scope`) */
  insufficient_scope: { status: 403, retryable: false },
  /** a key asked for more than it may: a key outside its tree, its own policy, wider than its minter */
  forbidden: { status: 403, retryable: false },
  /** the upstream refused the model from the region the service calls it from (no other key helps) */
  model_region_restricted: { status: 403, retryable: false },
  /** the upstream refused a route or model to the supplier key asked: alpha-only, Pro-only */
  upstream_access_denied: { status: 403, retryable: false },
  // 404
  not_found: { status: 404, retryable: false },
  model_not_found: { status: 404, retryable: false },
  // 405, 406, 408, 413, 415, 431
  method_not_allowed: { status: 405, retryable: false },
  not_acceptable: { status: 406, retryable: false },
  request_timeout: { status: 408, retryable: true },
  payload_too_large: { status: 413, retryable: false },
  unsupported_media_type: { status: 415, retryable: false },
  headers_too_large: { status: 431, retryable: false },
  // 409
  payment_unfinished: { status: 409, retryable: false },
  /** an x402 `payment-identifier` id this payer used with another payment or request; nothing charged */
  payment_identifier_conflict: { status: 409, retryable: false },
  key_limit_reached: { status: 409, retryable: false },
  /** an account has 10 webhook endpoints (the most it may have): delete one first */
  webhook_limit_reached: { status: 409, retryable: false },
  conflict: { status: 409, retryable: false },
  // 410
  gone: { status: 410, retryable: false },
  // 429
  key_concurrency_limit: { status: 429, retryable: true, retryAfterSeconds: 1 },
  buyer_concurrency_limit: { status: 429, retryable: true, retryAfterSeconds: 1 },
  /** the fuse answers the seconds until its window turns; 60 is a whole window */
  signup_fuse: { status: 429, retryable: true, retryAfterSeconds: 60 },
  model_throttled: { status: 429, retryable: true, retryAfterSeconds: 1 },
  /** the limiter answers the seconds until its minute turns; 60 is a whole minute */
  rate_limited: { status: 429, retryable: true, retryAfterSeconds: 60 },
  // 500
  internal_error: { status: 500, retryable: true },
  settle_failed: { status: 500, retryable: true },
  // 502
  upstream_error: { status: 502, retryable: true },
  // 503
  /** raising the ceiling is the fix; a retry only helps once supply moves: short, so SDKs give up soon */
  no_eligible_supply: { status: 503, retryable: false, retryAfterSeconds: 5 },
  pool_empty: { status: 503, retryable: true, retryAfterSeconds: 30 },
  insufficient_routable_at_price: { status: 503, retryable: true, retryAfterSeconds: 5 },
  key_wait_timeout: { status: 503, retryable: true, retryAfterSeconds: 1 },
  keys_busy: { status: 503, retryable: true, retryAfterSeconds: 1 },
  /** an operator must act: a retry within the minute rarely helps */
  not_configured: { status: 503, retryable: false, retryAfterSeconds: 60 },
  /** Postgres or Redis did not answer (an outage, a full pool): nothing happened; retry shortly */
  service_unavailable: { status: 503, retryable: true, retryAfterSeconds: 1 },
  facilitator_unavailable: { status: 503, retryable: true, retryAfterSeconds: 5 },
  // in-band only (streams)
  stream_incomplete: { status: 200, retryable: false },
} as const satisfies Record<string, ErrorRow>;

/** One code's row: its HTTP status, whether a retry may succeed, and (429 and 503) its default Retry-After. */
export interface ErrorRow {
  status: number;
  retryable: boolean;
  /** whole seconds; every 429 and 503 code has one (test/unit/http/error-response.test.ts) */
  retryAfterSeconds?: number;
}

export type ErrorCode = keyof typeof ERROR_TABLE;

export const ERROR_CODES = Object.keys(ERROR_TABLE) as ErrorCode[];

/** One HTTP header a domain answer carries: its name and its value, as sent. */
export interface HeaderField {
  name: string;
  value: string;
}

/**
 * Structured details. Known keys become hint headers (see http/error-response.ts); every key
 * is rendered in the JSON body. Values are JSON-safe (bigints are rendered by the caller).
 */
export interface ErrorDetails {
  /** field that failed validation */
  field?: string;
  buyerMaxCents?: number;
  cheapestPostedCents?: number | null;
  routableDiemAboveMax?: string;
  eligibleRoutableDiem?: string;
  maxEligibleOfferDiem?: string;
  supportReference?: string;
  retryAfterSeconds?: number;
  transaction?: string | null;
  reconciling?: boolean;
  credited?: boolean;
  /** key_budget_exceeded: what the key may still spend this period (six decimals) and when it resets */
  remainingUsdc?: string;
  resetsAt?: string | null;
  /** the x402 settlement receipt, named and encoded for the payment's x402 version (domain/funding/x402.ts) */
  paymentResponse?: HeaderField;
  [key: string]: unknown;
}

export class DomainError extends Error {
  override readonly name = "DomainError";
  readonly code: ErrorCode;
  readonly details: ErrorDetails;
  readonly status: number;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.details = details;
    this.status = ERROR_TABLE[code].status;
    this.retryable = ERROR_TABLE[code].retryable;
  }
}

export function isDomainError(e: unknown): e is DomainError {
  return e instanceof DomainError;
}

/**
 * THE `Retry-After` of an error answer, in whole seconds (at least 1): the refusal's own
 * `details.retryAfterSeconds` (a limiter's reset, a fuse's window), else its code's default; none
 * for a code without one. Every transport that renders an error's headers asks here (REST's
 * error-response.ts; a route with its own error shape, such as Anthropic's, too).
 */
export function retryAfterOf(err: DomainError): number | undefined {
  const own = err.details.retryAfterSeconds;
  const seconds =
    typeof own === "number" && Number.isFinite(own) ? own : (ERROR_TABLE[err.code] as ErrorRow).retryAfterSeconds;
  return seconds === undefined ? undefined : Math.max(1, Math.ceil(seconds));
}

/** Shorthands for the common cases. */
export const errors = {
  invalid(message: string, field?: string): DomainError {
    return new DomainError("invalid_request", message, field ? { field } : {});
  },
  unauthenticated(message = "Authentication failed: missing or invalid credential."): DomainError {
    return new DomainError("authentication_failed", message);
  },
  notFound(what: string): DomainError {
    return new DomainError("not_found", `${what} not found.`);
  },
  internal(message = "Internal error.", cause?: unknown): DomainError {
    return new DomainError("internal_error", message, {}, { cause });
  },
};
