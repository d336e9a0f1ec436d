import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import express, { type NextFunction, type Request, type Response } from "express";

/** Body limit for JSON requests (chat bodies may carry images as data URLs). */
export const JSON_BODY_LIMIT = "20mb";

/**
 * The one JSON body parser: Express's stack and the inference fast path (routes/inference.ts)
 * share it, so limits, charsets, content codings and error types are the same on both. It only needs
 * node's request and response; it leaves `req.body` undefined for a non-JSON content type.
 */
export const jsonBody = express.json({ limit: JSON_BODY_LIMIT, strict: false });

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
