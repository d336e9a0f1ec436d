import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { type Request, type Response, Router } from "express";
import type { Viewer } from "../domain/identity/viewer.js";
import { authenticateBearer } from "../http/auth.js";
import { DomainError, isDomainError } from "../lib/errors.js";
import { logger } from "../lib/logger.js";
import type { Runtime } from "../runtime.js";
import { createMcpServer } from "./server.js";

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

/**
 * The hosted MCP connector (SPEC "What the service does" 14; issue 17 item 4): Streamable HTTP with
 * the official SDK, stateless: every POST gets its own server and transport (no session id, JSON
 * answers, nothing kept between requests), so any API process can serve any request. GET (the
 * server-to-client SSE stream) and DELETE (session end) have nothing to serve: 405. Bodies are read
 * by the app's one JSON parser (its size limit and error answers).
 */
export function mcpRoutes(rt: Runtime): Router {
  const r = Router();
  const path = mcpPath(rt.config.urls.mcp);

  r.post(path, async (req, res) => {
    const viewer = await authenticate(rt, req, res);
    const requestId = res.locals.requestId as string | undefined;
    const ac = new AbortController();
    const server = createMcpServer({ rt, viewer, signal: ac.signal, requestId });
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
