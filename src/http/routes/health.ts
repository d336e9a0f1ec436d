import { Router } from "express";
import type { Runtime } from "../../runtime.js";

/** `/healthz`: liveness, 200 text/plain (SPEC "Public"). `/readyz`: Postgres and Redis answer. */
export function healthRoutes(rt: Runtime): Router {
  const r = Router();
  r.get("/healthz", (_req, res) => {
    res.type("text/plain").send("ok\n");
  });
  r.get("/readyz", async (_req, res) => {
    const checks = await Promise.allSettled([rt.db.$queryRaw`SELECT 1`, rt.redis.command.ping()]);
    const ok = checks.every((c) => c.status === "fulfilled");
    res
      .status(ok ? 200 : 503)
      .type("text/plain")
      .send(ok ? "ready\n" : "not ready\n");
  });
  return r;
}
