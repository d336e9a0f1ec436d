import { describe, expect, test } from "vitest";
import { failureFromError, failureOf, UpstreamClient } from "../../../src/adapters/upstream/client.js";
import { classifyFailure, outcomeOf } from "../../../src/domain/inference/pipeline/failure.js";
import { DomainError } from "../../../src/lib/errors.js";

/** A chat answer of `status` with a StandardError body saying `error`. */
const fromStatus = (status: number, error = "m") =>
  classifyFailure(failureOf("/chat/completions", status, "", {}, JSON.stringify({ error })));

describe("classifyFailure: one classification of every upstream failure", () => {
  test("the documented invalid-key answer: the supplier's key is bad → mark it, fall forward", () => {
    for (const s of [401, 403]) {
      expect(fromStatus(s, "Authentication failed")).toMatchObject({ kind: "supplier_auth", status: s });
    }
    expect(outcomeOf({ kind: "supplier_auth", detail: "" })).toBe("supplier_auth_failed");
  });

  test("any other 401/403 blames no key by itself: it is confirmed, and recorded as a retryable failure", () => {
    for (const s of [401, 403])
      expect(fromStatus(s, "Forbidden")).toMatchObject({ kind: "supplier_unclear", status: s });
    expect(outcomeOf({ kind: "supplier_unclear", detail: "" })).toBe("retryable_failure");
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

  test("a body that cannot be serialised is the buyer's error, not a network failure (no fall-forward)", async () => {
    // nothing listens on port 9: a body that reached the network would fail as `network`
    const client = new UpstreamClient({ baseUrl: "http://127.0.0.1:9/api/v1" });
    const circular: Record<string, unknown> = { model: "m" };
    circular.self = circular;
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    for (const body of [circular, { model: "m", extra: deep }, { n: 1n }]) {
      for (const r of [
        await client.inference("/chat/completions", "k", body, { stream: true }),
        await client.inference("/chat/completions", "k", body, { stream: false, timeoutMs: 1000 }),
      ]) {
        expect(r.ok).toBe(false);
        if (r.ok) continue;
        expect(r.failure.kind).toBe("request");
        const c = classifyFailure(r.failure);
        expect(c).toBeInstanceOf(DomainError);
        expect((c as DomainError).code).toBe("invalid_request");
      }
    }
    await client.close();
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
