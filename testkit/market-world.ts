import { afterAll, beforeAll } from "vitest";
import type { Clock } from "../src/lib/clock.js";
import {
  startUpstreamSimulator,
  type UpstreamSimulator,
  type UpstreamSimulatorOptions,
} from "../src/local/upstream-sim/index.js";
import { isolatedWorld, startTestApp, type TestApp } from "./harness.js";
import { CATALOG_KEY } from "./market.js";

export interface MarketWorldOptions {
  /**
   * Options for the upstream simulator (default: none beyond the catalog key), or `false` for a
   * world without one. With a simulator the app gets `UPSTREAM_BASE_URL` pointing at it.
   */
  sim?: UpstreamSimulatorOptions | false;
  /**
   * The catalog key: added to the simulator's keys (zero balance, first) and given to the app as
   * `CATALOG_SYNC_KEY`. Default `CATALOG_KEY`, the same as `startSim()` + `simEnv()`. `false` for
   * none: the catalog sync then reads with a registered supplier key.
   */
  catalogSyncKey?: string | false;
  /**
   * More app environment, over the simulator's. A function is called in `beforeAll`, for values that
   * an earlier hook produces (e.g. a local chain's addresses).
   */
  env?: Record<string, string> | (() => Record<string, string>);
  /** start the BullMQ workers in `app` (never in `peer`) */
  workers?: boolean;
  /** the clock of `app` and `peer` */
  clock?: Clock;
  /** run `app.rt.services.catalog.sync()` once the app is up */
  syncCatalog?: boolean;
  /** start a second app on the same database, prefix, env and clock: another process of one deployment */
  peer?: boolean;
}

/** What `useMarketWorld` started; read its properties inside tests and later hooks. */
export interface MarketWorld {
  readonly app: TestApp;
  /** only with `peer: true` */
  readonly peer: TestApp;
  /** only without `sim: false` */
  readonly sim: UpstreamSimulator;
}

/**
 * One world per test file: the upstream simulator, an isolated database and Redis prefix, and the app
 * (plus an optional peer) pointed at them, started in `beforeAll` and closed in `afterAll`.
 *
 * Call it at the top level of a test file. Hooks run in the order they are registered (vitest's
 * default `sequence.hooks: "stack"`; `afterAll` in reverse): a `beforeAll` registered before this
 * call runs before the world starts (pin a clock, start a chain), one registered after it can seed
 * through `world.app`, and their `afterAll`s run after and before the world closes respectively.
 */
export function useMarketWorld(opts: MarketWorldOptions = {}): MarketWorld {
  let sim: UpstreamSimulator | undefined;
  let app: TestApp | undefined;
  let peer: TestApp | undefined;
  let drop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    const catalogKey = opts.catalogSyncKey ?? CATALOG_KEY;
    let simEnv: Record<string, string> = {};
    if (opts.sim !== false) {
      sim = await startUpstreamSimulator(
        catalogKey === false
          ? opts.sim
          : { ...opts.sim, keys: [{ key: catalogKey, diemMicro: 0n }, ...(opts.sim?.keys ?? [])] },
      );
      simEnv =
        catalogKey === false
          ? { UPSTREAM_BASE_URL: sim.baseUrl }
          : { UPSTREAM_BASE_URL: sim.baseUrl, CATALOG_SYNC_KEY: catalogKey };
    }
    const w = await isolatedWorld();
    drop = w.drop;
    const env = { ...simEnv, ...(typeof opts.env === "function" ? opts.env() : opts.env) };
    const base = { databaseUrl: w.databaseUrl, prefix: w.prefix, env, clock: opts.clock };
    app = await startTestApp({ ...base, workers: opts.workers });
    if (opts.syncCatalog) await app.rt.services.catalog.sync();
    if (opts.peer) peer = await startTestApp(base);
  });

  afterAll(async () => {
    await peer?.close();
    await app?.close();
    await sim?.close();
    await drop?.();
  });

  function ready<T>(name: string, value: T | undefined, hint: string): T {
    if (value === undefined) {
      throw new Error(
        `useMarketWorld: \`${name}\` is not available (${hint}); read it inside a test or a hook registered after useMarketWorld()`,
      );
    }
    return value;
  }
  const notStarted = "the world's beforeAll has not run, or failed";
  return {
    get app() {
      return ready("app", app, notStarted);
    },
    get peer() {
      return ready("peer", peer, opts.peer ? notStarted : "pass `peer: true` to start one");
    },
    get sim() {
      return ready("sim", sim, opts.sim === false ? "this world has no simulator (`sim: false`)" : notStarted);
    },
  };
}
