import type { IncomingMessage, ServerResponse } from "node:http";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import { markWriteOnEnd, noteWriter, type ReadRouting } from "../adapters/read-replica.js";
import type { Viewer } from "../domain/identity/viewer.js";
import type { DomainError } from "../lib/errors.js";
import { logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import { tracingOn } from "../lib/tracing.js";
import { writeError } from "./error-response.js";
import { timeRequest } from "./metrics.js";
import { type InFlight, REQUEST_ID_HEADER, readJsonBody, setRequestId, unsafeUrlError } from "./middleware.js";
import { traceRequest } from "./tracing.js";

/**
 * The HTTP layers, defined once so that no route assembles its own (docs/decisions.md "The two hot POSTs skip
 * Express"). Each is a plain function over node's request and response; Express (src/app.ts, through the
 * adapters below) and the node:http fast path of the two hot inference POSTs (routes/inference.ts)
 * run these same functions in this same order, so the two cannot drift:
 *
 *   1. entry, every request (`EntryLayers.enter`): in-flight count → timing → request id →
 *      unsafe URL refusal (`unsafeUrlError`, middleware.ts); then, with tracing on, the rest runs
 *      in the request's server span (`traceRequest`, tracing.ts; off, not even a closure is made);
 *   2. a credentialed route (`credentialed`): the credential → the body (the one JSON parser: limits,
 *      charset, coding, content type, text and depth) → the route's handler;
 *   3. the error ending (`endWithError`, error-response.ts's `writeError`): status, code, shape.
 *
 * Synchronous where they can be, and allocation-free beyond what each layer needs: the fast path
 * exists for speed (docs/performance.md), so nothing here adds a closure or an async hop per request.
 */

/** The layers every request passes before routing, in order. */
export class EntryLayers {
  constructor(
    private readonly metrics: Metrics,
    readonly inFlight: InFlight,
    /** with a read replica, a write request's end waits for its caller's write mark (adapters/read-replica.ts) */
    private readonly reads?: ReadRouting,
  ) {}

  /**
   * Runs the entry layers on one request; returns the refusal to end it with, or undefined to go on.
   * `route`: the metrics label when the route is known before routing (the fast path); without it,
   * the route Express matched, read when the response closes.
   */
  enter(req: IncomingMessage, res: ServerResponse, route?: string): DomainError | undefined {
    this.inFlight.track(res);
    timeRequest(this.metrics, req, res, route);
    setRequestId(res);
    if (this.reads?.replicated && req.method !== "GET" && req.method !== "HEAD" && req.method !== "OPTIONS") {
      markWriteOnEnd(res, this.reads);
    }
    return unsafeUrlError(req);
  }

  /**
   * The entry layers as Express's first middleware. Express's handlers (yoga, MCP, the error
   * middleware) read the request id from `res.locals`.
   */
  readonly express: RequestHandler = (req: Request, res: Response, next: NextFunction): void => {
    const refusal = this.enter(req, res);
    res.locals.requestId = res.getHeader(REQUEST_ID_HEADER);
    if (tracingOn()) traceRequest(req, res, undefined, () => next(refusal));
    else next(refusal);
  };
}

/** How a route family checks its credential (auth.ts: the Bearer key, the session cookie). */
export type Authenticate = (req: IncomingMessage) => Promise<Viewer>;

/** A credentialed route's own work, once the credential checked out and the body is in `req.body`. */
export type CredentialedHandler = (viewer: Viewer, req: IncomingMessage, res: ServerResponse) => unknown;

/**
 * Credential before body, so that a body from nobody costs nothing: a body is read only once its sender's credential
 * checks out, so a 20 MB body from nobody costs nothing; then the shared JSON parser; then `handler`.
 * Rejects with the first refusal, which the caller ends with `endWithError` (Express: its error
 * middleware). The fast path's hot POSTs and their Express routes are this one function.
 */
export async function credentialed(
  authenticate: Authenticate,
  handler: CredentialedHandler,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const viewer = await authenticate(req);
  // a credentialed request that is not a read is the caller's write (read-your-writes, read-replica.ts)
  if (req.method !== "GET" && req.method !== "HEAD") noteWriter(res, viewer.accountId);
  await readJsonBody(req, res);
  await handler(viewer, req, res);
}

/** `credentialed` as Express middleware: the viewer in `res.locals.viewer`, then the next handler. */
export function credentialLayer(authenticate: Authenticate): RequestHandler {
  return (req: Request, res: Response, next: NextFunction): void => {
    credentialed(authenticate, (viewer) => setViewer(res, viewer, next), req, res).catch(next);
  };
}

function setViewer(res: Response, viewer: Viewer, next: NextFunction): void {
  res.locals.viewer = viewer;
  next();
}

/**
 * The error ending outside Express (Express's is its error middleware, the same `writeError`). Our
 * own ending cannot throw; should it, log and drop the connection rather than take the process down
 * with an unhandled rejection.
 */
export function endWithError(res: ServerResponse, err: unknown): void {
  try {
    writeError(res, err, requestIdOf(res));
  } catch (failure) {
    logger.error({ err: failure }, "error ending failed");
    res.destroy();
  }
}

/** The request id the entry layers gave the response. */
export function requestIdOf(res: ServerResponse): string | undefined {
  const id = res.getHeader(REQUEST_ID_HEADER);
  return typeof id === "string" ? id : undefined;
}
