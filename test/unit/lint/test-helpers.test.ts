import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// One fixture front door and one copy of each helper. Test files start their world through `appTest`
// (testkit/app-test.ts) only, and a helper that several test files need lives once in testkit/:
// copies drift (the "empty the offer book" step had grown 18 copies, one of them ending offers at a
// different time). This test reads test/ and fails when the old entry point, a copied helper or a
// hand-made empty book comes back.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
/** this file: it spells out what it looks for */
const SELF = "test/unit/lint/test-helpers.test.ts";

/** The entry point that `appTest` replaced; nothing may import it again. */
const OLD_ENTRY = "testkit/market-world";

/**
 * Helpers that test files used to copy, now defined once in testkit/ (the module in the value). A
 * test file that defines one of these names again is a copy: import it instead.
 */
const MOVED_HELPERS: Record<string, string> = {
  emptyBook: "testkit/market.ts",
  expireLiveVideoJobs: "testkit/market.ts",
  reservedOf: "testkit/market.ts",
  payableOf: "testkit/market.ts",
  heldOf: "testkit/market.ts",
  withdrawSupply: "testkit/market.ts",
  simVideoBurn: "testkit/market.ts",
  postWithKey: "testkit/actors.ts",
  mintAgentKey: "testkit/actors.ts",
  nothingCreated: "testkit/identity.ts",
  says: "testkit/doc-examples.ts",
  flat: "testkit/doc-examples.ts",
  frames: "testkit/sse.ts",
  waitForAsync: "testkit/spawn.ts",
  chatBody: "testkit/pay-per-request.ts",
  signupCall: "testkit/funding.ts",
  sendTestEvent: "testkit/webhooks.ts",
  hasWebhookId: "testkit/webhooks.ts",
  chainGateway: "testkit/funding.ts",
};

/** A function body shorter than this (whitespace and comments removed) is too small to call a copy. */
const MIN_COPY_CHARS = 80;

interface Definition {
  file: string;
  name: string;
  line: number;
  /** its parameters and body, whitespace and comments removed */
  body: string;
}

/** The top-level functions of a source text: `function f`, `const f = (…) =>`, `const f = function`. */
function definitions(file: string, text: string): Definition[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: Definition[] = [];
  // the parameters and body only: a copy under another name is still a copy
  const add = (name: string, node: ts.Node, from: number) =>
    out.push({
      file,
      name,
      line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1,
      body: text
        .slice(from, node.end)
        .replace(/\/\/.*$/gm, "")
        .replace(/\/\*[\s\S]*?\*\//g, "")
        .replace(/\s+/g, ""),
    });
  for (const s of source.statements) {
    if (ts.isFunctionDeclaration(s) && s.name) add(s.name.text, s, s.parameters.pos);
    if (ts.isVariableStatement(s)) {
      for (const d of s.declarationList.declarations) {
        const init = d.initializer;
        if (ts.isIdentifier(d.name) && init && (ts.isArrowFunction(init) || ts.isFunctionExpression(init))) {
          add(d.name.text, d, init.getStart(source));
        }
      }
    }
  }
  return out;
}

/** Where a test file empties the offer book itself instead of calling `emptyBook`. */
function handMadeEmptyBook(text: string): boolean {
  const flat = text.replace(/\s+/g, "");
  return (
    flat.includes('offer.updateMany({where:{status:{in:["active","paused"]}},data:{status:"cancelled"') ||
    /DELETE\s+FROM\s+"?offers"?\s*(;|`|"|'|$)/i.test(text) ||
    /UPDATE\s+"?offers"?\s+SET\s+status\s*=\s*'cancelled'\s*(;|`|"|'|$)/i.test(text)
  );
}

/** Same bodies defined in more than one file, as `name (file:line, file:line)`. */
function copies(defs: Definition[]): string[] {
  const byBody = new Map<string, Definition[]>();
  for (const d of defs) {
    if (d.body.length < MIN_COPY_CHARS) continue;
    byBody.set(d.body, [...(byBody.get(d.body) ?? []), d]);
  }
  return [...byBody.values()]
    .filter((ds) => new Set(ds.map((d) => d.file)).size > 1)
    .map((ds) => `${ds[0]?.name} (${ds.map((d) => `${d.file}:${d.line}`).join(", ")})`);
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else if (/\.tsx?$/.test(name)) out.push(relative(ROOT, p).split("\\").join("/"));
  }
  return out;
}

describe("test/: one fixture front door, one copy of each helper", () => {
  const files = filesUnder(join(ROOT, "test")).filter((f) => f !== SELF);
  const texts = new Map(files.map((f) => [f, readFileSync(join(ROOT, f), "utf8")]));
  const defs = files.flatMap((f) => definitions(f, texts.get(f) ?? ""));

  it("the old entry point is gone and no test file imports it", () => {
    expect(existsSync(join(ROOT, `${OLD_ENTRY}.ts`))).toBe(false);
    expect(files.filter((f) => (texts.get(f) ?? "").includes(OLD_ENTRY))).toEqual([]);
  });

  it("no function body is defined in two test files", () => {
    expect(copies(defs)).toEqual([]);
  });

  it("no test file defines a helper that moved to testkit/", () => {
    const again = defs.filter((d) => MOVED_HELPERS[d.name]).map((d) => `${d.file}:${d.line}: ${d.name}`);
    expect(again).toEqual([]);
    for (const [name, home] of Object.entries(MOVED_HELPERS)) {
      expect(readFileSync(join(ROOT, home), "utf8"), `${home} exports ${name}`).toMatch(
        new RegExp(`export (async function|function|const) ${name}\\b`),
      );
    }
  });

  it("no test file empties the offer book by hand (testkit's emptyBook does)", () => {
    expect(files.filter((f) => handMadeEmptyBook(texts.get(f) ?? ""))).toEqual([]);
  });

  it("catches a copy: a repeated body, a moved name, a hand-made empty book", () => {
    const body = `async function heldBy(app: TestApp, accountId: string) {
      return (await app.rt.db.account.findUniqueOrThrow({ where: { id: accountId } })).supplierHeldMicroUsdc;
    }`;
    const twice = [...definitions("a.test.ts", body), ...definitions("b.test.ts", `// a copy\n${body}`)];
    expect(copies(twice)).toEqual(["heldBy (a.test.ts:1, b.test.ts:2)"]);
    const renamed = definitions("d.test.ts", body.replace("heldBy", "supplierHeld"));
    expect(copies([...definitions("a.test.ts", body), ...renamed])).toHaveLength(1);
    expect(copies(definitions("a.test.ts", body))).toEqual([]);
    const arrow = definitions("c.test.ts", "const says = (path: string) => expect(path).toBeTruthy();");
    expect(arrow.map((d) => d.name).filter((n) => MOVED_HELPERS[n])).toEqual(["says"]);
    expect(
      handMadeEmptyBook(`beforeEach(async () => {
        await world.app.rt.db.offer.updateMany({
          where: { status: { in: ["active", "paused"] } },
          data: { status: "cancelled", endedAt: new Date() },
        });
      });`),
    ).toBe(true);
    expect(handMadeEmptyBook("await db.$executeRawUnsafe(`DELETE FROM offers`);")).toBe(true);
    expect(handMadeEmptyBook("await db.$executeRaw`UPDATE offers SET status = 'cancelled'`;")).toBe(true);
    // one offer cancelled on purpose is not an empty book
    expect(
      handMadeEmptyBook(
        'await db.offer.update({ where: { id }, data: { status: "cancelled", endedAt: new Date() } });',
      ),
    ).toBe(false);
  });
});
