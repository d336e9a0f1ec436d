import { afterAll, beforeAll } from "vitest";
import type { UpstreamSimulator } from "../src/local/upstream-sim/index.js";
import type { TestApp } from "./harness.js";
import { startWorld, type World, type WorldOptions } from "./world.js";

export interface MarketWorldOptions extends Omit<WorldOptions, "env"> {
  /**
   * More app environment, over the simulator's. A function is called in `beforeAll`, for values that
   * an earlier hook produces (e.g. a local chain's addresses).
   */
  env?: Record<string, string> | (() => Record<string, string>);
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
 * The world of `startWorld` (world.ts) with the upstream simulator on by default (`sim: false` for
 * none), started in `beforeAll` and closed in `afterAll`, for test files whose module-level helpers
 * read `world.app`; a file whose tests take the app as a fixture uses `appTest` (app-test.ts).
 *
 * Call it at the top level of a test file. Hooks run in the order they are registered (vitest's
 * default `sequence.hooks: "stack"`; `afterAll` in reverse): a `beforeAll` registered before this
 * call runs before the world starts (pin a clock, start a chain), one registered after it can seed
 * through `world.app`, and their `afterAll`s run after and before the world closes respectively.
 */
export function useMarketWorld(opts: MarketWorldOptions = {}): MarketWorld {
  let world: World | undefined;

  beforeAll(async () => {
    world = await startWorld({
      ...opts,
      sim: opts.sim ?? {},
      env: typeof opts.env === "function" ? opts.env() : opts.env,
    });
  });

  // a hang guard, not a timing: a world on a Redis Cluster that lost a master closes slowly
  afterAll(async () => {
    await world?.close();
  }, 180_000);

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
      return ready("app", world?.app, notStarted);
    },
    get peer() {
      return ready("peer", world?.peer, opts.peer ? notStarted : "pass `peer: true` to start one");
    },
    get sim() {
      return ready("sim", world?.sim, opts.sim === false ? "this world has no simulator (`sim: false`)" : notStarted);
    },
  };
}
