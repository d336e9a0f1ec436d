import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// A request's ending inserts rows that name accounts, keys, offers and payments. The payment is named
// by foreign key, whose check takes FOR KEY SHARE on its row, which only FOR UPDATE (and a key change)
// blocks; the others were too, until migration append_names_without_locks. A FOR UPDATE on such a row
// made an ending wait for, and once deadlock with, a payment's claim (docs/decisions.md "Account locks
// do not hold up endings"). Lock those rows FOR NO KEY UPDATE, so a foreign key put back is harmless.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const NAMED_BY_AN_ENDING = new Set(["accounts", "api_keys", "offers", "upstream_keys", "request_payments"]);

function filesUnder(dir: string, ext: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(ext))
    .map((e) => join(e.parentPath, e.name))
    .filter((f) => !f.includes("/generated/"));
}

/** The tables a text locks FOR UPDATE (the last FROM before each lock clause). */
function lockedForUpdate(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/(NO KEY )?UPDATE\b/gi)) {
    const before = text.slice(Math.max(0, (m.index ?? 0) - 4), m.index ?? 0);
    if (m[1] || !/FOR\s$/i.test(before)) continue;
    const froms = [...text.slice(Math.max(0, (m.index ?? 0) - 400), m.index).matchAll(/\bFROM\s+(?:ONLY\s+)?(\w+)/gi)];
    const table = froms.at(-1)?.[1];
    if (table) found.push(table.toLowerCase());
  }
  return found;
}

describe("rows an ending names are never locked FOR UPDATE", () => {
  it("in src/ and the stored functions", () => {
    const offenders: string[] = [];
    for (const f of [...filesUnder("src", ".ts"), ...filesUnder("prisma/functions", ".sql")]) {
      for (const t of lockedForUpdate(readFileSync(f, "utf8"))) {
        if (NAMED_BY_AN_ENDING.has(t)) offenders.push(`${f.slice(ROOT.length)}: ${t}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("the check sees one, and lets FOR NO KEY UPDATE and other tables pass", () => {
    expect(lockedForUpdate("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE")).toEqual(["accounts"]);
    expect(lockedForUpdate("SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE")).toEqual([]);
    expect(lockedForUpdate("SELECT id FROM video_jobs WHERE id = $1 FOR UPDATE SKIP LOCKED")).toEqual(["video_jobs"]);
    expect(lockedForUpdate("UPDATE accounts SET x = 1")).toEqual([]);
  });
});
