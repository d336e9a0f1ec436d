import { randomUUID } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ensureDatabase, runMigrations } from "../../../src/adapters/db.js";
import {
  applyFunctions,
  definedFunctions,
  FUNCTIONS_DIR,
  readFunctionSources,
} from "../../../src/adapters/sql-functions.js";
import { createTestDatabase, dbUrl, templateName, withAdmin } from "../../../testkit/db.js";

// The stored functions have one source, prisma/functions (docs/decisions.md "Prisma"): the
// migration step applies each file after the migrations; migrations stop carrying copies.

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const MIGRATIONS = join(ROOT, "prisma", "migrations");
/** The last migration that may define a function: from the next one on, prisma/functions does. */
const CUT_OVER = "20261127000000_escrow_linger";

/** The migrations after `cutOver` whose script creates or replaces a function or procedure. */
function migrationsDefiningFunctions(dir: string, cutOver: string): string[] {
  return readdirSync(dir)
    .filter((d) => !d.endsWith(".toml") && d > cutOver)
    .sort()
    .filter((d) => definedFunctions(readFileSync(join(dir, d, "migration.sql"), "utf8")).length > 0);
}

/** Every function in the public schema that no extension owns: name and definition. */
async function liveFunctions(c: pg.Client, schema = "public"): Promise<{ name: string; def: string }[]> {
  const r = await c.query<{ name: string; def: string }>(
    `SELECT p.proname::text AS name, pg_get_functiondef(p.oid) AS def
       FROM pg_proc p
      WHERE p.pronamespace = $1::regnamespace
        AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
      ORDER BY p.proname, p.oid::regprocedure::text`,
    [schema],
  );
  return r.rows;
}

/**
 * The live definitions against the files', normalised by Postgres itself: in a transaction that is
 * rolled back, the files are run into a scratch schema and `pg_get_functiondef` of each result is
 * compared with that of the live function (the scratch schema's name put back to public).
 * Returns the names whose definitions differ (a function missing on either side counts).
 */
async function differingDefinitions(url: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query("BEGIN");
    await c.query("CREATE SCHEMA svc_fn_check");
    await c.query("SET LOCAL search_path = svc_fn_check, public");
    const names = readFunctionSources().flatMap((s) => s.names);
    const live = (await liveFunctions(c)).filter((f) => names.includes(f.name));
    for (const s of readFunctionSources()) await c.query(s.sql);
    const fromFiles = (await liveFunctions(c, "svc_fn_check")).map((f) => ({
      name: f.name,
      def: f.def.replace(/^CREATE OR REPLACE FUNCTION svc_fn_check\./, "CREATE OR REPLACE FUNCTION public."),
    }));
    const differ = new Set<string>();
    for (const name of names) {
      const a = live.filter((f) => f.name === name).map((f) => f.def);
      const b = fromFiles.filter((f) => f.name === name).map((f) => f.def);
      if (a.length === 0 || JSON.stringify(a) !== JSON.stringify(b)) differ.add(name);
    }
    return [...differ].sort();
  } finally {
    await c.query("ROLLBACK").catch(() => undefined);
    await c.end();
  }
}

async function sql(url: string, text: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

/** svc_routable as the initial migration defined it (before issue 18 finding 8). */
const STALE_ROUTABLE = `CREATE OR REPLACE FUNCTION svc_routable(o offers, k upstream_keys) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT LEAST(o.remaining_micro_diem, COALESCE(k.last_balance_micro_diem, o.remaining_micro_diem)) - o.reserved_micro_diem
$$`;

describe("the function files", () => {
  test("each file defines, with CREATE OR REPLACE, exactly the function it is named after", () => {
    const sources = readFunctionSources();
    expect(sources.length).toBeGreaterThan(0);
    for (const s of sources) {
      expect(s.names, s.file).toEqual([s.file.replace(/\.sql$/, "")]);
      const code = s.sql.replace(/--[^\n]*/g, "");
      expect(code, `${s.file}: CREATE without OR REPLACE is not idempotent`).not.toMatch(
        /\bCREATE\s+(FUNCTION|PROCEDURE)\b/i,
      );
    }
  });

  test("no migration after the cut-over creates or replaces a function", () => {
    expect(readdirSync(MIGRATIONS)).toContain(CUT_OVER);
    expect(migrationsDefiningFunctions(MIGRATIONS, CUT_OVER)).toEqual([]);
  });

  test("the cut-over check sees a function planted in a later migration, in any spelling", () => {
    const copy = mkdtempSync(join(tmpdir(), "svc-fn-migrations-"));
    try {
      cpSync(MIGRATIONS, copy, { recursive: true });
      const plant = (name: string, text: string) => {
        mkdirSync(join(copy, name));
        writeFileSync(join(copy, name, "migration.sql"), text);
      };
      plant("29990101000000_plain", "ALTER TABLE offers ADD COLUMN x integer;\n-- CREATE FUNCTION in a comment\n");
      plant("29990102000000_create", "create function svc_x() returns integer language sql as $$ select 1 $$;");
      plant("29990103000000_replace", 'CREATE OR REPLACE\n  FUNCTION public."svc_end_items"(v svc_end_item[])');
      expect(migrationsDefiningFunctions(copy, CUT_OVER)).toEqual(["29990102000000_create", "29990103000000_replace"]);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  test("the test template's name changes with a function file", () => {
    const copy = mkdtempSync(join(tmpdir(), "svc-fn-template-"));
    try {
      cpSync(join(ROOT, "prisma"), join(copy, "prisma"), { recursive: true });
      const before = templateName(copy);
      expect(before).toBe(templateName(ROOT));
      const file = join(copy, "prisma", "functions", "svc_routable.sql");
      writeFileSync(file, `${readFileSync(file, "utf8")}-- changed\n`);
      expect(templateName(copy)).not.toBe(before);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});

describe("the live database's functions", () => {
  let url = "";
  let drop: () => Promise<void> = async () => undefined;

  beforeAll(async () => {
    const t = await createTestDatabase();
    url = t.url;
    drop = t.drop;
  });
  afterAll(async () => {
    await drop();
  });

  test("every function in the public schema has exactly one file, and every file's function is live", async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const live = await liveFunctions(c).finally(() => c.end());
    const byName = new Map<string, string[]>();
    for (const s of readFunctionSources()) {
      for (const n of s.names) byName.set(n, [...(byName.get(n) ?? []), s.file]);
    }
    const liveNames = [...new Set(live.map((f) => f.name))].sort();
    // the svc_ functions and the ledger's trigger functions at least
    expect(liveNames).toEqual(expect.arrayContaining(["ledger_assert_balanced", "svc_end_items", "svc_routable"]));
    for (const name of liveNames) expect(byName.get(name), name).toEqual([`${name}.sql`]);
    expect([...byName.keys()].sort()).toEqual(liveNames);
  });

  test("each live definition is its file's (pg_get_functiondef, normalised by Postgres)", async () => {
    expect(await differingDefinitions(url)).toEqual([]);
  });

  test("a definition replaced by hand since is applied again; then nothing is done", async () => {
    await applyFunctions(url);
    await sql(url, STALE_ROUTABLE);
    expect(await differingDefinitions(url)).toEqual(["svc_routable"]);
    expect(await applyFunctions(url)).toBe("applied");
    expect(await differingDefinitions(url)).toEqual([]);
    expect(await applyFunctions(url)).toBe("unchanged");
  });

  test("a function dropped since is applied again", async () => {
    await sql(url, "DROP FUNCTION svc_end_batch(jsonb)");
    expect(await differingDefinitions(url)).toEqual(["svc_end_batch"]);
    expect(await applyFunctions(url)).toBe("applied");
    expect(await differingDefinitions(url)).toEqual([]);
  });

  test("a changed file is applied; an unchanged set is not", async () => {
    const sources = readFunctionSources();
    const changed = sources.map((s) => (s.file === "svc_routable.sql" ? { ...s, hash: `${s.hash}x` } : s));
    expect(await applyFunctions(url, changed)).toBe("applied");
    expect(await applyFunctions(url, changed)).toBe("unchanged");
    expect(await applyFunctions(url, sources)).toBe("applied");
    expect(await applyFunctions(url, sources)).toBe("unchanged");
  });

  test("eight processes starting at once apply the functions once, without an error", async () => {
    await sql(url, STALE_ROUTABLE);
    const outcomes = await Promise.all(Array.from({ length: 8 }, () => applyFunctions(url)));
    expect(outcomes.filter((o) => o === "applied")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "unchanged")).toHaveLength(7);
    expect(await differingDefinitions(url)).toEqual([]);
  });
});

describe("the start-up's migration step on a fresh database", () => {
  const name = `svc_t_${Math.floor(Date.now() / 1000)}_${randomUUID().replaceAll("-", "").slice(0, 8)}`;
  afterAll(async () => {
    await withAdmin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)));
  });

  test("creates the database, migrates it and applies the files (npm run dev / npm start)", async () => {
    await ensureDatabase(dbUrl(name));
    await runMigrations(dbUrl(name));
    expect(await differingDefinitions(dbUrl(name))).toEqual([]);
    expect(await applyFunctions(dbUrl(name))).toBe("unchanged");
    // a second start-up: the migrations are applied, the functions current
    await runMigrations(dbUrl(name));
    expect(await applyFunctions(dbUrl(name))).toBe("unchanged");
  }, 120_000);
});

test("FUNCTIONS_DIR is prisma/functions", () => {
  expect(FUNCTIONS_DIR.replace(/\/$/, "")).toBe(join(ROOT, "prisma", "functions"));
});
