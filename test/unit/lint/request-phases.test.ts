import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// A request as explicit phases (docs/decisions.md "Phases that do not reach into each other"): what
// admission decided is read-only to every later phase, an attempt is read-only once admitted, and
// no phase keeps an "ended" flag on the request. TypeScript enforces `readonly` at each write; this
// test keeps the declarations from losing it.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const PIPELINE = "src/domain/inference/pipeline";

/** The members of `interface NAME` in a source text whose declaration is not `readonly`. */
function writableMembers(file: string, name: string, text = readFileSync(`${ROOT}/${file}`, "utf8")): string[] {
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found = src.statements.find(
    (s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name,
  );
  if (!found) throw new Error(`${file} declares no interface ${name}`);
  return found.members
    .filter((m) => ts.isPropertySignature(m))
    .filter((m) => !(ts.getCombinedModifierFlags(m as ts.Declaration) & ts.ModifierFlags.Readonly))
    .map((m) => m.name?.getText(src) ?? "?");
}

describe("request phases", () => {
  it("every field of an admitted request is readonly", () => {
    expect(writableMembers(`${PIPELINE}/session.ts`, "InferenceSession")).toEqual([]);
  });

  it("every field of an attempt is readonly", () => {
    expect(writableMembers(`${PIPELINE}/attempt.ts`, "Attempt")).toEqual([]);
  });

  it("the check sees a writable field", () => {
    const probe = "export interface Probe {\n  readonly id: string;\n  plan: number;\n}\n";
    expect(writableMembers("probe.ts", "Probe", probe)).toEqual(["plan"]);
  });

  it("no request carries a done flag or has its attempt set back to null", () => {
    const session = readFileSync(`${ROOT}/${PIPELINE}/session.ts`, "utf8");
    expect(session).not.toMatch(/^\s*(readonly\s+)?done\??:/m);
    for (const file of ["pipeline/attempts.ts", "pipeline/pipeline.ts", "settlement/ending.ts", "routing/lanes.ts"]) {
      const text = readFileSync(`${ROOT}/src/domain/inference/${file}`, "utf8");
      expect(text, file).not.toMatch(/\.attempt\s*=\s*null|\.done\s*=/);
    }
  });
});
