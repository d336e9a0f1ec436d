import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Comments in src/ say why, not which issue asked for the code: "issue 30" tells a reader nothing
// the code and docs/decisions.md do not say better, and it goes stale as issues close. docs/ may
// keep issue references. This test reads src/ (generated code aside) and fails on "issue N".
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/** "issue 30", "Issues 28 and 38", "issue #5"; not a URL's `/issues/2075` */
const ISSUE_REFERENCE = /\bissues?\s+#?\d/i;

/**
 * Files that still name issues, each being rewritten on its own branch (the inference folder).
 * Each entry must still hold (a stale one fails), so the list only shrinks.
 */
const NOT_YET: string[] = [];

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (name !== "generated") out.push(...filesUnder(p));
    } else if (/\.(tsx?|md|sql)$/.test(name)) out.push(relative(ROOT, p).split("\\").join("/"));
  }
  return out;
}

/** The lines of a text that name an issue, as `file:line: text`. */
function issueLines(file: string, text: string): string[] {
  return text.split("\n").flatMap((l, i) => (ISSUE_REFERENCE.test(l) ? [`${file}:${i + 1}: ${l.trim()}`] : []));
}

describe("src/ comments say why, not which issue", () => {
  const hits = filesUnder(join(ROOT, "src")).flatMap((f) => issueLines(f, readFileSync(join(ROOT, f), "utf8")));

  it('no file in src/ names an issue ("issue N"), beyond the listed ones', () => {
    expect(hits.filter((h) => !NOT_YET.some((f) => h.startsWith(`${f}:`)))).toEqual([]);
  });

  it("each listed file still names one (drop it from the list once it does not)", () => {
    for (const f of NOT_YET)
      expect(
        hits.some((h) => h.startsWith(`${f}:`)),
        f,
      ).toBe(true);
  });

  it("catches a reference, not a URL", () => {
    expect(issueLines("a.ts", "// a key's spend counts (issue 38)")).toEqual([
      "a.ts:1: // a key's spend counts (issue 38)",
    ]);
    expect(issueLines("b.ts", " * x402 discovery (Issues 29 and 41)")).toHaveLength(1);
    expect(issueLines("c.ts", "// see issue #5")).toHaveLength(1);
    expect(issueLines("d.ts", "// followed (github.com/redis/ioredis/issues/2075)")).toEqual([]);
    expect(issueLines("e.ts", "// the issuer's key")).toEqual([]);
  });
});
