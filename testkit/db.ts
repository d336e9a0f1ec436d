import { createHash, randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";

/** Postgres server used by the tests (the machine's, at its default port; CI starts it if down). */
export const PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres";
export const REDIS_URL = "redis://127.0.0.1:6379";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

export function dbUrl(name: string): string {
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * Template name keyed by the content of the migrations and of the stored functions
 * (prisma/functions): a schema or function change gets a fresh template.
 */
export function templateName(root: string = ROOT): string {
  const h = createHash("sha256");
  const migrations = join(root, "prisma", "migrations");
  for (const d of readdirSync(migrations).sort()) {
    if (d.endsWith(".toml")) continue;
    h.update(d);
    h.update(readFileSync(join(migrations, d, "migration.sql")));
  }
  const functions = join(root, "prisma", "functions");
  for (const f of readdirSync(functions).sort()) {
    if (!f.endsWith(".sql")) continue;
    h.update(`functions/${f}`);
    h.update(readFileSync(join(functions, f)));
  }
  return `svc_test_template_${h.digest("hex").slice(0, 12)}`;
}

export async function withAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/**
 * A fresh database for one test file, cloned from the migrated template (≈50 ms).
 * Returns its URL and a drop function.
 */
export async function createTestDatabase(): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  // the creation time in the name: another run's clean-up leaves a young database alone
  const name = `svc_t_${Math.floor(Date.now() / 1000)}_${randomUUID().replaceAll("-", "").slice(0, 8)}`;
  const template = templateName();
  await withAdmin(async (c) => {
    for (let attempt = 0; ; attempt++) {
      try {
        await c.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
        return;
      } catch (e) {
        // another file is cloning the same template right now
        if ((e as { code?: string }).code === "55006" && attempt < 50) {
          await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
          continue;
        }
        throw e;
      }
    }
  });
  return {
    url: dbUrl(name),
    name,
    drop: () => withAdmin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))),
  };
}

const MIGRATIONS = join(ROOT, "prisma", "migrations");

/**
 * A fresh database migrated up to, not including, migration `target` (a folder name under
 * prisma/migrations; the stored functions are not applied, as at that point of history): a
 * migration's test writes rows the old way, then runs `migrate()` — `target` itself — and reads
 * what it carried over; `migrateToLatest()` runs `target` and every migration after it, for a test
 * that reads the result with today's stored functions. `drop()` closes the client and drops the
 * database.
 */
export async function databaseBefore(target: string): Promise<{
  client: pg.Client;
  url: string;
  migrate: () => Promise<unknown>;
  migrateToLatest: () => Promise<void>;
  drop: () => Promise<void>;
}> {
  const dirs = readdirSync(MIGRATIONS)
    .filter((d) => /^\d{14}_/.test(d))
    .sort();
  if (!dirs.includes(target)) throw new Error(`no migration ${target}`);
  const name = `svc_t_mig_${Math.floor(Date.now() / 1000)}_${randomUUID().replaceAll("-", "").slice(0, 8)}`;
  await withAdmin((a) => a.query(`CREATE DATABASE "${name}"`));
  const client = new pg.Client({ connectionString: dbUrl(name) });
  await client.connect();
  const sqlOf = (d: string) => readFileSync(join(MIGRATIONS, d, "migration.sql"), "utf8");
  for (const d of dirs.slice(0, dirs.indexOf(target))) await client.query(sqlOf(d));
  return {
    client,
    url: dbUrl(name),
    migrate: () => client.query(sqlOf(target)),
    migrateToLatest: async () => {
      for (const d of dirs.slice(dirs.indexOf(target))) await client.query(sqlOf(d));
    },
    drop: async () => {
      await client.end();
      await withAdmin((a) => a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    },
  };
}
