import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher } from "undici";
import { classifyAnswer, type UpstreamRefusal } from "./answers.js";

/**
 * What a failed upstream call is (`UpstreamFailure`: failures are data, callers branch on them) and
 * how a thrown call, a non-2xx answer or an unsendable body becomes one.
 */

export type UpstreamFailureKind =
  /** the documented invalid-key answer (401 "Authentication failed"; a 401/403 of the rate-limits read) */
  | "auth"
  /** a 401/403 the reference does not document: the key is confirmed before it is blamed (answers.ts) */
  | "auth_unclear"
  /** 402: the supplier's key is out of balance or over its spend limit */
  | "payment"
  | "rate_limited"
  /** 5xx */
  | "server"
  | "timeout"
  /** connection refused/reset, DNS */
  | "network"
  /** 400/404/409/413/415/422, and a model or route refused to a valid key (`reason`): the request's */
  | "request"
  | "invalid_response";

export interface UpstreamFailure {
  kind: UpstreamFailureKind;
  status?: number;
  message: string;
  /** seconds, from Retry-After */
  retryAfter?: number;
  /** the upstream's error body, for request errors relayed to the buyer */
  body?: unknown;
  /** a `request` failure that is a documented refusal of the model or route to a valid key */
  reason?: UpstreamRefusal;
}

export type UpstreamResult<T> = { ok: true; value: T } | { ok: false; failure: UpstreamFailure };

/** undici's own timeouts (connect, response headers, body idle): timeouts, not unreachability. */
const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);

/**
 * A thrown call → failure. An aborted signal rejects with its reason (`TimeoutError` from
 * `AbortSignal.timeout`, `AbortError` from `AbortController.abort()` or undici's `RequestAbortedError`);
 * other undici errors carry their code at the top (`UND_ERR_SOCKET`, `ECONNREFUSED`, …), fetch-style
 * errors in `cause`.
 */
export function failureFromError(e: unknown): UpstreamFailure {
  const err = e as { name?: string; code?: string; cause?: { code?: string }; message?: string };
  const code = err?.cause?.code ?? err?.code;
  if (err?.name === "TimeoutError" || err?.name === "AbortError" || (code && TIMEOUT_CODES.has(code)))
    return { kind: "timeout", message: "upstream timed out" };
  return {
    kind: "network",
    message: `upstream unreachable (${code ?? err?.message ?? "error"})`,
  };
}
export function headerOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

function retryAfterOf(headers: IncomingHttpHeaders): number | undefined {
  const v = headerOf(headers, "retry-after");
  if (!v) return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}
/** A non-2xx answer to `path` → failure; always consumes the body. */
export async function failureFromResponse(path: string, res: Dispatcher.ResponseData): Promise<UpstreamFailure> {
  const text = await res.body.text().catch(() => "");
  return failureOf(path, res.statusCode, res.statusText, res.headers, text);
}

/** A non-2xx answer's route, status, headers and body text → failure, classified by `classifyAnswer`. */
export function failureOf(
  path: string,
  status: number,
  statusText: string,
  headers: IncomingHttpHeaders,
  text: string,
): UpstreamFailure {
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  const errorText =
    typeof error === "string"
      ? error
      : typeof (error as { message?: unknown } | undefined)?.message === "string"
        ? String((error as { message: string }).message)
        : "";
  const message = errorText || statusText || `HTTP ${status}`;
  const { kind, reason } = classifyAnswer(path, status, errorText);
  return { kind, status, message, retryAfter: retryAfterOf(headers), body, ...(reason ? { reason } : {}) };
}
