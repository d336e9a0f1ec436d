import { runMigrations } from "../src/adapters/db.js";
import { dbUrl, templateName, withAdmin } from "./db.js";

/** A test database is a leftover once it is this old and nobody is connected to it. */
const STALE_AFTER_S = 2 * 3600;

/**
 * Once per test (or bench) run: migrate a template database (named by the hash of the migrations and
 * the stored functions) that every test file clones, and drop databases left behind by earlier runs.
 * It is migrated as the service migrates at start-up (`runMigrations`: migrations, then functions).
 */
export async function migrateTemplate(): Promise<void> {
  const template = templateName();
  await withAdmin(async (c) => {
    const stale = await c.query<{ datname: string; used: string | null }>(
      // leftovers of crashed runs: nobody is connected to them (a running file always is); the three
      // newest templates stay, so a run of another checkout (other migrations) keeps its own
      `SELECT datname, shobj_description(oid, 'pg_database') AS used FROM pg_database d
        WHERE (datname LIKE 'svc\\_t\\_%'
               OR (datname LIKE 'svc\\_test\\_template\\_%' AND oid NOT IN (
                     SELECT oid FROM pg_database WHERE datname LIKE 'svc\\_test\\_template\\_%' ORDER BY oid DESC LIMIT 3)))
          AND datname <> $1
          AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`,
      [template],
    );
    const nowS = Date.now() / 1000;
    for (const { datname, used } of stale.rows) {
      // a test database younger than STALE_AFTER_S may belong to a run in progress that has not
      // connected yet (another checkout, a parallel run): only older ones are leftovers
      const born = /^svc_t_(\d{10})_/.exec(datname)?.[1];
      if (born !== undefined && nowS - Number(born) < STALE_AFTER_S) continue;
      // a template a run started from within STALE_AFTER_S is still that run's, whatever other
      // checkouts made since: its files clone it until they end (a dropped one failed them)
      const lastRun = /^svc-template (\d+)$/.exec(used ?? "")?.[1];
      if (lastRun !== undefined && nowS - Number(lastRun) < STALE_AFTER_S) continue;
      await c.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`).catch(() => undefined);
    }
    const exists = await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [template]);
    if (!exists.rowCount) {
      const building = `${template}_building`;
      await c.query(`DROP DATABASE IF EXISTS "${building}" WITH (FORCE)`);
      await c.query(`CREATE DATABASE "${building}"`);
      await runMigrations(dbUrl(building));
      await c.query(`ALTER DATABASE "${building}" RENAME TO "${template}"`);
    }
    // when a run last started from it: another checkout's clean-up keeps it for STALE_AFTER_S
    await c.query(`COMMENT ON DATABASE "${template}" IS 'svc-template ${Math.floor(nowS)}'`);
  });
}
