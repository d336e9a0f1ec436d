import type { IncomingMessage, ServerResponse } from "node:http";
import type { NextFunction, Request, Response } from "express";
import type { Metrics } from "../lib/metrics.js";

/**
 * Every HTTP answer counted for operators: the route pattern Express matched (never the raw path,
 * so ids do not explode the label set; `unmatched` for 404s), the method, the status and the time.
 */
export function httpMetrics(metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const start = performance.now();
    res.once("close", () => {
      const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : "unmatched";
      metrics.httpRequest(route, req.method, res.statusCode, (performance.now() - start) / 1000);
    });
    next();
  };
}

/** The same for the two inference POSTs served without Express. */
export function recordFastPath(metrics: Metrics, path: string, req: IncomingMessage, res: ServerResponse): void {
  const start = performance.now();
  res.once("close", () =>
    metrics.httpRequest(path, req.method ?? "POST", res.statusCode, (performance.now() - start) / 1000),
  );
}
