import type { ServerResponse } from "node:http";
import type { NextFunction, Request, Response } from "express";
import { ZodError } from "zod";
import { DomainError, type ErrorDetails, isDomainError } from "../lib/errors.js";
import { logger } from "../lib/logger.js";

/**
 * The only place a DomainError becomes HTTP: status, `{"error":{"code","message",...details}}`,
 * `X-Svc-Error-Code` and the hint headers of SPEC "Errors" rule 1. Details are rendered inside
 * `error` and mirrored at the top level of the body (docs/decisions.md "Error bodies").
 */

const HINT_HEADERS: [keyof ErrorDetails, string][] = [
  ["buyerMaxCents", "X-Svc-Buyer-Max-Cents"],
  ["cheapestPostedCents", "X-Svc-Cheapest-Posted-Cents"],
  ["routableDiemAboveMax", "X-Svc-Routable-Diem-Above-Max"],
  ["maxEligibleOfferDiem", "X-Svc-Max-Eligible-Offer-Diem"],
  ["eligibleRoutableDiem", "X-Svc-Eligible-Routable-Diem"],
  ["supportReference", "X-Svc-Support-Reference"],
];

/** Details that only drive headers and never appear in the body. */
const HEADER_ONLY = new Set<string>(["retryAfterSeconds", "paymentResponse"]);

export interface ErrorPayload {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

export function errorPayload(err: DomainError): ErrorPayload {
  const headers: Record<string, string> = { "X-Svc-Error-Code": err.code };
  for (const [key, header] of HINT_HEADERS) {
    const v = err.details[key];
    if (v !== undefined && v !== null) headers[header] = String(v);
  }
  if (err.details.retryAfterSeconds !== undefined) headers["Retry-After"] = String(err.details.retryAfterSeconds);
  if (err.details.paymentResponse) headers["X-PAYMENT-RESPONSE"] = err.details.paymentResponse;
  const details: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(err.details)) {
    if (!HEADER_ONLY.has(k) && v !== undefined) details[k] = typeof v === "bigint" ? v.toString() : v;
  }
  return {
    status: err.status,
    headers,
    body: { ...details, error: { code: err.code, message: err.message, ...details } },
  };
}

/**
 * A JSON answer on a bare node response, byte for byte what Express's `res.status().set().json()`
 * sends for a POST (headers in that order, then the same Content-Type and Content-Length).
 */
export function writeJson(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: Record<string, unknown>,
): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  const json = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Content-Length", String(Buffer.byteLength(json)));
  res.end(json);
}

/** The one error ending (Express's and the fast path's): once bytes are out, only end. */
export function writeError(res: ServerResponse, err: unknown, requestId: string | undefined): void {
  const domain = toDomainError(err, requestId);
  if (res.headersSent) {
    res.end();
    return;
  }
  const p = errorPayload(domain);
  writeJson(res, p.status, p.headers, p.body);
}

export function sendError(res: Response, err: DomainError): void {
  const p = errorPayload(err);
  res.status(p.status).set(p.headers).json(p.body);
}

/** Converts anything thrown into a DomainError; unknown errors become a masked 500. */
export function toDomainError(err: unknown, requestId?: string): DomainError {
  if (isDomainError(err)) return err;
  if (err instanceof ZodError) {
    const issue = err.issues[0];
    const field = issue?.path.join(".") || undefined;
    const message = issue ? `${field ? `${field}: ` : ""}${issue.message}` : "Invalid request.";
    return new DomainError("invalid_request", message, field ? { field } : {});
  }
  const e = err as { type?: string; status?: number; statusCode?: number; expose?: boolean };
  // body-parser failures are client mistakes, never 500
  if (e?.type === "entity.parse.failed") {
    return new DomainError("invalid_request", "Malformed JSON body.");
  }
  if (e?.type === "entity.too.large") {
    return new DomainError("payload_too_large", "Request body too large.");
  }
  if (e?.type === "encoding.unsupported" || e?.type === "charset.unsupported") {
    return new DomainError("unsupported_media_type", "Unsupported body encoding.");
  }
  // Express's "Failed to decode param" (a path the router could not decode): rejectUnsafeUrl answers
  // these before routing; this keeps any other decoding failure a 400 too
  if (err instanceof URIError) {
    return new DomainError("invalid_request", "The path has a malformed percent-escape.", { field: "path" });
  }
  if (e?.expose && typeof (e.status ?? e.statusCode) === "number" && (e.status ?? e.statusCode ?? 500) < 500) {
    return new DomainError("invalid_request", "Invalid request.");
  }
  logger.error({ err, requestId }, "unhandled error");
  return new DomainError("internal_error", "Internal error.", requestId ? { requestId } : {});
}

/** Express error middleware: the last `app.use`. */
export function errorMiddleware(err: unknown, _req: Request, res: Response, _next: NextFunction): void {
  writeError(res, err, res.locals.requestId as string | undefined);
}
