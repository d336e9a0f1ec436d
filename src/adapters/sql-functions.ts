import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { appPath } from "../lib/app-root.js";

/**
 * The stored functions' one source (docs/decisions.md "Prisma"): `prisma/functions/<name>.sql` holds
 * the current definition of the function `<name>` (CREATE OR REPLACE; a DROP FUNCTION IF EXISTS
 * first when its signature changed). Migrations carry schema only; the migration step applies
 * these files after `prisma migrate deploy`, in name order, in one transaction.
 */
export const FUNCTIONS_DIR = appPath("prisma", "functions");

export interface FunctionSource {
  /** the file's name, e.g. `svc_end_items.sql` */
  file: string;
  /** the functions it defines (with `CREATE OR REPLACE FUNCTION`) */
  names: string[];
  sql: string;
  /** sha256 of the file's text, hex */
  hash: string;
}

/** `CREATE [OR REPLACE] FUNCTION|PROCEDURE [public.]name(`, comments aside: what a script defines. */
const DEFINES =
  /\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE)\s+(?:"?public"?\s*\.\s*)?"?([A-Za-z_][A-Za-z0-9_$]*)"?\s*\(/gi;

/** The functions (and procedures) a SQL script creates or replaces, in order of appearance. */
export function definedFunctions(sql: string): string[] {
  const code = sql.replace(/--[^\n]*/g, "").replace(/\/\*[\s\S]*?\*\//g, "");
  return [...code.matchAll(DEFINES)].map((m) => (m[1] ?? "").toLowerCase());
}

/** Every function file, in the order they are applied (by name). */
export function readFunctionSources(dir: string = FUNCTIONS_DIR): FunctionSource[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .map((file) => {
      const sql = readFileSync(join(dir, file), "utf8");
      return {
        file,
        names: [...new Set(definedFunctions(sql))],
        sql,
        hash: createHash("sha256").update(sql).digest("hex"),
      };
    });
}

/**
 * The advisory lock the apply step takes (transaction-scoped), so N processes starting at once
 * apply the files once: the first applies, the others wait, see them current and skip.
 * ASCII "svcf"; Prisma's migrate lock is another key (72707369).
 */
export const FUNCTIONS_LOCK_ID = 0x73766366;

/**
 * Each applied function carries a comment: the file it came from, the file's hash and the hash of
 * its definition as applied (`pg_get_functiondef`). The functions are current when every function
 * of every file is present with the comment its file and its live definition give, so a changed
 * file, a dropped function or a definition replaced by hand is applied again.
 */
function note(source: FunctionSource, defMd5: string): string {
  return `prisma/functions/${source.file} sha256=${source.hash} def=${defMd5}`;
}

interface LiveFunction {
  name: string;
  note: string | null;
  def: string;
}

async function live(client: pg.Client, names: string[]): Promise<LiveFunction[]> {
  const r = await client.query<LiveFunction>(
    `SELECT p.proname::text AS name, obj_description(p.oid, 'pg_proc') AS note, md5(pg_get_functiondef(p.oid)) AS def
       FROM pg_proc p
      WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY($1::text[])`,
    [names],
  );
  return r.rows;
}

async function current(client: pg.Client, sources: FunctionSource[]): Promise<boolean> {
  const rows = await live(
    client,
    sources.flatMap((s) => s.names),
  );
  return sources.every((s) =>
    s.names.every((name) => {
      const fns = rows.filter((r) => r.name === name);
      return fns.length > 0 && fns.every((f) => f.note === note(s, f.def));
    }),
  );
}

/**
 * Applies the function files to the database when they are not current (see `note`), under an
 * advisory lock, in one transaction; returns what it did. Cheap when nothing changed: one query.
 * Runs after `prisma migrate deploy` wherever migrations are applied (start-up, the test template).
 */
export async function applyFunctions(
  databaseUrl: string,
  sources: FunctionSource[] = readFunctionSources(),
): Promise<"applied" | "unchanged"> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    if (await current(client, sources)) return "unchanged";
    await client.query("BEGIN");
    try {
      await client.query("SELECT pg_advisory_xact_lock($1)", [FUNCTIONS_LOCK_ID]);
      // another process may have applied them while this one waited for the lock
      if (await current(client, sources)) {
        await client.query("COMMIT");
        return "unchanged";
      }
      // files go in name order, and a SQL-language function may use one a later file defines (as
      // pg_dump restores them): bodies are checked when called, every file being applied by then
      await client.query("SET LOCAL check_function_bodies = off");
      for (const s of sources) {
        try {
          await client.query(s.sql);
        } catch (e) {
          throw new Error(`prisma/functions/${s.file}: ${(e as Error).message}`, { cause: e });
        }
        const fns = await client.query<{ sig: string; def: string }>(
          `SELECT p.oid::regprocedure::text AS sig, md5(pg_get_functiondef(p.oid)) AS def
             FROM pg_proc p
            WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY($1::text[])`,
          [s.names],
        );
        for (const f of fns.rows) {
          await client.query(`COMMENT ON ROUTINE ${f.sig} IS ${client.escapeLiteral(note(s, f.def))}`);
        }
      }
      await client.query("COMMIT");
      return "applied";
    } catch (e) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw e;
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}
