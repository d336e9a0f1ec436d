import type { ResolveHost } from "../src/adapters/webhooks/resolve-host.js";
import type { Clock } from "../src/lib/clock.js";
import {
  startUpstreamSimulator,
  type UpstreamSimulator,
  type UpstreamSimulatorOptions,
} from "../src/local/upstream-sim/index.js";
import { isolatedWorld, startTestApp, type TestApp } from "./harness.js";
import { CATALOG_KEY } from "./market.js";

/**
 * The one set-up of the integration tests: an isolated database (cloned from the template) and Redis
 * prefix, optionally the upstream simulator, and the app (plus an optional peer) pointed at them.
 * `appTest` (app-test.ts) serves it as vitest fixtures (and `fileWorld`, a view of the same fixture
 * for module-level helpers), and `withApp` for the length of a callback.
 */
export interface WorldOptions {
  /**
   * Start the upstream simulator with these options (`{}` for its defaults; the catalog key is added
   * to its keys) and give the app `UPSTREAM_BASE_URL`; no simulator when absent or `false`.
   */
  sim?: UpstreamSimulatorOptions | false;
  /**
   * With a simulator, the catalog key: added to the simulator's keys (zero balance, first) and given
   * to the app as `CATALOG_SYNC_KEY`. Default `CATALOG_KEY` (as `simEnv()`). `false` for none: the
   * catalog sync then reads with a registered supplier key.
   */
  catalogSyncKey?: string | false;
  /** more app environment, over the simulator's */
  env?: Record<string, string>;
  /** start the BullMQ workers in `app` (never in `peer`) */
  workers?: boolean;
  /** the clock of `app` and `peer` */
  clock?: Clock;
  /** every SQL statement `app`'s Prisma sends (N+1 guards) */
  onQuery?: (sql: string) => void;
  /** run `app.rt.services.catalog.sync()` once the app is up */
  syncCatalog?: boolean;
  /** start a second app on the same database, prefix, env and clock: another process of one deployment */
  peer?: boolean;
  /** how webhook host names resolve in `app` and `peer` (default node:dns; `hostsResolver` maps names) */
  resolveHost?: ResolveHost;
}

/** An isolated database and Redis prefix. */
export interface Database {
  databaseUrl: string;
  prefix: string;
}

export interface World extends Database {
  app: TestApp;
  /** only with `peer: true`, or once `startPeer()` ran */
  peer?: TestApp;
  /** only with `sim` */
  sim?: UpstreamSimulator;
  /** a second app on the same database, prefix, env and clock (closed by `close()`) */
  startPeer(): Promise<TestApp>;
  /** closes the peer, the app and the simulator, then drops the database if the world created it */
  close(): Promise<void>;
}

/**
 * Starts a world on `database`, or on a fresh isolated one (dropped by `close()`). What started is
 * closed again if a later step fails.
 */
export async function startWorld(opts: WorldOptions = {}, database?: Database): Promise<World> {
  let sim: UpstreamSimulator | undefined;
  let drop: (() => Promise<void>) | undefined;
  const apps: TestApp[] = [];
  // every step runs even if an earlier one fails (a test may have broken an app): the first error is thrown
  const close = async () => {
    const errors: unknown[] = [];
    const step = (f: () => Promise<void>) => f().catch((e: unknown) => void errors.push(e));
    for (const a of apps.reverse()) await step(() => a.close());
    const started = sim;
    if (started) await step(() => started.close());
    if (drop) await step(drop);
    if (errors.length > 0) throw errors[0];
  };
  try {
    let simEnv: Record<string, string> = {};
    if (opts.sim !== undefined && opts.sim !== false) {
      const catalogKey = opts.catalogSyncKey ?? CATALOG_KEY;
      sim = await startUpstreamSimulator(
        catalogKey === false
          ? opts.sim
          : { ...opts.sim, keys: [{ key: catalogKey, diemMicro: 0n }, ...(opts.sim.keys ?? [])] },
      );
      simEnv =
        catalogKey === false
          ? { UPSTREAM_BASE_URL: sim.baseUrl }
          : { UPSTREAM_BASE_URL: sim.baseUrl, CATALOG_SYNC_KEY: catalogKey };
    }
    let db = database;
    if (!db) {
      const w = await isolatedWorld();
      drop = w.drop;
      db = { databaseUrl: w.databaseUrl, prefix: w.prefix };
    }
    const base = {
      databaseUrl: db.databaseUrl,
      prefix: db.prefix,
      env: { ...simEnv, ...opts.env },
      clock: opts.clock,
      resolveHost: opts.resolveHost,
    };
    const app = await startTestApp({ ...base, workers: opts.workers, onQuery: opts.onQuery });
    apps.push(app);
    if (opts.syncCatalog) await app.rt.services.catalog.sync();
    const world: World = {
      ...db,
      app,
      sim,
      async startPeer() {
        const peer = await startTestApp(base);
        apps.push(peer);
        world.peer ??= peer;
        return peer;
      },
      close,
    };
    if (opts.peer) await world.startPeer();
    return world;
  } catch (e) {
    await close().catch(() => undefined);
    throw e;
  }
}

export interface WithAppOptions extends WorldOptions {
  /**
   * Start the app on this app's database and Redis prefix (`prefix` overrides the prefix), with
   * only `env`, `workers`, `clock`, `onQuery` and `resolveHost` of these options; default: a world
   * of its own.
   */
  beside?: TestApp;
  prefix?: string;
  /** the test broke the app on purpose (closed its Redis, say): an error while closing it is expected */
  closeMayFail?: boolean;
}

/** A second app on `beside`'s database (and prefix, unless `prefix` is given). The caller closes it. */
export function startAppBeside(
  beside: TestApp,
  opts: Pick<WithAppOptions, "prefix" | "env" | "workers" | "clock" | "onQuery" | "resolveHost"> = {},
): Promise<TestApp> {
  return startTestApp({
    databaseUrl: beside.rt.config.database.url,
    prefix: opts.prefix ?? beside.rt.config.redis.prefix,
    // the same world: the upstream, chain and facilitator addresses beside's environment names (a
    // process of the same deployment); `env` changes what this one configures differently
    env: { ...beside.env, ...opts.env },
    workers: opts.workers,
    clock: opts.clock,
    onQuery: opts.onQuery,
    resolveHost: opts.resolveHost,
  });
}

/**
 * Another app for the length of `fn` (a differently configured one, or one a test breaks): on a
 * world of its own, or `beside` an app. It is closed (and its world dropped) when `fn` ends.
 */
export async function withApp<T>(opts: WithAppOptions, fn: (app: TestApp) => Promise<T>): Promise<T> {
  let app: TestApp;
  let close: () => Promise<void>;
  if (opts.beside) {
    app = await startAppBeside(opts.beside, opts);
    const beside = app;
    close = () => beside.close();
  } else {
    const world = await startWorld(opts);
    app = world.app;
    close = world.close;
  }
  try {
    return await fn(app);
  } finally {
    await (opts.closeMayFail ? close().catch(() => undefined) : close());
  }
}
