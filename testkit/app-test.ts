import { test } from "vitest";
import type { UpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { createKey, type SignedInUser, signIn } from "./actors.js";
import { isolatedWorld, type TestApp } from "./harness.js";
import { type Database, startWorld, type World, type WorldOptions } from "./world.js";

/** How the file's world is started (world.ts): env, simulator, workers, clock, peer, query log. */
export type AppOptions = WorldOptions;

/** A signed-in user holding an API key. */
export interface Agent {
  user: SignedInUser;
  apiKey: string;
  keyId: string;
}

/**
 * The app fixture: `test` with the world of `startWorld` (world.ts) as file-scoped fixtures, started
 * the first time a test or a `test.beforeAll` of the file asks for one and closed after the file
 * (after its `afterAll` hooks). Import it as `test`:
 *
 *   import { appTest as test } from "../../../testkit/app-test.js";
 *   test("…", async ({ app }) => { … });
 *
 * - `app`: the started app (HTTP on a free port, its runtime, the local IdP it trusts) on an isolated
 *   database and Redis prefix, dropped after the file;
 * - `sim`: the upstream simulator (with `appOptions.sim`), `peer`: a second app on the same database,
 *   prefix, env and clock (started on first use);
 * - `agent`: one signed-in user with an API key, made once per file;
 * - `database`: the isolated database and prefix alone, for a file that starts no app;
 * - `appOptions`: the options the world starts with; a file sets them once, at its top level:
 *   `test.override("appOptions", { env: { … }, workers: true })`, or a function of other file
 *   fixtures: `test.override("appOptions", ({ chain }) => ({ env: chainEnv(chain) }))`.
 *
 * A file whose module-level helpers read the app rather than take it takes a view of the same world
 * with `fileWorld(test)`. A further app (another configuration, one a test breaks) is `withApp`
 * (world.ts).
 */
export const appTest = test
  .extend("appOptions", { scope: "file" }, {} as AppOptions)
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("database", { scope: "file" }, async ({}, { onCleanup }): Promise<Database> => {
    const w = await isolatedWorld();
    onCleanup(w.drop);
    return { databaseUrl: w.databaseUrl, prefix: w.prefix };
  })
  .extend("world", { scope: "file" }, async ({ appOptions, database }, { onCleanup }) => {
    const world = await startWorld(appOptions, database);
    onCleanup(world.close);
    return world;
  })
  .extend("app", { scope: "file" }, ({ world }) => world.app)
  .extend("sim", { scope: "file" }, ({ world }) => {
    if (!world.sim) throw new Error("this file's world has no simulator: set `appOptions.sim` (`{}` for the defaults)");
    return world.sim;
  })
  .extend("peer", { scope: "file" }, ({ world }) => world.peer ?? world.startPeer())
  .extend("agent", { scope: "file" }, async ({ app }): Promise<Agent> => {
    const user = await signIn(app);
    const key = await createKey(app, user);
    return { user, apiKey: key.apiKey, keyId: key.id };
  });

/** The file's world as `fileWorld` shows it; read its properties inside tests and later hooks. */
export interface FileWorld {
  readonly app: TestApp;
  /** only with `appOptions.peer` */
  readonly peer: TestApp;
  /** only with `appOptions.sim` */
  readonly sim: UpstreamSimulator;
}

/**
 * The file's world (the `world` fixture of `test`, this file's `appTest` or an extension of it) as a
 * value that module-level helpers can read, for files whose helpers use `world.app` instead of taking
 * `app` as a parameter. It registers a `test.beforeAll` that asks for the fixture, so hooks
 * registered before this call run before the world starts (unless they ask for a fixture), hooks
 * registered after it can seed through `world.app`, and the world closes after the file's `afterAll`
 * hooks, as every fixture does.
 */
export function fileWorld(test: Pick<typeof appTest, "beforeAll">): FileWorld {
  let started: World | undefined;
  test.beforeAll(({ world }) => {
    started = world;
  });
  const notStarted = "the file's beforeAll has not run, or the world failed to start";
  function ready<T>(name: string, value: T | undefined, hint: string): T {
    if (value === undefined) {
      throw new Error(
        `fileWorld: \`${name}\` is not available (${hint}); read it inside a test or a hook registered after fileWorld()`,
      );
    }
    return value;
  }
  return {
    get app() {
      return ready("app", started?.app, notStarted);
    },
    get peer() {
      return ready("peer", started?.peer, started ? "set `appOptions.peer: true` to start one" : notStarted);
    },
    get sim() {
      return ready("sim", started?.sim, started ? "set `appOptions.sim` (`{}` for the defaults)" : notStarted);
    },
  };
}
