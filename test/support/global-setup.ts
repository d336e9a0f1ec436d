import { type DevServices, startDevServices, stateDirOf } from "../../src/local/dev-services/index.js";
import { PG_ADMIN_URL, REDIS_URL } from "../../testkit/db.js";
import { migrateTemplate } from "../../testkit/template.js";

let services: DevServices | undefined;

/**
 * vitest's global setup: the migrated template database every test file clones. On a machine with
 * no PostgreSQL or Redis at the tests' addresses, the ones `npm run dev` would run are started
 * there for the run (src/local/dev-services; README "Two commands").
 */
export async function setup(): Promise<void> {
  services = await startDevServices({
    env: { DATABASE_URL: PG_ADMIN_URL, REDIS_URL, PATH: process.env.PATH },
    stateDir: stateDirOf(process.env),
  });
  await migrateTemplate();
}

export async function teardown(): Promise<void> {
  await services?.stop();
}
