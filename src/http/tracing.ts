import type { IncomingMessage, ServerResponse } from "node:http";
import { startSpan } from "../lib/tracing.js";
import { expressRoute } from "./metrics.js";

/**
 * The HTTP server span of a request (docs/operations.md "Traces"): one per request, the root of its
 * trace, or the child of the caller's span when it sent a W3C `traceparent`. Named by route pattern
 * (`POST /v1/chat/completions`; `route` when known before routing, the fast path's two POSTs; else
 * the route Express matched, read when the response closes; the method alone when none matched),
 * with the HTTP semantic conventions' attributes and status (ERROR on 5xx only: a 4xx is the
 * caller's), the request id and, when the answer names them, the support reference and error code.
 * No header, query string or body is recorded. The probes and the scrape (`GET /healthz`, `/readyz`,
 * `/metrics`) are not traced.
 *
 * `next` runs with the span active; the request's and response's listeners (its body, its end) are
 * bound to it, so everything the request does below is in its trace. Only called when tracing is on
 * (the entry layers check `tracingOn()` first: off, they call `next` directly).
 */
export function traceRequest(
  req: IncomingMessage,
  res: ServerResponse,
  route: string | undefined,
  next: () => void,
): void {
  const method = req.method ?? "GET";
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  // probes and scrapes: a trace every few seconds per process that says nothing
  if (method === "GET" && UNTRACED.has(path)) {
    next();
    return;
  }
  const span = startSpan(
    route ? `${method} ${route}` : method,
    {
      "http.request.method": method,
      "http.route": route,
      "url.path": path,
      "url.scheme": "http",
      "network.protocol.version": req.httpVersion,
    },
    { kind: "server", from: req.headers },
  );
  span.bind(req);
  span.bind(res);
  res.once("close", () => {
    const matched = route ?? expressRoute(req);
    if (!route && matched !== "unmatched") span.rename(`${method} ${matched}`);
    span.set({
      "http.route": matched === "unmatched" ? undefined : matched,
      "http.response.status_code": res.statusCode,
      "svc.request_id": headerOf(res, "x-svc-request-id"),
      "svc.support_reference": headerOf(res, "x-svc-support-reference"),
      "svc.error_code": headerOf(res, "x-svc-error-code"),
      "svc.client_closed": res.writableFinished ? undefined : true,
    });
    if (res.statusCode >= 500) span.fail(String(res.statusCode));
    span.end();
  });
  span.run(next);
}

/** Paths whose GETs get no span: the probes and the Prometheus scrape. */
const UNTRACED = new Set(["/healthz", "/readyz", "/metrics"]);

function headerOf(res: ServerResponse, name: string): string | undefined {
  const v = res.getHeader(name);
  return typeof v === "string" ? v : undefined;
}
