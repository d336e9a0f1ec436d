import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { startWorkers, type Workers } from "../workers/index.js";
import { createChainGateway } from "./adapters/chain/usdc-gateway.js";
import { ensureDatabase, runMigrations, StartupError } from "./adapters/db.js";
import { createHttpApp, createProbeApp, type HttpApp } from "./app.js";
import { type Config, loadConfig, processEnv, type Role } from "./config.js";
import type { WebDev } from "./http/routes/web.js";
import { logger, setLogLevel } from "./lib/logger.js";
import { displayUrl } from "./lib/url-display.js";
import { createRuntime, type Runtime } from "./runtime.js";

/**
 * The service's start-up and shutdown, shared by its two entries:
 *   src/main.ts  production (`npm start`, `start:api`, `start:worker`; compiled to dist/server/main.js)
 *   src/dev.ts   local mode (`npm run dev`, from source): the same boot with the local world
 * config → (local world) → database → clients → services → API and/or workers.
 */

/**
 * What the dev entry brings (src/local/world.ts and src/local/web-dev.ts): the outside world's
 * stand-ins. Described here by shape so that production code never imports the local world.
 */
export interface DevWorld {
  /** environment overrides that point the service at the stand-ins */
  env: Record<string, string>;
  seed(rt: Runtime): Promise<void>;
  banner(baseUrl: string): string;
  stop(): Promise<void>;
}

export interface BootOptions {
  role: Role;
  /** local mode: starts the stand-ins (given the environment) before the service */
  dev?: { startWorld(env: Record<string, string | undefined>): Promise<DevWorld>; web: WebDev };
}

export function fail(line: string): never {
  process.stderr.write(`${line}\n`);
  process.exit(1);
}

/** `--role=api|worker|all` (default all); anything else stops with one line. */
export function parseRole(argv: string[]): Role {
  let role: Role = "all";
  for (const a of argv) {
    if (a.startsWith("--role=")) {
      const r = a.slice("--role=".length);
      if (r !== "api" && r !== "worker" && r !== "all") fail(`--role: expected api, worker or all, got "${r}"`);
      role = r as Role;
    }
  }
  return role;
}

/**
 * A worker-only process serves /healthz, /readyz and /metrics on PORT (the image's HEALTHCHECK and
 * Prometheus reach it). Optional: when PORT is taken (an API process beside it on one machine), the
 * worker runs without it and says so.
 */
async function listenProbes(rt: Runtime, config: Config): Promise<Server | undefined> {
  const server = createProbeApp(rt);
  return new Promise((resolve) => {
    server.once("listening", () => resolve(server));
    server.once("error", (e: NodeJS.ErrnoException) => {
      logger.warn({ port: config.http.port, code: e.code }, "worker probes and /metrics not served: PORT is taken");
      resolve(undefined);
    });
    server.listen(config.http.port, config.http.host);
  });
}

/** Starts the listener; resolves with the bound address. */
function listen(http: HttpApp, config: Config): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = http.server.listen(config.http.port, config.http.host);
    server.once("listening", () => resolve(server));
    server.once("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "EADDRINUSE") reject(new StartupError(`PORT: ${config.http.port} is already in use`));
      else if (e.code === "EADDRNOTAVAIL" || e.code === "ENOTFOUND")
        reject(new StartupError(`HOST: cannot bind ${config.http.host} (${e.code})`));
      else reject(e);
    });
  });
}

/**
 * CONTRACT: CHAIN_ID must equal the RPC's chain id. A mismatch stops start-up; an RPC that does
 * not answer is only a warning (inference must not depend on the chain being up).
 */
async function checkChainId(config: Config): Promise<void> {
  const gateway = createChainGateway({
    rpcUrl: config.chain.rpcUrl,
    chainId: config.chain.id,
    usdcAddress: config.chain.usdcAddress,
  });
  const timeout = new Promise<undefined>((r) => setTimeout(() => r(undefined), 5000).unref());
  const result = await Promise.race([gateway.getChainId(), timeout]);
  if (!result?.ok) {
    logger.warn(
      { rpc: displayUrl(config.chain.rpcUrl), failure: result?.failure },
      "CHAIN_RPC_URL did not answer; continuing",
    );
    return;
  }
  if (result.value !== config.chain.id) {
    throw new StartupError(
      // the RPC's URL may carry its provider's key (in the path or the query): scheme, host and port only
      `CHAIN_ID: the RPC at ${displayUrl(config.chain.rpcUrl)} reports chain ${result.value}, expected ${config.chain.id}`,
    );
  }
}

export async function boot(opts: BootOptions): Promise<void> {
  const args = { local: opts.dev !== undefined, role: opts.role };
  const env = { ...processEnv() };
  const first = loadConfig(env, { mode: args.local ? "local" : "production", role: args.role });
  if (!first.ok) {
    for (const e of first.errors) process.stderr.write(`${e}\n`);
    process.exit(1);
  }
  setLogLevel(first.config.logLevel);

  let world: DevWorld | undefined;
  let config = first.config;
  if (opts.dev) {
    // The local world supplies the outside services; explicit environment values still win
    // for the service's own settings (PORT, DATABASE_URL, REDIS_URL…).
    try {
      world = await opts.dev.startWorld(env);
    } catch (e) {
      // a stand-in that cannot start (no Redis to be had, a DATABASE_URL that is not local) says so in one line
      if (e instanceof StartupError || (e instanceof Error && /^[A-Z_]+: /.test(e.message))) fail(e.message);
      throw e;
    }
    const second = loadConfig({ ...env, ...world.env }, { mode: "local", role: args.role });
    if (!second.ok) {
      await world.stop();
      for (const e of second.errors) process.stderr.write(`${e}\n`);
      process.exit(1);
    }
    config = second.config;
  }

  let runtime: Runtime | undefined;
  let server: Server | undefined;
  let http: HttpApp | undefined;
  let workers: Workers | undefined;
  let stopping = false;
  let startup: Promise<void> = Promise.resolve();

  const shutdown = async (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, "shutting down");
    // connections closing under work still in flight may reject a promise nobody awaits any more: at
    // this point that is noise, not a failure of the stop (logged, not an exit 1)
    process.on("unhandledRejection", (err) => logger.warn({ err }, "unhandled rejection while shutting down"));
    const hard = setTimeout(() => {
      logger.error("shutdown took too long; exiting");
      process.exit(1);
    }, 25_000);
    hard.unref();
    await startup;
    try {
      if (server) {
        const closed = new Promise<void>((r) => server?.close(() => r()));
        server.closeIdleConnections();
        await http?.inFlight.drained(15_000);
        server.closeAllConnections();
        await closed;
      }
      await workers?.close();
      await runtime?.close();
      await world?.stop();
    } catch (e) {
      logger.error({ err: e }, "error during shutdown");
    }
    clearTimeout(hard);
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));

  // a signal during start-up waits for it to finish (or fail), then stops what started: the probes
  // answer before the workers are up, and a SIGTERM then must not race their start
  let started: () => void = () => undefined;
  startup = new Promise<void>((r) => {
    started = r;
  });
  try {
    await ensureDatabase(config.database.url);
    await runMigrations(config.database.url);
    await checkChainId(config);
    runtime = await createRuntime(config);
    if (world) await world.seed(runtime);
    if (config.role !== "worker") {
      http = createHttpApp(runtime, { web: { dev: opts.dev?.web } });
      server = await listen(http, config);
    }
    if (config.role !== "api") workers = await startWorkers(runtime);
    if (config.role === "worker") server = await listenProbes(runtime, config);
    started();
  } catch (e) {
    started();
    if (stopping) return; // the shutdown in progress exits
    await workers?.close().catch(() => undefined);
    await runtime?.close().catch(() => undefined);
    await world?.stop().catch(() => undefined);
    if (e instanceof StartupError || (e instanceof Error && /^[A-Z_]+: /.test(e.message))) fail(e.message);
    throw e;
  }

  const addr = server?.address() as AddressInfo | null | undefined;
  const base = config.urls.base;
  logger.info(
    { mode: config.mode, role: config.role, port: addr?.port, base },
    `svc ${config.mode} ${config.role} ready${addr ? ` on ${base}` : ""}`,
  );
  if (world) process.stdout.write(world.banner(base));
}
