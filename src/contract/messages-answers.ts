import { decimal6, errorCode, uuid, z } from "./common.js";

type Json = Record<string, unknown>;

/** The Messages routes' answers and THE mapping of the service's errors onto Anthropic's. */

/** `usage` of a message: Anthropic's counts plus the service's cost (as on chat's `usage`). */
export const anthropicUsage = z
  .object({
    input_tokens: z.number().int().openapi({ description: "prompt tokens not read from the cache" }),
    output_tokens: z.number().int(),
    cache_read_input_tokens: z.number().int(),
    cache_creation_input_tokens: z.number().int().openapi({ description: "always 0: no cache writes are priced" }),
    cost: z.number().openapi({ description: "USD charged (the figure of X-Svc-Cost-Usdc, as a JSON number)" }),
    cost_details: z
      .object({ cost_usdc: decimal6, clearing_price_cents: z.number().int(), upstream_burn_diem: decimal6 })
      .openapi({ description: "the charged amount exact, the clearing price, the upstream burn" }),
  })
  .passthrough()
  .openapi("AnthropicUsage");

/** A buffered answer: Anthropic's message object. */
export const anthropicMessageResponse = z
  .object({
    id: z.string(),
    type: z.literal("message"),
    role: z.literal("assistant"),
    model: z.string().openapi({ description: "the catalog id that answered" }),
    content: z.array(z.record(z.unknown())).openapi({ description: "text, tool_use and (when asked) thinking blocks" }),
    stop_reason: z.enum(["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal"]).nullable(),
    stop_sequence: z.string().nullable(),
    usage: anthropicUsage,
  })
  .openapi("AnthropicMessageResponse");

export const countTokensResponse = z
  .object({
    input_tokens: z
      .number()
      .int()
      .openapi({ description: "the admission estimate: ceil(UTF-8 bytes / 3) + 16 per message" }),
  })
  .openapi("AnthropicCountTokens");

/**
 * The error body of the Messages routes: Anthropic's `{type: "error", error: {type, message}}`,
 * plus the service's `error.code` (and its details, as in every error body) and
 * `error.details.error_code` (where the Anthropic SDK reads a stable code: `APIError.errorCode`).
 */
export const anthropicErrorBody = z
  .object({
    type: z.literal("error"),
    error: z
      .object({
        type: z.string().openapi({ description: "Anthropic's error type (see the status table)" }),
        message: z.string(),
        code: errorCode,
        details: z.object({ error_code: errorCode }).passthrough(),
        supportReference: uuid.optional(),
      })
      .passthrough(),
    request_id: uuid.nullable(),
  })
  .openapi("AnthropicErrorBody");

/**
 * THE Anthropic error object of a service error (the HTTP bodies and the streams' `error` events):
 * Anthropic's `type` and `message`, the service's `code` and details beside them, and the code
 * again in `details.error_code`, where the Anthropic SDK reads a stable code.
 */
export function anthropicErrorObject(status: number, code: string, message: string, details: Json = {}): Json {
  return { type: anthropicErrorType(status), message, code, ...details, details: { error_code: code } };
}

/**
 * THE service status → Anthropic error type (docs/decisions.md "Anthropic Messages API"). The status
 * stays the service's (a 503 stays 503: the SDK retries 5xx unless `x-should-retry` says no).
 */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
    case 405:
    case 406:
    case 415:
    case 431:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
    case 410:
      return "not_found_error";
    case 408:
    case 504:
      return "timeout_error";
    case 409:
      return "conflict_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return "api_error";
  }
}
