import { Router } from "express";
import type { Runtime } from "../runtime.js";

/** The hosted MCP connector at `{mcp_url}/mcp` (Streamable HTTP, Bearer API key; issue 17). */
export function mcpRoutes(_rt: Runtime): Router {
  return Router();
}
