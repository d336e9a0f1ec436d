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
