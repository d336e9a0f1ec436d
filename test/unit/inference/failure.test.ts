import { describe, expect, test } from "vitest";
import { classifyStatus, failureFromError } from "../../../src/adapters/upstream/client.js";
import { classifyFailure, outcomeOf } from "../../../src/domain/inference/failure.js";
import { DomainError } from "../../../src/lib/errors.js";

const fromStatus = (status: number) => classifyFailure({ kind: classifyStatus(status), status, message: "m" });

describe("classifyFailure: one classification of every upstream failure", () => {
  test("401/403: the supplier's key is bad → mark it, fall forward", () => {
    for (const s of [401, 403]) expect(fromStatus(s)).toMatchObject({ kind: "supplier_auth", status: s });
    expect(outcomeOf({ kind: "supplier_auth", detail: "" })).toBe("supplier_auth_failed");
  });

  test("402: the key is out of capacity → cool it down, fall forward", () => {
    expect(fromStatus(402)).toMatchObject({ kind: "supplier_exhausted", status: 402 });
    expect(outcomeOf({ kind: "supplier_exhausted", detail: "" })).toBe("supplier_exhausted");
  });

  test("429, 5xx, timeouts and resets → fall forward", () => {
    for (const s of [429, 500, 502, 503, 504]) expect(fromStatus(s)).toMatchObject({ kind: "retryable", status: s });
    const timeout = classifyFailure(failureFromError(Object.assign(new Error("t"), { name: "TimeoutError" })));
    expect(timeout).toMatchObject({ kind: "retryable" });
    const reset = classifyFailure(failureFromError(Object.assign(new Error("r"), { code: "ECONNRESET" })));
    expect(reset).toMatchObject({ kind: "retryable" });
    expect(outcomeOf({ kind: "retryable", detail: "" })).toBe("retryable_failure");
  });

  test("400/404/413/422 are the buyer's own error: relayed, no other key tried", () => {
    const cases: [number, string][] = [
      [400, "invalid_request"],
      [404, "model_not_found"],
      [413, "payload_too_large"],
      [422, "invalid_request"],
    ];
    for (const [status, code] of cases) {
      const r = fromStatus(status);
      expect(r, String(status)).toBeInstanceOf(DomainError);
      expect((r as DomainError).code).toBe(code);
    }
  });

  test("the detail recorded is bounded and names the kind and status", () => {
    const r = classifyFailure({ kind: "server", status: 503, message: "x".repeat(500) });
    expect(r).toMatchObject({ kind: "retryable" });
    const detail = (r as { detail: string }).detail;
    expect(detail.startsWith("server 503: ")).toBe(true);
    expect(detail.length).toBe(200);
  });

  test("an attempt that ended without a failure of its own is recorded as aborted", () => {
    expect(outcomeOf(null)).toBe("aborted");
  });
});
