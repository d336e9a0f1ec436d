import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseQueryString } from "node:querystring";
import express, { type NextFunction, type Request, type Response } from "express";
import { type DomainError, errors } from "../lib/errors.js";
import { describeProblem, findJsonProblem, textProblem } from "../lib/json-safety.js";

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
 * MAX_JSON_DEPTH is a 400 naming the field, before any service sees it (issue 18, findings 1 and 3).
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
 * (issue 18, findings 1 and 2).
 */
export function rejectUnsafeUrl(req: Request, _res: Response, next: NextFunction): void {
  next(unsafeUrlError(req));
}

function unsafeUrlError(req: Request): DomainError | undefined {
  let path: string;
  try {
    path = decodeURIComponent(req.path);
  } catch {
    return errors.invalid("The path has a malformed percent-escape (%XX with two hex digits of UTF-8).", "path");
  }
  const problem = textProblem(path);
  if (problem) return errors.invalid(describeProblem(problem, "path"), "path");
  return unsafeQueryValue(req.query);
}

function unsafeQueryValue(query: unknown): DomainError | undefined {
  const found = findJsonProblem(query);
  return found ? errors.invalid(describeProblem(found.problem, found.field), found.field || "query") : undefined;
}

/**
 * rejectUnsafeUrl's query rule for a raw query string, parsed as Express parses it (node's
 * querystring, Express's "simple" parser): for the inference fast path, which Express never sees.
 */
export function unsafeQueryError(search: string): DomainError | undefined {
  return search === "" ? undefined : unsafeQueryValue(parseQueryString(search));
}

/** Sets a fresh `X-Svc-Request-Id` on the response and returns it (for logs). */
export function setRequestId(res: ServerResponse): string {
  const id = randomUUID();
  res.setHeader("X-Svc-Request-Id", id);
  return id;
}

/** Gives every request an id (`X-Svc-Request-Id`), kept in `res.locals.requestId` for logs. */
export function requestId(_req: Request, res: Response, next: NextFunction): void {
  res.locals.requestId = setRequestId(res);
  next();
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

  middleware = (_req: Request, res: Response, next: NextFunction): void => {
    this.track(res);
    next();
  };

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
