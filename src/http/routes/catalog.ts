import { Router } from "express";
import type { Runtime } from "../../runtime.js";

/** Routes of issue 5 (catalog). */
export function catalogRoutes(_rt: Runtime): Router {
  const r = Router();
  return r;
}
