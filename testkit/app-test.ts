import { test } from "vitest";
import { createKey, type SignedInUser, signIn } from "./actors.js";
import { isolatedWorld } from "./harness.js";
import { type Database, startWorld, type WorldOptions } from "./world.js";

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
 * A further app (another configuration, one a test breaks) is `withApp` (world.ts).
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
