import type { UpstreamFailure } from "../../../adapters/upstream/client.js";
import { DomainError } from "../../../lib/errors.js";
import type { AttemptOutcome } from "./session.js";

/** Why an attempt failed, when the request may fall forward to another key. */
export type AttemptFailure =
  /** 5xx, 429, timeouts, resets, a stream that closed before its first content: fall forward */
  | { kind: "retryable"; status?: number; detail: string }
  /** upstream 402: the supplier's key is out of capacity: cool it down, fall forward */
  | { kind: "supplier_exhausted"; status?: number; detail: string }
  /** the documented invalid-key answer (401 "Authentication failed"): mark it, fall forward */
  | { kind: "supplier_auth"; status?: number; detail: string }
  /** an undocumented 401/403 (`auth_unclear`): confirm the key with a rate-limits read, fall forward */
  | { kind: "supplier_unclear"; status?: number; detail: string };

/**
 * Maps an upstream failure (classified once, by `classifyAnswer` in adapters/upstream/answers.ts) to
 * fall-forward data, or to the buyer's own error: a refusal of the request itself is the buyer's
 * (relayed, no other key burned, no key marked). docs/decisions.md "Venice's answers: whose fault".
 */
export function classifyFailure(f: UpstreamFailure): AttemptFailure | DomainError {
  const detail = `${f.kind}${f.status ? ` ${f.status}` : ""}: ${f.message}`.slice(0, 200);
  switch (f.kind) {
    case "auth":
      return { kind: "supplier_auth", status: f.status, detail };
    case "auth_unclear":
      return { kind: "supplier_unclear", status: f.status, detail };
    case "payment":
      return { kind: "supplier_exhausted", status: f.status, detail };
    case "request":
      return requestError(f);
    default:
      return { kind: "retryable", status: f.status, detail };
  }
}

/** The buyer's answer to a request the upstream refused (the key stays as it is). */
function requestError(f: UpstreamFailure): DomainError {
  const upstream = { upstreamStatus: f.status };
  switch (f.reason) {
    case "region_restricted":
      return new DomainError(
        "model_region_restricted",
        `The upstream serves this model only in some regions (its \`regionRestrictions\` in GET /v1/models) and refused it from where this service calls it: ${f.message}`,
        upstream,
      );
    case "alpha_only":
      return new DomainError(
        "upstream_access_denied",
        `The upstream opens its Responses API to alpha testers only and refused this call; use POST /v1/chat/completions: ${f.message}`,
        { ...upstream, reason: f.reason },
      );
    case "pro_only":
      return new DomainError(
        "upstream_access_denied",
        `The upstream serves this model only to its Pro accounts and refused it: ${f.message}`,
        { ...upstream, reason: f.reason },
      );
  }
  if (f.status === 404)
    return new DomainError("model_not_found", `The upstream does not know this model: ${f.message}`);
  if (f.status === 413) return new DomainError("payload_too_large", f.message);
  return new DomainError("invalid_request", `The request was refused: ${f.message}`, upstream);
}

/** How an ended attempt is recorded (`null`: ended without a failure of its own, e.g. the request failed). */
export function outcomeOf(failure: AttemptFailure | null): AttemptOutcome {
  if (failure === null) return "aborted";
  switch (failure.kind) {
    case "supplier_exhausted":
      return "supplier_exhausted";
    case "supplier_auth":
      return "supplier_auth_failed";
    default:
      // an unclear refusal blames no key by itself (its confirmation may)
      return "retryable_failure";
  }
}
