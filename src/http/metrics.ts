import type { IncomingMessage, ServerResponse } from "node:http";
import type { Request } from "express";
import type { Metrics } from "../lib/metrics.js";

/**
 * Every HTTP answer counted for operators: the route pattern (never the raw path, so ids do not
 * explode the label set; `unmatched` for 404s), the method, the status and the time. An entry layer
 * (layers.ts): `route` is the label when it is known before routing (the fast path's two POSTs);
 * otherwise the route Express matched, read when the response closes.
 */
export function timeRequest(
  metrics: Metrics,
  req: IncomingMessage,
  res: ServerResponse,
  route: string | undefined,
): void {
  const start = performance.now();
  res.once("close", () =>
    metrics.httpRequest(
      route ?? expressRoute(req),
      req.method ?? "",
      res.statusCode,
      (performance.now() - start) / 1000,
    ),
  );
}

/** The route pattern Express matched (`unmatched` when none did), read once the response is done. */
export function expressRoute(req: IncomingMessage): string {
  const { route, baseUrl } = req as Partial<Request>;
  return route ? `${baseUrl ?? ""}${String(route.path)}` : "unmatched";
}
