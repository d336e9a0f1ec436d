import { type IncomingMessage, type ServerResponse, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import type { NextFunction, Request, Response } from "express";
import { ZodError } from "zod";
import { anthropicErrorObject } from "../contract/messages.js";
import { invalidRequest } from "../contract/parse.js";
import { DomainError, type ErrorDetails, isDomainError, retryAfterOf } from "../lib/errors.js";
import { logger } from "../lib/logger.js";
import { uuidV7 } from "../lib/uuid7.js";

/**
 * The only place a DomainError becomes HTTP: status, `{"error":{"code","message",...details}}`,
 * `X-Svc-Error-Code`, `Retry-After` and the hint headers of SPEC "Errors" rule 1. Details are rendered inside
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

/**
 * How a route family answers errors: the service's `{"error":{"code",…}}`, or Anthropic's
 * `{"type":"error","error":{"type","message",…}}` on the Messages routes (`/v1/messages…`, and its
 * pay-per-request twin `/x402/v1/messages`), with the
 * same status, details and headers (docs/decisions.md "Anthropic Messages API").
 */
export type ErrorDialect = "svc" | "anthropic";

/** The dialect of the route a request is for (the path as Express routes it: any letter case, trailing slash). */
export function dialectOf(req: IncomingMessage | undefined): ErrorDialect {
  const raw = (req as { originalUrl?: string } | undefined)?.originalUrl ?? req?.url ?? "";
  const q = raw.indexOf("?");
  const path = (q < 0 ? raw : raw.slice(0, q)).toLowerCase().replace(/\/+$/, "");
  const messages = (p: string) => p === "/v1/messages" || p.startsWith("/v1/messages/");
  // pay per request: the Messages twin answers errors as /v1/messages does, for the same SDKs
  return messages(path) || messages(path.replace(/^\/x402(?=\/)/, "")) ? "anthropic" : "svc";
}

export function errorPayload(err: DomainError, dialect: ErrorDialect = "svc", requestId?: string): ErrorPayload {
  const headers: Record<string, string> = { "X-Svc-Error-Code": err.code };
  for (const [key, header] of HINT_HEADERS) {
    const v = err.details[key];
    if (v !== undefined && v !== null) headers[header] = String(v);
  }
  // every 429 and 503 (docs/decisions.md "Retry-After"), in whole seconds
  const retryAfter = retryAfterOf(err);
  if (retryAfter !== undefined) headers["Retry-After"] = String(retryAfter);
  // the x402 receipt: X-PAYMENT-RESPONSE (v1) or PAYMENT-RESPONSE (v2), as the payment was sent
  const receipt = err.details.paymentResponse;
  if (receipt) headers[receipt.name] = receipt.value;
  const details: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(err.details)) {
    if (!HEADER_ONLY.has(k) && v !== undefined) details[k] = typeof v === "bigint" ? v.toString() : v;
  }
  if (dialect === "anthropic") {
    // the Anthropic SDK retries 408, 409, 429 and 5xx unless told: it is told what the code says
    headers["x-should-retry"] = String(err.retryable);
    return {
      status: err.status,
      headers,
      body: {
        type: "error",
        error: anthropicErrorObject(err.status, err.code, err.message, details),
        request_id: requestId ?? null,
      },
    };
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
  const p = errorPayload(domain, dialectOf(res.req), requestId ?? requestIdHeader(res));
  writeJson(res, p.status, p.headers, p.body);
}

export function sendError(res: Response, err: DomainError): void {
  const p = errorPayload(err, dialectOf(res.req), requestIdHeader(res));
  res.status(p.status).set(p.headers).json(p.body);
}

function requestIdHeader(res: ServerResponse): string | undefined {
  const id = res.getHeader("X-Svc-Request-Id");
  return typeof id === "string" ? id : undefined;
}

/** Converts anything thrown into a DomainError; unknown errors become a masked 500. */
export function toDomainError(err: unknown, requestId?: string): DomainError {
  if (isDomainError(err)) return err;
  // a zod refusal that reached here: the contract's 400, as every parse answers it
  if (err instanceof ZodError) return invalidRequest(err);
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
  // Express's "Failed to decode param" (a path the router could not decode): the entry layers (unsafeUrlError) answer
  // these before routing; this keeps any other decoding failure a 400 too
  if (err instanceof URIError) {
    return new DomainError("invalid_request", "The path has a malformed percent-escape.", { field: "path" });
  }
  if (e?.expose && typeof (e.status ?? e.statusCode) === "number" && (e.status ?? e.statusCode ?? 500) < 500) {
    return new DomainError("invalid_request", "Invalid request.");
  }
  if (isDependencyOutage(err)) {
    logger.warn({ err, requestId }, "a dependency did not answer");
    return new DomainError(
      "service_unavailable",
      "A dependency of the service did not answer; nothing was done. Retry shortly.",
      {
        retryAfterSeconds: 1,
        ...(requestId ? { requestId } : {}),
      },
    );
  }
  logger.error({ err, requestId }, "unhandled error");
  return new DomainError("internal_error", "Internal error.", requestId ? { requestId } : {});
}

/**
 * Postgres or Redis not answering — a connection refused or reset, Redis offline or out of
 * retries, a Redis Cluster failing over, Prisma unable to reach the server or to get a pooled
 * connection in time, Postgres out of connections — is a 503 the client may retry, not an internal
 * error.
 */
export function isDependencyOutage(err: unknown): boolean {
  const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string } } | null;
  if (!e || typeof e !== "object") return false;
  const code = e.code ?? e.cause?.code ?? "";
  if (
    ["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "P1001", "P1002", "P1017", "P2024", "53300", "57P01"].includes(
      code,
    )
  )
    return true;
  if (e.name === "MaxRetriesPerRequestError" || e.name === "ClusterAllFailedError") return true;
  const m = e.message ?? "";
  // a Redis Cluster mid-failover (docs/operations.md "Running on a Redis Cluster"): slots not served
  // yet (CLUSTERDOWN, TRYAGAIN), a slot map being refreshed, a client out of redirections, or a slot
  // that moved under an auto-pipelined batch (MOVED/ASK: ioredis follows a batch's redirection only
  // when every command in it got the same one, so a batch to a demoted master mixing slots fails)
  if (
    /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|MOVED|ASK)\b|Too many Cluster redirections|Cluster isn't ready|None of startup nodes is available|Failed to refresh slots cache/.test(
      m,
    )
  )
    return true;
  return /Connection is closed|Stream isn't writeable|too many clients|Can't reach database server|Timed out fetching a new connection|terminating connection due to administrator command/i.test(
    m,
  );
}

/** Express error middleware: the last `app.use`. */
export function errorMiddleware(err: unknown, _req: Request, res: Response, _next: NextFunction): void {
  writeError(res, err, res.locals.requestId as string | undefined);
}

/**
 * The answer to a request node's HTTP parser refused before any handler ran (the server's
 * `clientError` event): oversized headers or query string (431), a request that timed out (408), a
 * malformed request (400). Node would answer these itself with an empty body; every error the service
 * sends carries the JSON error shape, so the same payload is written raw here and
 * the connection closed. A socket already answering a request (pipelining) is only closed.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === "ECONNRESET" || !socket.writable || answering?.headersSent) {
    socket.destroy();
    return;
  }
  const p = errorPayload(clientErrorOf(err));
  const body = JSON.stringify(p.body);
  const headers: Record<string, string> = {
    ...p.headers,
    "X-Svc-Request-Id": uuidV7(new Date()),
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": String(Buffer.byteLength(body)),
    Connection: "close",
  };
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.end(`HTTP/1.1 ${p.status} ${STATUS_CODES[p.status] ?? ""}\r\n${head.join("")}\r\n${body}`);
}

function clientErrorOf(err: Error & { code?: string }): DomainError {
  switch (err.code) {
    case "HPE_HEADER_OVERFLOW":
      return new DomainError("headers_too_large", "Request headers (the query string included) are too large.");
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return new DomainError("payload_too_large", "Chunk extensions too large.");
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new DomainError("request_timeout", "The request was not received in time.");
    default:
      return new DomainError("invalid_request", "Malformed HTTP request.");
  }
}
