import { randomUUID } from "node:crypto";
import type { NextFunction, Request, Response } from "express";

/** Gives every request an id (`X-Svc-Request-Id`), kept in `res.locals.requestId` for logs. */
export function requestId(_req: Request, res: Response, next: NextFunction): void {
  const id = randomUUID();
  res.locals.requestId = id;
  res.setHeader("X-Svc-Request-Id", id);
  next();
}

/** Tracks in-flight requests so shutdown can wait for them. */
export class InFlight {
  private count = 0;
  private waiters: (() => void)[] = [];

  middleware = (_req: Request, res: Response, next: NextFunction): void => {
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
