import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Issue 27's bar: no file under src/domain is over 400 lines, so each stays one concern a newcomer
// can read (docs/decisions.md "Inference pipeline", "Files by concern"). Split a file that grows
// past it by concern rather than raising the bar.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const DOMAIN = join(ROOT, "src", "domain");
const MAX_DOMAIN_FILE_LINES = 400;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sources(p);
    return /\.tsx?$/.test(name) ? [p] : [];
  });
}

/** Lines as an editor counts them (a final newline ends the last line; `wc -l` for formatted files). */
function lines(text: string): number {
  if (text === "") return 0;
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

describe(`no file under src/domain is over ${MAX_DOMAIN_FILE_LINES} lines`, () => {
  it("holds for every file", () => {
    const files = sources(DOMAIN);
    expect(files.length).toBeGreaterThan(50);
    const over = files
      .map((p) => ({ file: relative(ROOT, p), lines: lines(readFileSync(p, "utf8")) }))
      .filter((f) => f.lines > MAX_DOMAIN_FILE_LINES);
    expect(over).toEqual([]);
  });

  it("counts lines as an editor does (a final newline ends the last line)", () => {
    expect(lines("")).toBe(0);
    expect(lines("a\n")).toBe(1);
    expect(lines("a\nb")).toBe(2);
    expect(lines("x\n".repeat(MAX_DOMAIN_FILE_LINES + 1))).toBe(MAX_DOMAIN_FILE_LINES + 1);
  });
});
