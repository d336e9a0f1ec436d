import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// The domain is transport-free: it answers data, and the transports (src/http, src/mcp, the
// adapters for outgoing calls) turn it into HTTP headers. No module under src/domain writes a header
// (`setHeader`, `writeHead`, `res.header`…), builds a header map (an object key or an assignment
// named like a header: `"X-Svc-Cost-Usdc": …`, `h["content-type"] = …`, `new Headers(…)`) or holds
// one of the service's own header names (`"X-Svc-…"`). Reading another service's answer headers is
// not building them and is allowed.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/**
 * Domain files allowed to build headers: none. The inference pipeline hands its answers to the
 * transport as data (domain/inference/pipeline/answer-facts.ts) and http/answer-headers.ts renders them.
 * Kept as a list so a new exception has to be written here, where a review sees it.
 */
const DOMAIN_HEADER_OFFENDERS: readonly string[] = [];

/** a hyphenated token (`X-Svc-Request-Id`, `content-type`, `webhook-id`) or a one-word standard header */
const HEADER_NAME = /^([A-Za-z][A-Za-z0-9]*(-[A-Za-z0-9]+)+|authorization|location|link|vary|etag|allow|cookie)$/i;
const HEADER_WRITES = new Set(["setHeader", "writeHead", "appendHeader", "header", "setHeaders"]);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sources(p);
    return /\.tsx?$/.test(name) ? [p] : [];
  });
}

const literal = (n: ts.Node | undefined): string | undefined =>
  n && (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) ? n.text : undefined;

/** What one source does to build HTTP headers, as `line: what`. */
function headerBuilding(path: string, text: string): string[] {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const at = (n: ts.Node, what: string) =>
    found.push(`${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}: ${what}`);
  const visit = (n: ts.Node) => {
    if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression)) {
      if (HEADER_WRITES.has(n.expression.name.text)) at(n, `${n.expression.name.text}()`);
    } else if (ts.isNewExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === "Headers") {
      at(n, "new Headers()");
    } else if (ts.isPropertyAssignment(n)) {
      const key = literal(n.name) ?? (ts.isComputedPropertyName(n.name) ? literal(n.name.expression) : undefined);
      if (key !== undefined && HEADER_NAME.test(key)) at(n, `key "${key}"`);
    } else if (
      ts.isBinaryExpression(n) &&
      n.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
      ts.isElementAccessExpression(n.left)
    ) {
      const key = literal(n.left.argumentExpression);
      if (key !== undefined && HEADER_NAME.test(key)) at(n, `assigns ["${key}"]`);
    } else if (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) {
      if (/^x-svc-/i.test(n.text) && !ts.isPropertyAssignment(n.parent)) at(n, `"${n.text}"`);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

/** The domain files under `root` that build headers, with what they do. */
function offenders(root: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const path of sources(join(root, "src", "domain"))) {
    const found = headerBuilding(path, readFileSync(path, "utf8"));
    if (found.length > 0) out[relative(root, path).split("\\").join("/")] = found;
  }
  return out;
}

describe("no domain module builds HTTP headers", () => {
  it("holds for every domain file", () => {
    expect(sources(join(ROOT, "src", "domain")).length).toBeGreaterThan(100);
    const found = offenders(ROOT);
    const beyond = Object.fromEntries(Object.entries(found).filter(([f]) => !DOMAIN_HEADER_OFFENDERS.includes(f)));
    expect(beyond).toEqual({});
  });

  it("allows no exception", () => {
    expect(DOMAIN_HEADER_OFFENDERS).toEqual([]);
  });

  it("finds each way of building headers in a planted file, and not a read of an answer's headers", () => {
    const root = mkdtempSync(join(tmpdir(), "svc-domain-headers-"));
    try {
      const plant = (path: string, text: string) => {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      };
      plant(
        "src/domain/a/writes.ts",
        [
          'export const a = (res: { setHeader(n: string, v: string): void }) => res.setHeader("Retry-After", "1");',
          'export const b = { "content-type": "application/json", model: "m", "X-Svc-Cost-Usdc": "1" };',
          'export const c = (h: Record<string, string>) => { h["webhook-id"] = "1"; };',
          'export const d = "X-Svc-Support-Reference";',
          'export const e = new Headers({ accept: "x" });',
          "",
        ].join("\n"),
      );
      plant(
        "src/domain/b/reads.ts",
        'export const r = (h: Record<string, string>) => h["content-type"] === "video/mp4";\nexport const o = { model: "m", variants: 1 };\n',
      );
      expect(offenders(root)).toEqual({
        "src/domain/a/writes.ts": [
          "1: setHeader()",
          '2: key "content-type"',
          '2: key "X-Svc-Cost-Usdc"',
          '3: assigns ["webhook-id"]',
          '4: "X-Svc-Support-Reference"',
          "5: new Headers()",
        ],
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
