import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// Every rule in one language, stated once (docs/decisions.md "Prisma", "The ledger lines' one
// definition"):
// 1. No function body in a migration is what the database runs: every function a migration creates
//    is defined again, with the same argument types, by its file in prisma/functions (applied after
//    the migrations, CREATE OR REPLACE), or dropped by a later migration or by a file. The database
//    side (each live function equals its file) is test/integration/db/functions.test.ts.
// 2. The ledger lines' derivation (a clear's derived lines, their ids and kinds, a closing's
//    transaction id) is stated in prisma/functions/ledger_lines.sql alone: no SQL elsewhere (other
//    function files, later migrations, the SQL in TypeScript string and template literals of src/,
//    workers/, testkit/, scripts/, bench/) carries its fingerprints. Tests are left out: they state
//    the expected lines on their own, to compare with the function's. Comments are left out too.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const MIGRATIONS = join(ROOT, "prisma", "migrations");
const FUNCTIONS = join(ROOT, "prisma", "functions");

interface Source {
  /** path from the repository root */
  path: string;
  text: string;
}

// ───────────────────────── 1. functions of migrations ─────────────────────────

const SQL_COMMENTS = /--[^\n]*|\/\*[\s\S]*?\*\//g;
const NAME = String.raw`(?:"?public"?\s*\.\s*)?"?([A-Za-z_][A-Za-z0-9_$]*)"?`;
const CREATES = new RegExp(String.raw`\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE)\s+${NAME}\s*\(`, "gi");
const DROPS = new RegExp(String.raw`\bDROP\s+(?:FUNCTION|PROCEDURE)\s+(?:IF\s+EXISTS\s+)?${NAME}\s*(\()?`, "gi");

/** The text between the parenthesis at `open` and its match. */
function parenthesised(sql: string, open: number): string {
  let depth = 0;
  for (let i = open; i < sql.length; i++) {
    if (sql[i] === "(") depth++;
    else if (sql[i] === ")" && --depth === 0) return sql.slice(open + 1, i);
  }
  throw new Error(`unbalanced parenthesis at ${open}`);
}

const MULTIWORD = /^(double precision|timestamp(\(\d+\))? with(out)? time zone|character varying|bit varying)\b/;
const ALIASES: Record<string, string> = {
  int: "integer",
  int4: "integer",
  int8: "bigint",
  int2: "smallint",
  bool: "boolean",
  float8: "double precision",
  varchar: "character varying",
  timestamptz: "timestamp with time zone",
};

/** The argument types of a parameter list (names, modes and defaults left out; OUT arguments too). */
function argTypes(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of list) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += ch;
  }
  if (cur.trim()) parts.push(cur);
  return parts.flatMap((raw) => {
    let a = raw.replace(/\s+/g, " ").trim().replaceAll('"', "").toLowerCase();
    a = a.replace(/\s+(default\b|=).*$/, "");
    const mode = /^(in|out|inout|variadic) /.exec(a)?.[1];
    if (mode === "out") return [];
    if (mode) a = a.slice(mode.length + 1);
    // a name first unless the whole is a type of several words
    if (!MULTIWORD.test(a) && a.includes(" ")) a = a.slice(a.indexOf(" ") + 1);
    const array = a.endsWith("[]") ? "[]" : "";
    const base = a.replace(/\[\]$/, "").replace(/^public\./, "");
    return [`${ALIASES[base] ?? base}${array}`];
  });
}

interface FunctionEvent {
  kind: "create" | "drop";
  name: string;
  /** the argument types; a DROP without a list drops every overload */
  sig?: string;
}

/** What a script creates and drops, in order of appearance. */
function functionEvents(sql: string): FunctionEvent[] {
  const code = sql.replace(SQL_COMMENTS, "");
  const events: (FunctionEvent & { at: number })[] = [];
  for (const m of code.matchAll(CREATES)) {
    const open = (m.index ?? 0) + m[0].length - 1;
    const name = (m[1] ?? "").toLowerCase();
    events.push({ kind: "create", name, sig: argTypes(parenthesised(code, open)).join(","), at: m.index ?? 0 });
  }
  for (const m of code.matchAll(DROPS)) {
    const name = (m[1] ?? "").toLowerCase();
    const sig = m[2] ? argTypes(parenthesised(code, (m.index ?? 0) + m[0].length - 1)).join(",") : undefined;
    events.push({ kind: "drop", name, sig, at: m.index ?? 0 });
  }
  return events.sort((a, b) => a.at - b.at).map(({ at: _, ...e }) => e);
}

/**
 * The functions (`name(types)`) a migration created that the database may still run as the
 * migration wrote them: no later migration and no function file drops them, and no function file
 * defines them with the same argument types.
 */
function strandedMigrationFunctions(migrations: Source[], files: Source[]): string[] {
  const live = new Map<string, { name: string; sig: string; migration: string }>();
  for (const m of [...migrations].sort((a, b) => a.path.localeCompare(b.path))) {
    for (const e of functionEvents(m.text)) {
      if (e.kind === "create") live.set(`${e.name}(${e.sig})`, { name: e.name, sig: e.sig ?? "", migration: m.path });
      else for (const [k, f] of live) if (f.name === e.name && (e.sig === undefined || e.sig === f.sig)) live.delete(k);
    }
  }
  const stranded: string[] = [];
  for (const [key, f] of live) {
    const file = files.find((s) => s.path.endsWith(`/${f.name}.sql`));
    const events = file ? functionEvents(file.text) : [];
    const redefined = events.some((e) => e.kind === "create" && e.name === f.name && e.sig === f.sig);
    const dropped = events.some((e) => e.kind === "drop" && e.name === f.name && (e.sig ?? f.sig) === f.sig);
    if (!redefined && !dropped) stranded.push(`${key} from ${f.migration}`);
  }
  return stranded.sort();
}

function migrationSources(): Source[] {
  return readdirSync(MIGRATIONS)
    .filter((d) => existsSync(join(MIGRATIONS, d, "migration.sql")))
    .map((d) => ({
      path: `prisma/migrations/${d}/migration.sql`,
      text: readFileSync(join(MIGRATIONS, d, "migration.sql"), "utf8"),
    }));
}

function functionSources(): Source[] {
  return readdirSync(FUNCTIONS)
    .filter((f) => f.endsWith(".sql"))
    .map((f) => ({ path: `prisma/functions/${f}`, text: readFileSync(join(FUNCTIONS, f), "utf8") }));
}

describe("no migration's function body is what the database runs", () => {
  it("every function a migration created is in prisma/functions with the same arguments, or dropped", () => {
    const migrations = migrationSources();
    expect(migrations.flatMap((m) => functionEvents(m.text)).filter((e) => e.kind === "create").length).toBeGreaterThan(
      5,
    );
    expect(strandedMigrationFunctions(migrations, functionSources())).toEqual([]);
  });

  it("reads argument lists as Postgres does: names, modes and defaults aside", () => {
    expect(argTypes("p_now timestamptz, p_limit integer, p_holder uuid DEFAULT NULL")).toEqual([
      "timestamp with time zone",
      "integer",
      "uuid",
    ]);
    expect(argTypes("v svc_end_item[], OUT n int, IN p double precision = 1")).toEqual([
      "svc_end_item[]",
      "double precision",
    ]);
    expect(argTypes("uuid, uuid, uuid, text, date, date, bigint, timestamptz")).toHaveLength(8);
    expect(argTypes("")).toEqual([]);
  });

  it("the check sees a stranded function: no file, another signature, a drop of another overload", () => {
    const files = functionSources();
    const plant = (text: string) =>
      strandedMigrationFunctions(
        [...migrationSources(), { path: "prisma/migrations/29990101000000_x/migration.sql", text }],
        files,
      );
    expect(plant("CREATE FUNCTION svc_nowhere(p int) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;")).toEqual([
      "svc_nowhere(integer) from prisma/migrations/29990101000000_x/migration.sql",
    ]);
    // a file defines svc_routable(offers, upstream_keys): an overload of another shape stays behind
    expect(
      plant(`CREATE OR REPLACE FUNCTION "svc_routable"(o offers) RETURNS bigint LANGUAGE sql AS $$ SELECT 1 $$;`),
    ).toEqual(["svc_routable(offers) from prisma/migrations/29990101000000_x/migration.sql"]);
    // created, then dropped by a later statement: nothing runs it
    expect(
      plant(
        "CREATE FUNCTION svc_gone(a uuid) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\nDROP FUNCTION svc_gone(uuid);",
      ),
    ).toEqual([]);
    expect(
      plant(
        "CREATE FUNCTION svc_gone(a uuid) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\nDROP FUNCTION svc_gone(text);",
      ),
    ).toEqual(["svc_gone(uuid) from prisma/migrations/29990101000000_x/migration.sql"]);
    // in a comment: not a definition
    expect(plant("-- CREATE FUNCTION svc_commented(a uuid)\nSELECT 1;")).toEqual([]);
  });
});

// ───────────────────────── 2. the ledger lines' derivation ─────────────────────────

/** Where the derivation is stated: the one function. */
const LEDGER_LINES = "prisma/functions/ledger_lines.sql";
/** The migrations that stated it before it was a function (append-only history). */
const LAST_HISTORICAL = "prisma/migrations/20261206000000_monthly_partitions";

/**
 * The derivation's fingerprints: a derived line's id (md5 of the clear's id and ':buyer', ':supplier'
 * or ':fee'), a derived line's kind as a SQL literal (written entries never carry it: a clear writes
 * no journal), and a closing line's transaction id (md5 of 'closing:' and the month alone; the
 * closing's own id, written by the month closing, adds the account and book).
 */
const FINGERPRINTS: { what: string; re: RegExp }[] = [
  { what: "a derived line's id", re: /\|\|\s*':(?:buyer|supplier|fee)'/ },
  { what: "a derived line's kind", re: /'(?:buyer_debit|supplier_credit)'/ },
  { what: "a closing line's transaction id", re: /md5\s*\(\s*'closing:'\s*\|\|\s*[\w."$]+(?:::\w+)*\s*\)/ },
];

/** The text of a TypeScript file's string and template literals: where its SQL is. */
function literalText(path: string, text: string): string {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  const visit = (n: ts.Node) => {
    if (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) out.push(n.text);
    else if (ts.isTemplateExpression(n)) {
      out.push(n.head.text, ...n.templateSpans.map((s) => s.literal.text));
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out.join("\n");
}

/** Each file that states part of the ledger lines' derivation outside the one function, and what. */
function derivationRestatements(sources: Source[]): string[] {
  const found: string[] = [];
  for (const s of sources) {
    if (s.path === LEDGER_LINES) continue;
    if (s.path.startsWith("prisma/migrations/") && s.path.localeCompare(`${LAST_HISTORICAL}/migration.sql`) <= 0)
      continue;
    // parse only what may hold one: a fingerprint in the text, comments included
    if (!FINGERPRINTS.some((f) => f.re.test(s.text))) continue;
    const code = s.path.endsWith(".sql") ? s.text.replace(SQL_COMMENTS, "") : literalText(s.path, s.text);
    for (const f of FINGERPRINTS) if (f.re.test(code)) found.push(`${s.path}: ${f.what}`);
  }
  return found.sort();
}

function walk(dir: string, skip: (rel: string) => boolean): Source[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    const rel = relative(ROOT, p);
    if (skip(rel)) return [];
    if (statSync(p).isDirectory()) return walk(p, skip);
    return /\.(ts|sql)$/.test(name) ? [{ path: rel, text: readFileSync(p, "utf8") }] : [];
  });
}

function codeSources(): Source[] {
  const skip = (rel: string) => rel === "src/generated" || rel.includes("node_modules");
  return [
    ...["src", "workers", "testkit", "scripts", "bench"].flatMap((d) => walk(join(ROOT, d), skip)),
    ...functionSources(),
    ...migrationSources(),
  ];
}

describe("the ledger lines' derivation is stated once, in prisma/functions/ledger_lines.sql", () => {
  it("the function states every fingerprint (the check looks for the right things)", () => {
    const fn = readFileSync(join(ROOT, LEDGER_LINES), "utf8").replace(SQL_COMMENTS, "");
    for (const f of FINGERPRINTS) expect(f.re.test(fn), f.what).toBe(true);
  });

  it("no other SQL states it: function files, later migrations, the SQL of src, workers, testkit, scripts, bench", () => {
    const sources = codeSources();
    expect(sources.some((s) => s.path === "src/domain/ledger/ledger-lines.ts")).toBe(true);
    expect(derivationRestatements(sources)).toEqual([]);
  });

  it("the check sees a restatement in TypeScript SQL, a function file or a later migration, not in a comment", () => {
    const ts1 = {
      path: "src/domain/x/reader.ts",
      text: "const id = Prisma.sql`md5(c.id::text || ':supplier')::uuid`;\n// md5(c.id::text || ':fee')",
    };
    const ts2 = { path: "src/domain/x/kinds.ts", text: "q(`SELECT 'buyer_debit' AS kind, $" + "{x} FROM clears`);" }; // a template with a placeholder
    const sql = { path: "prisma/functions/svc_other.sql", text: "SELECT md5('closing:' || k.month::text)::uuid" };
    const later = {
      path: "prisma/migrations/20261210000000_v/migration.sql",
      text: "CREATE VIEW v AS SELECT 'supplier_credit'",
    };
    const comment = { path: "prisma/functions/svc_x.sql", text: "-- 'buyer_debit' is the function's\nSELECT 1" };
    const history = {
      path: "prisma/migrations/20261202000000_clear_transfers/migration.sql",
      text: "SELECT 'buyer_debit'",
    };
    const closing = {
      path: "src/domain/maintenance/c.ts",
      text: "q(`md5('closing:' || $1::date::text || ':' || l.book::text)`)",
    };
    expect(derivationRestatements([ts1, ts2, sql, later, comment, history, closing])).toEqual([
      "prisma/functions/svc_other.sql: a closing line's transaction id",
      "prisma/migrations/20261210000000_v/migration.sql: a derived line's kind",
      "src/domain/x/kinds.ts: a derived line's kind",
      "src/domain/x/reader.ts: a derived line's id",
    ]);
  });
});
