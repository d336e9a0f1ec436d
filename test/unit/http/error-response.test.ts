import { describe, expect, test } from "vitest";
import { ZodError, z } from "zod";
import { errorPayload, toDomainError } from "../../../src/http/error-response.js";
import {
  DomainError,
  ERROR_CODES,
  ERROR_TABLE,
  type ErrorCode,
  type ErrorRow,
  retryAfterOf,
} from "../../../src/lib/errors.js";

const EXPECTED_STATUS: Record<ErrorCode, number> = {
  invalid_request: 400,
  model_not_live: 400,
  unsupported_modality: 400,
  authentication_failed: 401,
  insufficient_balance: 402,
  key_budget_exceeded: 402,
  model_not_allowed: 403,
  insufficient_scope: 403,
  forbidden: 403,
  model_region_restricted: 403,
  upstream_access_denied: 403,
  payment_required: 402,
  invalid_payment: 402,
  payer_mismatch: 403,
  csrf_rejected: 403,
  not_found: 404,
  model_not_found: 404,
  method_not_allowed: 405,
  not_acceptable: 406,
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  headers_too_large: 431,
  payment_unfinished: 409,
  payment_identifier_conflict: 409,
  key_limit_reached: 409,
  webhook_limit_reached: 409,
  conflict: 409,
  gone: 410,
  key_concurrency_limit: 429,
  buyer_concurrency_limit: 429,
  signup_fuse: 429,
  model_throttled: 429,
  rate_limited: 429,
  internal_error: 500,
  settle_failed: 500,
  upstream_error: 502,
  no_eligible_supply: 503,
  pool_empty: 503,
  insufficient_routable_at_price: 503,
  key_wait_timeout: 503,
  keys_busy: 503,
  not_configured: 503,
  service_unavailable: 503,
  facilitator_unavailable: 503,
  stream_incomplete: 200,
};

describe("ERROR_TABLE: every code has the spec's status", () => {
  test.each(ERROR_CODES.map((code) => ({ code })))("$code", ({ code }) => {
    expect(ERROR_TABLE[code].status).toBe(EXPECTED_STATUS[code]);
    const p = errorPayload(new DomainError(code, "m"));
    expect(p.status).toBe(EXPECTED_STATUS[code]);
    expect(p.headers["X-Svc-Error-Code"]).toBe(code);
    expect(p.body).toEqual({ error: { code, message: "m" } });
  });
});

// Issue 40: every 429 and 503 carries Retry-After in whole seconds (the OpenAI and Anthropic SDKs read it)
describe("Retry-After on every 429 and 503", () => {
  const limited = ERROR_CODES.filter((code) => [429, 503].includes(ERROR_TABLE[code].status));
  const others = ERROR_CODES.filter((code) => !limited.includes(code));

  test("the codes are the spec's 429s and 503s", () => {
    expect(limited.sort()).toEqual(ERROR_CODES.filter((code) => [429, 503].includes(EXPECTED_STATUS[code])).sort());
    expect(limited.length).toBeGreaterThanOrEqual(13);
  });

  test.each(limited.map((code) => ({ code })))("$code: its default, a whole number of seconds", ({ code }) => {
    const p = errorPayload(new DomainError(code, "m"));
    expect(p.headers["Retry-After"]).toMatch(/^[1-9][0-9]*$/);
    expect(Number(p.headers["Retry-After"])).toBe((ERROR_TABLE[code] as ErrorRow).retryAfterSeconds);
    expect(retryAfterOf(new DomainError(code, "m"))).toBe(Number(p.headers["Retry-After"]));
    // never in the body
    expect(JSON.stringify(p.body)).not.toContain("retryAfter");
  });

  test.each(others.map((code) => ({ code })))("$code: none unless the refusal gives one", ({ code }) => {
    expect(errorPayload(new DomainError(code, "m")).headers["Retry-After"]).toBeUndefined();
    expect((ERROR_TABLE[code] as ErrorRow).retryAfterSeconds).toBeUndefined();
  });

  test("a refusal's own value wins (a limiter's reset), rounded up to whole seconds, at least 1", () => {
    const h = (s: number) =>
      errorPayload(new DomainError("rate_limited", "m", { retryAfterSeconds: s })).headers["Retry-After"];
    expect(h(17)).toBe("17");
    expect(h(2.2)).toBe("3");
    expect(h(0)).toBe("1");
  });

  test("the service's own 503s from thrown infrastructure errors carry it too", () => {
    const e = toDomainError(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));
    expect(e.code).toBe("service_unavailable");
    expect(errorPayload(e).headers["Retry-After"]).toBe("1");
  });
});

describe("errorPayload", () => {
  test("no_eligible_supply carries body fields and hint headers", () => {
    const p = errorPayload(
      new DomainError("no_eligible_supply", "raise the ceiling", {
        buyerMaxCents: 40,
        cheapestPostedCents: 55,
        routableDiemAboveMax: "12.000000",
        supportReference: "7d1c1f7e-8a7e-4e0c-9a44-8e7c9b7b0b11",
      }),
    );
    expect(p.status).toBe(503);
    expect(p.headers).toMatchObject({
      "X-Svc-Error-Code": "no_eligible_supply",
      "X-Svc-Buyer-Max-Cents": "40",
      "X-Svc-Cheapest-Posted-Cents": "55",
      "X-Svc-Routable-Diem-Above-Max": "12.000000",
      "X-Svc-Support-Reference": "7d1c1f7e-8a7e-4e0c-9a44-8e7c9b7b0b11",
    });
    expect(p.body.error).toMatchObject({ code: "no_eligible_supply", buyerMaxCents: 40, cheapestPostedCents: 55 });
    expect(p.body.cheapestPostedCents).toBe(55);
  });

  test("retryAfterSeconds becomes Retry-After and stays out of the body", () => {
    const p = errorPayload(new DomainError("key_concurrency_limit", "busy", { retryAfterSeconds: 1 }));
    expect(p.headers["Retry-After"]).toBe("1");
    expect(JSON.stringify(p.body)).not.toContain("retryAfter");
  });

  test("409 funding body has transaction and reconciling, never accepts", () => {
    const p = errorPayload(
      new DomainError("payment_unfinished", "settled, not recorded", { transaction: "0xabc", reconciling: true }),
    );
    expect(p.body).toMatchObject({ transaction: "0xabc", reconciling: true });
    expect(p.body).not.toHaveProperty("accepts");
  });
});

describe("toDomainError", () => {
  test("malformed JSON from body-parser is 400 invalid_request", () => {
    const e = toDomainError(Object.assign(new SyntaxError("Unexpected token"), { type: "entity.parse.failed" }));
    expect(e.code).toBe("invalid_request");
    expect(e.status).toBe(400);
  });
  test("too-large body is 413", () => {
    expect(toDomainError({ type: "entity.too.large" }).status).toBe(413);
  });
  test("zod errors are 400 naming the field", () => {
    const r = z.object({ amountMicroUsdc: z.number().int() }).safeParse({ amountMicroUsdc: "x" });
    const e = toDomainError(r.success ? new Error() : r.error);
    expect(e).toBeInstanceOf(DomainError);
    expect(e.code).toBe("invalid_request");
    expect(e.details.field).toBe("amountMicroUsdc");
    expect(r.success ? undefined : r.error).toBeInstanceOf(ZodError);
  });
  test("Express's URIError (a path parameter that does not decode) is 400 naming the path", () => {
    const e = toDomainError(Object.assign(new URIError("Failed to decode param '%ZZ'"), { status: 400 }));
    expect(e.code).toBe("invalid_request");
    expect(e.details.field).toBe("path");
  });
  test("Postgres or Redis not answering is a retryable 503 service_unavailable, never a 500", () => {
    const outages = [
      Object.assign(new Error("Reached the max retries per request limit (which is 20)."), {
        name: "MaxRetriesPerRequestError",
      }),
      new Error("Connection is closed."),
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6379"), { code: "ECONNREFUSED" }),
      Object.assign(new Error("Timed out fetching a new connection from the connection pool."), { code: "P2024" }),
      new Error("sorry, too many clients already"),
      new Error("terminating connection due to administrator command"),
      // a Redis Cluster failing over
      new Error("CLUSTERDOWN The cluster is down"),
      new Error("TRYAGAIN Multiple keys request during rehashing of slot"),
      new Error("MOVED 2317 127.0.0.1:43683"),
      new Error("ASK 2317 127.0.0.1:43683"),
      new Error("Too many Cluster redirections. Last error: Error: Connection is closed."),
    ];
    for (const err of outages) {
      const e = toDomainError(err);
      expect([err.message, e.code, e.status, e.details.retryAfterSeconds]).toEqual([
        err.message,
        "service_unavailable",
        503,
        1,
      ]);
    }
  });
  test("anything else is a masked 500", () => {
    const e = toDomainError(new Error("db password is hunter2"));
    expect(e.code).toBe("internal_error");
    expect(e.message).not.toContain("hunter2");
  });
});
