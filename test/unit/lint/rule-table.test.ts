import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// Issue 27 deliverable 10: docs/decisions.md "Inference pipeline" names the one place of each rule of
// money and routing in a table `| rule | function | file |`. This test reads that table and checks
// every row against the code: the file exists, and it exports the named function (or class, constant,
// type), or, for `Class.member`, the exported class has that member; a SQL name (`svc_…`) must be
// defined by `CREATE OR REPLACE FUNCTION` in the named .sql file. A row that drifts from the code fails.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const DOC = join(ROOT, "docs/decisions.md");
const SECTION = /^## Inference pipeline\b/;

interface Row {
  rule: string;
  fn: string;
  file: string;
}

/** The rows of the first `| rule | function | file |` table under the section heading. */
function ruleRows(markdown: string): Row[] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((l) => SECTION.test(l));
  if (start < 0) throw new Error("no '## Inference pipeline' section in docs/decisions.md");
  let i = start + 1;
  while (i < lines.length && !lines[i]?.startsWith("## ")) {
    const cells = splitRow(lines[i] ?? "");
    if (cells && cells[0] === "rule" && cells[1] === "function" && cells[2] === "file") break;
    i++;
  }
  if (i >= lines.length || lines[i]?.startsWith("## ")) throw new Error("no `| rule | function | file |` table");
  const rows: Row[] = [];
  for (i += 2; i < lines.length; i++) {
    const cells = splitRow(lines[i] ?? "");
    if (!cells) break;
    const [rule, fn, file] = cells;
    if (rule === undefined || fn === undefined || file === undefined) throw new Error(`bad row: ${lines[i]}`);
    rows.push({ rule, fn: unquote(fn), file: unquote(file) });
  }
  return rows;
}

function splitRow(line: string): string[] | undefined {
  const t = line.trim();
  if (!t.startsWith("|") || !t.endsWith("|")) return undefined;
  return t
    .slice(1, -1)
    .split("|")
    .map((c) => c.trim());
}

function unquote(cell: string): string {
  const m = /^`([^`]+)`$/.exec(cell);
  if (!m?.[1]) throw new Error(`a function or file cell must be one \`code\` span: ${cell}`);
  return m[1];
}

function isExported(node: ts.Node): boolean {
  return (ts.getCombinedModifierFlags(node as ts.Declaration) & ts.ModifierFlags.Export) !== 0;
}

/** The names a module exports, with the member names of each exported class. */
function exportsOf(path: string, text: string): Map<string, Set<string>> {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const out = new Map<string, Set<string>>();
  for (const st of sf.statements) {
    if (ts.isExportDeclaration(st) && st.exportClause && ts.isNamedExports(st.exportClause)) {
      for (const e of st.exportClause.elements) out.set(e.name.text, new Set());
      continue;
    }
    if (!isExported(st)) continue;
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) if (ts.isIdentifier(d.name)) out.set(d.name.text, new Set());
    } else if (ts.isClassDeclaration(st) && st.name) {
      const members = new Set<string>();
      for (const m of st.members) if (m.name && ts.isIdentifier(m.name)) members.add(m.name.text);
      out.set(st.name.text, members);
    } else if (
      (ts.isFunctionDeclaration(st) ||
        ts.isInterfaceDeclaration(st) ||
        ts.isTypeAliasDeclaration(st) ||
        ts.isEnumDeclaration(st)) &&
      st.name
    ) {
      out.set(st.name.text, new Set());
    }
  }
  return out;
}

/** Why the row does not match the code, or undefined when it does. */
function checkRow(row: Row, read: (file: string) => string | undefined): string | undefined {
  const text = read(row.file);
  if (text === undefined) return `${row.file} does not exist`;
  if (row.file.endsWith(".sql")) {
    const re = new RegExp(`CREATE\\s+OR\\s+REPLACE\\s+FUNCTION\\s+${row.fn}\\s*\\(`, "i");
    return re.test(text) ? undefined : `${row.file} does not define ${row.fn}`;
  }
  const [name, member] = row.fn.split(".");
  if (!name) return `bad function cell ${row.fn}`;
  const exported = exportsOf(row.file, text);
  const members = exported.get(name);
  if (!members) return `${row.file} does not export ${name}`;
  if (member !== undefined && !members.has(member)) return `${name} in ${row.file} has no member ${member}`;
  return undefined;
}

const readRepo = (file: string) => {
  const p = join(ROOT, file);
  return existsSync(p) ? readFileSync(p, "utf8") : undefined;
};

describe("docs/decisions.md: the rule → file table names real code", () => {
  const rows = ruleRows(readFileSync(DOC, "utf8"));

  it("has the rules of money and routing", () => {
    expect(rows.length).toBeGreaterThanOrEqual(10);
    expect(new Set(rows.map((r) => r.rule)).size, "one row per rule").toBe(rows.length);
  });

  it.each(rows.map((r) => [r.rule, r] as const))("%s", (_rule, row) => {
    expect(checkRow(row, readRepo)).toBeUndefined();
  });

  it("the checker fails on a drifted row (missing file, missing export, missing member, missing SQL function)", () => {
    const good = rows[0] as Row;
    expect(checkRow({ ...good, file: "src/nowhere.ts" }, readRepo)).toMatch(/does not exist/);
    expect(checkRow({ rule: "x", fn: "noSuchFunction", file: "src/lib/money.ts" }, readRepo)).toMatch(
      /does not export/,
    );
    const src = "export class A { run() {} }\nfunction hidden() {}\nexport const k = 1;\n";
    const mem = (f: string) => (f === "m.ts" ? src : undefined);
    expect(checkRow({ rule: "x", fn: "A.run", file: "m.ts" }, mem)).toBeUndefined();
    expect(checkRow({ rule: "x", fn: "A.walk", file: "m.ts" }, mem)).toMatch(/no member walk/);
    expect(checkRow({ rule: "x", fn: "hidden", file: "m.ts" }, mem)).toMatch(/does not export/);
    expect(checkRow({ rule: "x", fn: "k", file: "m.ts" }, mem)).toBeUndefined();
    expect(checkRow({ rule: "x", fn: "svc_nothing", file: "prisma/functions/svc_eligible.sql" }, readRepo)).toMatch(
      /does not define/,
    );
  });
});
