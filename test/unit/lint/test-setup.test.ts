import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// Issue 27 deliver 9: one app fixture, one helpers home. A test file does not start its own app: it
// takes `app` from the fixture (`appTest`, testkit/app-test.ts), or runs a further one with `withApp`
// (testkit/world.ts); and every helper lives in testkit/, so test/ holds test files and vitest's
// set-up files only. This test reads test/ and fails on a copied set-up or a helpers file there.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/** The calls that make a test file's own world; only testkit/ makes them. */
const SET_UP_CALLS = ["startTestApp", "isolatedWorld"];

/**
 * Test files that make one of those calls, and why the fixture does not fit. Each entry must still
 * hold (a stale one fails), so the list only shrinks.
 */
const SET_UP_EXCEPTIONS: Record<string, { call: string; why: string }> = {
  "test/integration/startup/startup.test.ts": {
    call: "isolatedWorld",
    why: "a bare database per describe for `src/main.ts` run as a child process (npm run dev, npm start): no test app",
  },
  "test/integration/adapters/redis-cluster.test.ts": {
    call: "isolatedWorld",
    why: "its world's prefix is chosen so that the gates share a cluster master with the maintenance queue (killing that master hits both), before the world starts on the cluster",
  },
  "test/integration/web/web-routes.test.ts": {
    call: "isolatedWorld",
    why: "a bare database for a production-mode runtime serving the built web app, which startTestApp (local mode) cannot start",
  },
};

/** Files under test/ that are not test files, besides vitest's set-up files, and why. */
const NON_TEST_EXCEPTIONS: Record<string, string> = {
  "test/integration/local-world/fixtures/chain-child.ts": "a program chain.test.ts runs as a child process",
  "test/integration/local-world/fixtures/dev-services-child.ts":
    "a program dev-services.test.ts runs as a child process (and SIGKILLs)",
};

/** vitest's globalSetup and setupFiles, as vitest.config.ts names them. */
function vitestSetupFiles(): string[] {
  const config = readFileSync(join(ROOT, "vitest.config.ts"), "utf8");
  const files: string[] = [];
  for (const key of ["globalSetup", "setupFiles"]) {
    const list = new RegExp(`${key}:\\s*\\[([^\\]]*)\\]`).exec(config)?.[1] ?? "";
    for (const m of list.matchAll(/"\.\/([^"]+)"/g)) files.push(m[1] as string);
  }
  return files;
}

/** Where a path under test/ breaks the one-helpers-home rule, or undefined. */
function misplaced(path: string, setupFiles: string[]): string | undefined {
  if (!/\.tsx?$/.test(path)) return undefined;
  if (setupFiles.includes(path) || NON_TEST_EXCEPTIONS[path]) return undefined;
  if (/(^|\/)helpers\.tsx?$/.test(path)) return "a helpers file: helpers live in testkit/";
  if (path.startsWith("test/support/"))
    return "test/support/ holds only vitest's set-up files: helpers live in testkit/";
  if (!/\.test\.tsx?$/.test(path)) return "not a test file: helpers live in testkit/";
  return undefined;
}

/** The set-up calls a source text makes: `startTestApp(…)`, `isolatedWorld()`, also as `x.startTestApp(…)`. */
function setUpCalls(path: string, text: string): { call: string; line: number }[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: { call: string; line: number }[] = [];
  const walk = (n: ts.Node): void => {
    if (ts.isCallExpression(n)) {
      const callee = n.expression;
      const name = ts.isIdentifier(callee)
        ? callee.text
        : ts.isPropertyAccessExpression(callee)
          ? callee.name.text
          : undefined;
      if (name && SET_UP_CALLS.includes(name)) {
        found.push({ call: name, line: file.getLineAndCharacterOfPosition(n.getStart(file)).line + 1 });
      }
    }
    ts.forEachChild(n, walk);
  };
  walk(file);
  return found;
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push(relative(ROOT, p).split("\\").join("/"));
  }
  return out;
}

describe("test/: one app fixture, one helpers home", () => {
  const files = filesUnder(join(ROOT, "test"));
  const setupFiles = vitestSetupFiles();

  it("vitest's set-up files are where vitest.config.ts says", () => {
    expect(setupFiles).toEqual(["test/support/global-setup.ts", "test/support/setup.ts"]);
    for (const f of setupFiles) expect(files).toContain(f);
  });

  it("holds test files and vitest's set-up only: no helpers.ts, no helper in test/support/", () => {
    const wrong = files.flatMap((f) => {
      const why = misplaced(f, setupFiles);
      return why ? [`${f}: ${why}`] : [];
    });
    expect(wrong).toEqual([]);
    for (const f of Object.keys(NON_TEST_EXCEPTIONS)) expect(files, "a stale exception").toContain(f);
  });

  it("no test file starts its own app or database (the fixture does), beyond the listed exceptions", () => {
    const calls = files
      .filter((f) => /\.tsx?$/.test(f))
      .flatMap((f) => setUpCalls(f, readFileSync(join(ROOT, f), "utf8")).map((c) => ({ file: f, ...c })));
    const unexpected = calls.filter((c) => SET_UP_EXCEPTIONS[c.file]?.call !== c.call);
    expect(unexpected.map((c) => `${c.file}:${c.line}: ${c.call}(`)).toEqual([]);
    for (const [file, { call }] of Object.entries(SET_UP_EXCEPTIONS)) {
      expect(
        calls.some((c) => c.file === file && c.call === call),
        `${file} no longer calls ${call}: drop its exception`,
      ).toBe(true);
    }
  });

  it("catches a copy: the set-up the identity tests used to repeat, and helpers beside the tests", () => {
    const copied = `let app: TestApp;
      beforeAll(async () => {
        const w = await isolatedWorld();
        app = await startTestApp({ databaseUrl: w.databaseUrl, prefix: w.prefix });
      });`;
    expect(setUpCalls("x.test.ts", copied).map((c) => c.call)).toEqual(["isolatedWorld", "startTestApp"]);
    expect(setUpCalls("y.test.ts", "const a = await harness.startTestApp(opts);")).toHaveLength(1);
    // the fixture's own words are not a set-up
    expect(setUpCalls("z.test.ts", 'test("x", async ({ app }) => { await withApp({}, async () => {}); });')).toEqual(
      [],
    );
    expect(misplaced("test/integration/identity/helpers.ts", setupFiles)).toMatch(/helpers file/);
    expect(misplaced("test/support/funding.ts", setupFiles)).toMatch(/test\/support/);
    expect(misplaced("test/integration/supply/world.ts", setupFiles)).toMatch(/not a test file/);
    expect(misplaced("test/integration/supply/offers.test.ts", setupFiles)).toBeUndefined();
  });
});
