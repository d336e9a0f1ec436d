import type { IncomingMessage } from "node:http";
import { describe, expect, test } from "vitest";
import { anthropicErrorBody } from "../../../src/contract/messages.js";
import { dialectOf, errorPayload } from "../../../src/http/error-response.js";
import { DomainError, ERROR_CODES, ERROR_TABLE, type ErrorCode } from "../../../src/lib/errors.js";

/**
 * The Messages routes' errors (docs/decisions.md "Anthropic Messages API"): Anthropic's type for
 * each service code, the service's status and headers kept, `x-should-retry` from the code.
 */

const ANTHROPIC_TYPE: Record<ErrorCode, string> = {
  invalid_request: "invalid_request_error",
  model_not_live: "invalid_request_error",
  unsupported_modality: "invalid_request_error",
  authentication_failed: "authentication_error",
  insufficient_balance: "billing_error",
  key_budget_exceeded: "billing_error",
  payment_required: "billing_error",
  invalid_payment: "billing_error",
  payer_mismatch: "permission_error",
  csrf_rejected: "permission_error",
  model_not_allowed: "permission_error",
  insufficient_scope: "permission_error",
  forbidden: "permission_error",
  model_region_restricted: "permission_error",
  upstream_access_denied: "permission_error",
  not_found: "not_found_error",
  model_not_found: "not_found_error",
  method_not_allowed: "invalid_request_error",
  not_acceptable: "invalid_request_error",
  request_timeout: "timeout_error",
  payload_too_large: "request_too_large",
  unsupported_media_type: "invalid_request_error",
  headers_too_large: "invalid_request_error",
  payment_unfinished: "conflict_error",
  payment_identifier_conflict: "conflict_error",
  key_limit_reached: "conflict_error",
  webhook_limit_reached: "conflict_error",
  conflict: "conflict_error",
  gone: "not_found_error",
  key_concurrency_limit: "rate_limit_error",
  buyer_concurrency_limit: "rate_limit_error",
  signup_fuse: "rate_limit_error",
  model_throttled: "rate_limit_error",
  rate_limited: "rate_limit_error",
  internal_error: "api_error",
  settle_failed: "api_error",
  upstream_error: "api_error",
  no_eligible_supply: "overloaded_error",
  pool_empty: "overloaded_error",
  insufficient_routable_at_price: "overloaded_error",
  key_wait_timeout: "overloaded_error",
  keys_busy: "overloaded_error",
  not_configured: "overloaded_error",
  service_unavailable: "overloaded_error",
  facilitator_unavailable: "overloaded_error",
  stream_incomplete: "api_error",
};

describe("errorPayload in Anthropic's dialect", () => {
  test.each(ERROR_CODES.map((code) => ({ code })))("$code", ({ code }) => {
    const err = new DomainError(
      code,
      "m",
      code === "no_eligible_supply" ? { buyerMaxCents: 40, supportReference: "r" } : {},
    );
    const p = errorPayload(err, "anthropic", "req-1");
    expect(p.status).toBe(ERROR_TABLE[code].status);
    expect(p.headers["X-Svc-Error-Code"]).toBe(code);
    expect(p.headers["x-should-retry"]).toBe(String(ERROR_TABLE[code].retryable));
    expect(p.body).toMatchObject({
      type: "error",
      error: { type: ANTHROPIC_TYPE[code], message: "m", code, details: { error_code: code } },
      request_id: "req-1",
    });
  });

  test("details stay inside error (not mirrored at the top level); hint headers as on every route", () => {
    const err = new DomainError("no_eligible_supply", "No offer.", {
      buyerMaxCents: 40,
      cheapestPostedCents: 70,
      supportReference: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11",
      retryAfterSeconds: 2,
    });
    const p = errorPayload(err, "anthropic", "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a12");
    expect(p.body).toEqual({
      type: "error",
      error: {
        type: "overloaded_error",
        message: "No offer.",
        code: "no_eligible_supply",
        buyerMaxCents: 40,
        cheapestPostedCents: 70,
        supportReference: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11",
        details: { error_code: "no_eligible_supply" },
      },
      request_id: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a12",
    });
    expect(anthropicErrorBody.safeParse(p.body).success).toBe(true);
    expect(p.headers).toMatchObject({
      "X-Svc-Buyer-Max-Cents": "40",
      "X-Svc-Cheapest-Posted-Cents": "70",
      "X-Svc-Support-Reference": "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11",
      "Retry-After": "2",
      "x-should-retry": "false",
    });
    // the service's own dialect is unchanged
    expect(errorPayload(err).body).not.toHaveProperty("type");
  });
});

describe("dialectOf: the Messages routes, as Express routes them", () => {
  const req = (url: string, originalUrl?: string) => ({ url, originalUrl }) as unknown as IncomingMessage;
  test.each([
    ["/v1/messages", "anthropic"],
    ["/v1/messages?beta=true", "anthropic"],
    ["/V1/Messages/", "anthropic"],
    ["/v1/messages/count_tokens", "anthropic"],
    ["/v1/messages/batches/x", "anthropic"],
    ["/v1/messagesx", "svc"],
    ["/v1/chat/completions", "svc"],
    ["/v1/responses", "svc"],
    // the pay-per-request twin (issue 41)
    ["/x402/v1/messages", "anthropic"],
    ["/X402/v1/messages/", "anthropic"],
    ["/x402/v1/chat/completions", "svc"],
    ["/x402/v1/messagesx", "svc"],
  ])("%s → %s", (url, dialect) => {
    expect(dialectOf(req(url))).toBe(dialect);
  });

  test("Express's originalUrl wins over a rewritten url; no request is the service's dialect", () => {
    expect(dialectOf(req("/", "/v1/messages"))).toBe("anthropic");
    expect(dialectOf(undefined)).toBe("svc");
  });
});
