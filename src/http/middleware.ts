import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseQueryString } from "node:querystring";
import { parse as parseUrl } from "node:url";
import express, { type Request, type Response } from "express";
import { type DomainError, errors } from "../lib/errors.js";
import { describeProblem, findJsonProblem, textProblem } from "../lib/json-safety.js";
import { uuidV7 } from "../lib/uuid7.js";

/** Body limit for JSON requests (chat bodies may carry images as data URLs). */
export const JSON_BODY_LIMIT = "20mb";

/**
 * Body limit for /graphql: a document is bounded at 2,000 tokens (graphql/limits.ts) and its
 * variables are small, so an anonymous flood cannot make the process hold 20 MB per request.
 */
export const GRAPHQL_BODY_LIMIT = "1mb";

type Middleware = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

/** express.json with `limit`, then the text and depth checks on what it parsed. */
function checkedJsonParser(limit: string): Middleware {
  const parse = express.json({ limit, strict: false });
  return (req, res, next) =>
    parse(req as Request, res as Response, (err?: unknown) => {
      next(err ?? unsafeBodyError((req as { body?: unknown }).body));
    });
}

/**
 * The one JSON body parser: Express's stack and the inference fast path (routes/inference.ts)
 * share it, so limits, charsets, content codings and error types are the same on both. It only needs
 * node's request and response; it leaves `req.body` undefined for a non-JSON content type.
 * A parsed body with text Postgres cannot store (NUL, a lone surrogate) or nested deeper than
 * MAX_JSON_DEPTH is a 400 naming the field, before any service sees it (a recursive walk or
 * Postgres would fail on it later, as a 500).
 */
export const jsonBody: Middleware = checkedJsonParser(JSON_BODY_LIMIT);

/** The same parser with GRAPHQL_BODY_LIMIT, mounted on /graphql before the app-wide one. */
export const graphqlJsonBody: Middleware = checkedJsonParser(GRAPHQL_BODY_LIMIT);

function unsafeBodyError(body: unknown): DomainError | undefined {
  const found = body === undefined ? null : findJsonProblem(body);
  return found ? errors.invalid(describeProblem(found.problem, found.field), found.field || "body") : undefined;
}

/**
 * Path and query text the routes would hand to Postgres: a path whose percent-escapes do not decode
 * (Express's "Failed to decode param" URIError), or that decodes to a NUL, and a query value with a
 * NUL or a lone surrogate are 400 `invalid_request`, before routing and before any credential check
 * (docs/decisions.md "Hostile input"). The path and query are read as Express reads them (`req.path`,
 * `req.query`: parseurl, then node's querystring, Express's "simple" parser), so the fast path and
 * Express judge the same request alike: a `#…` after the query is not part of it. An entry layer
 * (layers.ts).
 */
export function unsafeUrlError(req: IncomingMessage): DomainError | undefined {
  const url = req.url ?? "";
  let path: string;
  let query: string | null;
  if (isPlainTarget(url)) {
    const q = url.indexOf("?");
    path = q < 0 ? url : url.slice(0, q);
    query = q < 0 ? null : url.slice(q + 1);
  } else {
    const parsed = parseUrl(url);
    path = parsed.pathname ?? "";
    query = parsed.query as string | null;
  }
  try {
    path = decodeURIComponent(path);
  } catch {
    return errors.invalid("The path has a malformed percent-escape (%XX with two hex digits of UTF-8).", "path");
  }
  const problem = textProblem(path);
  if (problem) return errors.invalid(describeProblem(problem, "path"), "path");
  if (!query) return undefined;
  const found = findJsonProblem(parseQueryString(query));
  return found ? errors.invalid(describeProblem(found.problem, found.field), found.field || "query") : undefined;
}

/**
 * parseurl's fast case (Express's URL reader): an origin-form target with none of the characters
 * that send it to node's legacy `url.parse` (a fragment mark, white space), split at its first `?`.
 */
function isPlainTarget(url: string): boolean {
  if (url.charCodeAt(0) !== 0x2f /* / */) return false;
  for (let i = 1; i < url.length; i++) {
    switch (url.charCodeAt(i)) {
      case 0x09:
      case 0x0a:
      case 0x0c:
      case 0x0d:
      case 0x20:
      case 0x23 /* # */:
      case 0xa0:
      case 0xfeff:
        return false;
    }
  }
  return true;
}

export const REQUEST_ID_HEADER = "X-Svc-Request-Id";

/**
 * Sets a fresh `X-Svc-Request-Id` on the response and returns it (for logs). A v7 uuid of now: an
 * inference request's record takes it as its id, so new records land at the right edge of their
 * primary key instead of on a random page (docs/decisions.md "Record ids in time order").
 */
export function setRequestId(res: ServerResponse): string {
  const id = uuidV7(new Date());
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** Tracks in-flight requests so shutdown can wait for them. */
export class InFlight {
  private count = 0;
  private waiters: (() => void)[] = [];

  /** Counts the response until it finishes or its connection closes (once, whichever comes first). */
  track(res: ServerResponse): void {
    this.count++;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      this.count--;
      if (this.count === 0) for (const w of this.waiters.splice(0)) w();
    };
    res.once("finish", finish);
    res.once("close", finish);
  }

  get size(): number {
    return this.count;
  }

  /** Resolves when no request is in flight, or after `timeoutMs`. */
  drained(timeoutMs: number): Promise<boolean> {
    if (this.count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), timeoutMs);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }
}

/** `jsonBody` outside Express: resolves with what it leaves in `req.body`, or rejects with its error. */
export function readJsonBody(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  return new Promise((resolve, reject) =>
    jsonBody(req, res, (err?: unknown) => (err ? reject(err) : resolve((req as { body?: unknown }).body))),
  );
}
