import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import { createServer } from "node:net";
import type { ResolveHost } from "../src/adapters/webhooks/resolve-host.js";
import { createHttpApp, type HttpApp } from "../src/app.js";
import { type Config, loadConfig } from "../src/config.js";
import type { Clock } from "../src/lib/clock.js";
import { setLogLevel } from "../src/lib/logger.js";
import { createLocalIdp, type LocalIdp } from "../src/local/idp/index.js";
import { localWebDev } from "../src/local/web-dev.js";
import { createRuntime, type Runtime } from "../src/runtime.js";
import { startWorkers, type Workers } from "../workers/index.js";
import { createTestDatabase, REDIS_URL } from "./db.js";

setLogLevel(process.env.TEST_LOG_LEVEL ?? "silent");

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** A config for tests: local mode, its own database and Redis prefix, a free port. */
export function testConfig(opts: {
  databaseUrl: string;
  prefix: string;
  port: number;
  env?: Record<string, string>;
}): Config {
  const r = loadConfig(
    {
      DATABASE_URL: opts.databaseUrl,
      REDIS_URL,
      PORT: String(opts.port),
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
      // an ending gives an idle slice back at once, so a test may read "nothing reserved" right after a
      // request; lingering slices (the default, 1 s) have their own tests (escrow-linger.test.ts)
      ESCROW_LINGER_MS: "0",
      // an ending's clear is folded before the answer, so a test may read a balance column right after
      // a request; the live figures before a fold have their own tests (live-figures.test.ts), and the
      // money simulation folds late
      ESCROW_FOLD_MS: "0",
      ...opts.env,
    },
    { mode: "local", redisPrefix: opts.prefix },
  );
  if (!r.ok) throw new Error(r.errors.join("\n"));
  return r.config;
}

export interface TestApp {
  rt: Runtime;
  http: HttpApp;
  server: Server;
  baseUrl: string;
  workers?: Workers;
  /** the local identity provider this app trusts (IDP_APP_ID / IDP_VERIFICATION_KEY) */
  idp: LocalIdp;
  /** the environment it was started with (what an app started beside it inherits: the world's addresses) */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** Starts the real app (HTTP + optional workers) against a database and Redis prefix. */
export async function startTestApp(opts: {
  databaseUrl: string;
  prefix: string;
  env?: Record<string, string>;
  workers?: boolean;
  idp?: LocalIdp;
  clock?: Clock;
  /** every SQL statement Prisma sends (N+1 guards) */
  onQuery?: (sql: string) => void;
  /** how webhook host names resolve (default node:dns) */
  resolveHost?: ResolveHost;
}): Promise<TestApp> {
  const port = await freePort();
  const idp = opts.idp ?? createLocalIdp({ appId: "svc-test-app" });
  const config = testConfig({
    databaseUrl: opts.databaseUrl,
    prefix: opts.prefix,
    port,
    env: { IDP_APP_ID: idp.appId, IDP_ISSUER: idp.issuer, IDP_VERIFICATION_KEY: idp.publicKeyPem, ...opts.env },
  });
  const rt = await createRuntime(config, { clock: opts.clock, onQuery: opts.onQuery, resolveHost: opts.resolveHost });
  // a local-mode app, as `npm run dev` serves it: the web app's dev routes (src/local/web-dev.ts)
  const http = createHttpApp(rt, { web: { dev: localWebDev } });
  const server = await new Promise<Server>((resolve) => {
    const s = http.server.listen(port, "127.0.0.1", () => resolve(s));
  });
  const workers = opts.workers ? await startWorkers(rt, { schedules: false }) : undefined;
  return {
    rt,
    http,
    server,
    baseUrl: `http://127.0.0.1:${port}`,
    workers,
    idp,
    env: opts.env ?? {},
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await workers?.close();
      await rt.close();
    },
  };
}

/** One isolated world per test file: its own database (cloned from the template) and prefix. */
export async function isolatedWorld(): Promise<{ databaseUrl: string; prefix: string; drop: () => Promise<void> }> {
  const db = await createTestDatabase();
  return { databaseUrl: db.url, prefix: `test-${randomUUID().slice(0, 8)}`, drop: db.drop };
}

/** A clock tests can move forward: it runs with real time from wherever it was moved or set. */
export function movableClock(): Clock & { advance(ms: number): void; set(at: Date): void } {
  let offset = 0;
  return {
    now: () => new Date(Date.now() + offset),
    advance(ms: number) {
      offset += ms;
    },
    /** to `at` (e.g. a few minutes before a UTC midnight), running on from there */
    set(at: Date) {
      offset = at.getTime() - Date.now();
    },
  };
}
