import { Router } from "express";
import type { Runtime } from "../../runtime.js";

/** SPEC "Public": the agent-facing documents and the documentation site at `{docs_url}` (issue 17). */
export function documentRoutes(_rt: Runtime): Router {
  return Router();
}
