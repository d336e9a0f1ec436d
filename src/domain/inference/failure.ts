import type { UpstreamFailure } from "../../adapters/upstream/client.js";
import { DomainError } from "../../lib/errors.js";
import type { AttemptOutcome } from "./session.js";

/** Why an attempt failed, when the request may fall forward to another key. */
export type AttemptFailure =
  /** 5xx, 429, timeouts, resets, a stream that closed before its first content: fall forward */
  | { kind: "retryable"; status?: number; detail: string }
  /** upstream 402: the supplier's key is out of capacity: cool it down, fall forward */
  | { kind: "supplier_exhausted"; status?: number; detail: string }
  /** upstream 401/403: the key is bad: mark it, fall forward */
  | { kind: "supplier_auth"; status?: number; detail: string };

/**
 * Maps an upstream failure to fall-forward data, or to the buyer's own error: a 4xx about the
 * request itself is the buyer's (relayed, no other key burned, no key marked).
 */
export function classifyFailure(f: UpstreamFailure): AttemptFailure | DomainError {
  const detail = `${f.kind}${f.status ? ` ${f.status}` : ""}: ${f.message}`.slice(0, 200);
  switch (f.kind) {
    case "auth":
      return { kind: "supplier_auth", status: f.status, detail };
    case "payment":
      return { kind: "supplier_exhausted", status: f.status, detail };
    case "request":
      if (f.status === 404)
        return new DomainError("model_not_found", `The upstream does not know this model: ${f.message}`);
      if (f.status === 413) return new DomainError("payload_too_large", f.message);
      return new DomainError("invalid_request", `The request was refused: ${f.message}`, { upstreamStatus: f.status });
    default:
      return { kind: "retryable", status: f.status, detail };
  }
}

/** How an ended attempt is recorded (`null`: ended without a failure of its own, e.g. the request failed). */
export function outcomeOf(failure: AttemptFailure | null): AttemptOutcome {
  if (failure === null) return "aborted";
  if (failure.kind === "retryable") return "retryable_failure";
  return failure.kind === "supplier_exhausted" ? "supplier_exhausted" : "supplier_auth_failed";
}
