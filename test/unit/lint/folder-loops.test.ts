import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// No two folders under src/ import each other: when both lean on the other, neither can be read,
// tested or moved alone, and the layering says which way the dependency goes (docs/decisions.md
// "Files by concern and folder loops"). A folder is src/<layer>/<area> (src/domain/supply,
// src/http/routes); a file directly in src/<layer> belongs to src/<layer>, one directly in src to
// src. A folder and a folder nested in it (src/http and src/http/routes, src and any) are not
// compared: they are one area's parts, its assembler and shared helpers beside its sub-folders.
// Type-only imports count.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === "generated" && dir.endsWith("src") ? [] : sources(p);
    return /\.tsx?$/.test(name) ? [p] : [];
  });
}

/** The folder a file under src belongs to: its directory, cut to src/<layer>/<area>. */
function folderOf(file: string): string {
  return dirname(file).split("/").slice(0, 3).join("/");
}

/** Every module specifier a source imports or re-exports, type-only and dynamic imports included. */
function specifiers(path: string, text: string): string[] {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  const visit = (n: ts.Node) => {
    if ((ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier) {
      if (ts.isStringLiteral(n.moduleSpecifier)) out.push(n.moduleSpecifier.text);
    } else if (
      ts.isCallExpression(n) &&
      n.expression.kind === ts.SyntaxKind.ImportKeyword &&
      n.arguments[0] &&
      ts.isStringLiteral(n.arguments[0])
    ) {
      out.push(n.arguments[0].text);
    } else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && ts.isStringLiteral(n.argument.literal)) {
      out.push(n.argument.literal.text);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

const nested = (a: string, b: string) => a.startsWith(`${b}/`) || b.startsWith(`${a}/`);

/** Each pair of folders under `root`/src that import each other, with the imports each way. */
function folderLoops(root: string): { folders: [string, string]; imports: string[] }[] {
  const edges = new Map<string, string[]>();
  for (const path of sources(join(root, "src"))) {
    const from = relative(root, path).split("\\").join("/");
    for (const spec of specifiers(path, readFileSync(path, "utf8"))) {
      if (!spec.startsWith(".")) continue;
      const to = relative(root, resolve(dirname(path), spec))
        .split("\\")
        .join("/");
      if (!to.startsWith("src/")) continue;
      const [a, b] = [folderOf(from), folderOf(to)];
      if (a === b || nested(a, b)) continue;
      const key = `${a} ${b}`;
      edges.set(key, [...(edges.get(key) ?? []), `${from} → ${to.replace(/\.js$/, ".ts")}`]);
    }
  }
  const loops: { folders: [string, string]; imports: string[] }[] = [];
  for (const [key, there] of edges) {
    const [a = "", b = ""] = key.split(" ");
    const back = edges.get(`${b} ${a}`);
    if (a < b && back) loops.push({ folders: [a, b], imports: [...there, ...back] });
  }
  return loops;
}

describe("no two folders under src/ import each other", () => {
  it("holds for the tree", () => {
    expect(sources(join(ROOT, "src")).length).toBeGreaterThan(300);
    expect(folderLoops(ROOT)).toEqual([]);
  });

  it("finds a planted loop (a type-only import counts), and leaves a folder and its sub-folder alone", () => {
    const root = mkdtempSync(join(tmpdir(), "svc-folder-loops-"));
    try {
      const plant = (path: string, text: string) => {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      };
      plant("src/domain/a/one.ts", 'import { two } from "../b/two.js";\nexport const one = () => two;\n');
      plant("src/domain/b/two.ts", 'import type { Three } from "../a/deep/three.js";\nexport const two: Three = 2;\n');
      plant("src/domain/a/deep/three.ts", "export type Three = number;\n");
      // an assembler beside its sub-folder, which uses the layer's helpers: not a loop
      plant("src/http/app.ts", 'import { r } from "./routes/r.js";\nexport const app = r;\n');
      plant("src/http/routes/r.ts", 'import { h } from "../helper.js";\nexport const r = h;\n');
      plant("src/http/helper.ts", "export const h = 1;\n");
      // one way only: not a loop
      plant("src/domain/c/c.ts", 'export const c = () => import("../a/one.js");\n');
      expect(folderLoops(root)).toEqual([
        {
          folders: ["src/domain/a", "src/domain/b"],
          imports: ["src/domain/a/one.ts → src/domain/b/two.ts", "src/domain/b/two.ts → src/domain/a/deep/three.ts"],
        },
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("names folders at src/<layer>/<area>", () => {
    expect(folderOf("src/domain/inference/pipeline/admit.ts")).toBe("src/domain/inference");
    expect(folderOf("src/domain/supply/offers.ts")).toBe("src/domain/supply");
    expect(folderOf("src/http/app.ts")).toBe("src/http");
    expect(folderOf("src/config.ts")).toBe("src");
  });
});
