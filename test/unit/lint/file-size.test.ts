import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// No file under src/ is over 400 lines, so each stays one concern a newcomer can read in one sitting
// (docs/decisions.md "Files by concern and folder loops"). Split a file that grows past it by
// concern rather than raising the bar. Only generated code and vendored references are exempt, each
// named below.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const MAX_FILE_LINES = 400;

/** Paths (a folder ends in `/`) written by a tool, not by hand: exempt from the bar. */
const GENERATED_OR_VENDORED: readonly string[] = [
  // Prisma's client and the Pothos types (`prisma generate`)
  "src/generated/",
  // the compiler's ABI of src/local/chain/Usdc.sol (a test compares the two)
  "src/local/chain/usdc-local-abi.ts",
  // gql.tada's introspection of schema.graphql (`npm run web:graphql-env`)
  "src/web/app/graphql-env.d.ts",
];

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

/** Lines as an editor counts them (a final newline ends the last line; `wc -l` for formatted files). */
function lines(text: string): number {
  if (text === "") return 0;
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

function exempt(file: string, list: readonly string[]): boolean {
  return list.some((p) => (p.endsWith("/") ? file.startsWith(p) : file === p));
}

/** Every file under `root`/src over `max` lines, outside the exempt paths (paths relative to `root`). */
function filesOver(root: string, max: number, list: readonly string[]): { file: string; lines: number }[] {
  return files(join(root, "src"))
    .map((p) => relative(root, p).split("\\").join("/"))
    .filter((file) => !exempt(file, list))
    .map((file) => ({ file, lines: lines(readFileSync(join(root, file), "utf8")) }))
    .filter((f) => f.lines > max);
}

describe(`no file under src/ is over ${MAX_FILE_LINES} lines`, () => {
  it("holds for every file, generated code and vendored references aside", () => {
    expect(files(join(ROOT, "src")).length).toBeGreaterThan(300);
    expect(filesOver(ROOT, MAX_FILE_LINES, GENERATED_OR_VENDORED)).toEqual([]);
  });

  it("every exempt path exists (a stale entry would exempt whatever takes its name)", () => {
    for (const p of GENERATED_OR_VENDORED) expect(statSync(join(ROOT, p)).isDirectory()).toBe(p.endsWith("/"));
  });

  it("fails on a file one line over the bar, passes one at it, and skips only the exempt paths", () => {
    const root = mkdtempSync(join(tmpdir(), "svc-file-size-"));
    try {
      const plant = (path: string, n: number) => {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), "x;\n".repeat(n));
      };
      plant("src/domain/a/over.ts", MAX_FILE_LINES + 1);
      plant("src/domain/a/at.ts", MAX_FILE_LINES);
      plant("src/web/app/over.css", MAX_FILE_LINES + 1);
      plant("src/generated/big.ts", 5_000);
      plant("src/local/chain/usdc-local-abi.ts", 5_000);
      expect(filesOver(root, MAX_FILE_LINES, GENERATED_OR_VENDORED)).toEqual([
        { file: "src/domain/a/over.ts", lines: MAX_FILE_LINES + 1 },
        { file: "src/web/app/over.css", lines: MAX_FILE_LINES + 1 },
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("counts lines as an editor does (a final newline ends the last line)", () => {
    expect(lines("")).toBe(0);
    expect(lines("a\n")).toBe(1);
    expect(lines("a\nb")).toBe(2);
    expect(lines("x\n".repeat(MAX_FILE_LINES + 1))).toBe(MAX_FILE_LINES + 1);
  });
});
