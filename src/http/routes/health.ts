import { Router } from "express";
import type { Runtime } from "../../runtime.js";

/**
 * `/healthz`: liveness, 200 text/plain (SPEC "Public"). `/readyz`: Postgres and Redis answer.
 * `/metrics`: this process's Prometheus metrics (aggregates only: no account, key or supplier).
 */
export function healthRoutes(rt: Runtime): Router {
  const r = Router();
  r.get("/healthz", (_req, res) => {
    res.type("text/plain").send("ok\n");
  });
  r.get("/readyz", async (_req, res) => {
    const checks = await Promise.allSettled([rt.db.$queryRaw`SELECT 1`, rt.redis.command.ping()]);
    const ok = checks.every((c) => c.status === "fulfilled");
    // every 503 carries Retry-After (docs/decisions.md "Retry-After")
    if (!ok) res.setHeader("Retry-After", "1");
    res
      .status(ok ? 200 : 503)
      .type("text/plain")
      .send(ok ? "ready\n" : "not ready\n");
  });
  r.get("/metrics", async (_req, res) => {
    const m = await rt.metrics.text();
    res.type(m.contentType).send(m.body);
  });
  return r;
}
