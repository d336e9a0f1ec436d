import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { type Request, type Response, Router } from "express";
import type { Viewer } from "../domain/identity/viewer.js";
import { authenticateBearer, readCookie, SESSION_COOKIE } from "../http/auth.js";
import { readJsonBody } from "../http/middleware.js";
import { DomainError, isDomainError } from "../lib/errors.js";
import { logger } from "../lib/logger.js";
import type { Runtime } from "../runtime.js";
import { createMcpServer } from "./server.js";
import { recordIds } from "./tool-def.js";

/** `{mcp_url}/mcp`: MCP_URL's path (empty by default) plus `/mcp`; the host is the deployment's routing. */
export function mcpPath(mcpUrl: string): string {
  return `${new URL(mcpUrl).pathname.replace(/\/+$/, "")}/mcp`;
}

/**
 * The Bearer rule of the REST agent routes, answered the HTTP way before any MCP processing: a
 * missing, unknown or revoked key, or a session cookie, is 401 with the JSON error body and a
 * `WWW-Authenticate: Bearer` challenge (RFC 6750; `invalid_token` when a key was sent).
 */
async function authenticate(rt: Runtime, req: Request, res: Response): Promise<Viewer> {
  try {
    return await authenticateBearer(rt.services, req);
  } catch (err) {
    if (isDomainError(err) && err.code === "authentication_failed") {
      res.setHeader(
        "WWW-Authenticate",
        req.headers.authorization ? 'Bearer realm="mcp", error="invalid_token"' : 'Bearer realm="mcp"',
      );
    }
    throw err;
  }
}

/** No Authorization header and no session cookie: a caller who pays per call, if at all. */
function anonymous(req: Request): boolean {
  return req.headers.authorization === undefined && readCookie(req, SESSION_COOKIE) === undefined;
}

/**
 * What the Streamable HTTP transport refuses before any JSON-RPC processing, answered the HTTP way
 * with the service's error body, so a client reads one error shape (/openapi.json documents /mcp's 400, 406 and 415
 * so): the SDK's own answers carry a JSON-RPC error (`"code": -32700`, which the MCP spec allows and
 * does not require) and took an empty batch `[]` for a valid one (202). Its rules, in its order: the
 * Accept header names both JSON and SSE, the body is JSON (the app's parser read it), and the body is
 * a JSON-RPC message or a non-empty batch of them.
 */
function transportRefusal(req: Request): DomainError | undefined {
  const accept = req.headers.accept ?? "";
  if (!accept.includes("application/json") || !accept.includes("text/event-stream")) {
    return new DomainError(
      "not_acceptable",
      "POST /mcp answers Streamable HTTP: send Accept: application/json, text/event-stream.",
    );
  }
  if (req.body === undefined) {
    return new DomainError("unsupported_media_type", "POST /mcp takes a JSON-RPC message as application/json.");
  }
  const messages: unknown[] = Array.isArray(req.body) ? req.body : [req.body];
  if (messages.length === 0 || !messages.every((m) => JSONRPCMessageSchema.safeParse(m).success)) {
    return new DomainError(
      "invalid_request",
      'The body is not a JSON-RPC 2.0 message: jsonrpc "2.0", a string method, an id that is a string or a number.',
      { field: "body" },
    );
  }
  return undefined;
}

/**
 * The hosted MCP connector (SPEC "What the service does" 14): Streamable HTTP with
 * the official SDK, stateless: every POST gets its own server and transport (no session id, JSON
 * answers, nothing kept between requests), so any API process can serve any request. GET (the
 * server-to-client SSE stream) and DELETE (session end) have nothing to serve: 405. Bodies are read
 * by the app's one JSON parser (its size limit and error answers), after a sent Bearer key checks
 * out; with no credential at all the request is served paid per call (docs/decisions.md "Paid MCP
 * tools").
 */
export function mcpRoutes(rt: Runtime): Router {
  const r = Router();
  const path = mcpPath(rt.config.urls.mcp);

  r.post(path, async (req, res) => {
    // no credential at all: the paid tools are paid per call (x402 MCP binding), the rest answer
    // authentication_failed as tool errors; a credential that is sent must check out (401)
    const viewer = anonymous(req) ? null : await authenticate(rt, req, res);
    // the body is read only once a sent credential checks out (bodyUnlessCredentialed leaves it unread)
    await readJsonBody(req, res);
    const refusal = transportRefusal(req);
    if (refusal) throw refusal;
    const requestId = res.locals.requestId as string | undefined;
    const ac = new AbortController();
    const server = createMcpServer({ rt, viewer, signal: ac.signal, requestId, takeRequestId: recordIds(requestId) });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => {
      // the caller left before the answer: a paid call in flight ends without a charge
      if (!res.writableFinished) ac.abort();
      transport.close().catch((err: unknown) => logger.warn({ err, requestId }, "mcp transport close failed"));
      server.close().catch((err: unknown) => logger.warn({ err, requestId }, "mcp server close failed"));
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });

  r.all(path, (req, res) => {
    res.setHeader("Allow", "POST");
    throw new DomainError(
      "method_not_allowed",
      `${req.method} is not served here: this MCP connector is stateless (no SSE stream, no session); POST JSON-RPC.`,
    );
  });
  return r;
}
