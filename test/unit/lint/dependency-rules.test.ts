import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// `npm run lint` runs the dependency checker with the repo's config (package.json "lint:deps");
// here the same command runs on a copy of the tree, clean and then with violations planted.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const FOLDERS = ["src", "workers", "testkit", "bench", "test", "scripts"];
const FILES = ["package.json", "tsconfig.json", ".dependency-cruiser.cjs"];
const DEPCRUISE = join(ROOT, "node_modules/dependency-cruiser/bin/dependency-cruise.mjs");

function cruise(cwd: string): { status: number | null; output: string } {
  const r = spawnSync(
    process.execPath,
    [DEPCRUISE, "--config", ".dependency-cruiser.cjs", "--output-type", "err", ...FOLDERS],
    { cwd, encoding: "utf8" },
  );
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

function plant(copy: string, path: string, text: string): void {
  mkdirSync(join(copy, path, ".."), { recursive: true });
  writeFileSync(join(copy, path), text);
}

// hang guards, not timings: each run of the checker takes about 10 s alone, 50 s under load
describe("npm run lint: the layering and cycle rules", { timeout: 240_000 }, () => {
  let copy = "";

  beforeAll(() => {
    copy = mkdtempSync(join(tmpdir(), "svc-deprules-"));
    for (const f of FOLDERS) cpSync(join(ROOT, f), join(copy, f), { recursive: true });
    for (const f of FILES) cpSync(join(ROOT, f), join(copy, f));
    symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"), "dir");
  });

  afterAll(() => {
    if (copy) rmSync(copy, { recursive: true, force: true });
  });

  it("the tree as it is passes", () => {
    const r = cruise(copy);
    expect(r.output).toContain("no dependency violations found");
    expect(r.status).toBe(0);
  });

  it("a domain→http import, a type-only domain→graphql import, a cycle and bench→test each fail", () => {
    plant(
      copy,
      "src/domain/zz-planted.ts",
      'import { errorPayload } from "../http/error-response.js";\nexport const x = errorPayload;\n',
    );
    plant(
      copy,
      "src/domain/zz-planted-type.ts",
      'import type { GraphQLContext } from "../graphql/context.js";\nexport type X = GraphQLContext;\n',
    );
    plant(copy, "src/lib/zz-cycle-a.ts", 'import { b } from "./zz-cycle-b.js";\nexport const a = () => b;\n');
    plant(copy, "src/lib/zz-cycle-b.ts", 'import { a } from "./zz-cycle-a.js";\nexport const b = () => a;\n');
    plant(
      copy,
      "bench/zz-planted.ts",
      'import { setup } from "../test/support/global-setup.js";\nexport const s = setup;\n',
    );

    const r = cruise(copy);
    expect(r.status).not.toBe(0);
    expect(r.output).toMatch(/domain-not-to-transports: src\/domain\/zz-planted\.ts → src\/http\/error-response\.ts/);
    expect(r.output).toMatch(/domain-not-to-transports: src\/domain\/zz-planted-type\.ts → src\/graphql\/context\.ts/);
    expect(r.output).toMatch(/no-cycles: src\/lib\/zz-cycle-(a|b)\.ts/);
    expect(r.output).toMatch(/bench-not-to-test: bench\/zz-planted\.ts → test\/support\/global-setup\.ts/);
    // nothing else: the planted files are the only violations (the cycle is one)
    expect(r.output).toMatch(/x 4 dependency violations/);
  });

  it("production code that reaches the local world or a dev dependency fails, by any path", () => {
    const fresh = mkdtempSync(join(tmpdir(), "svc-deprules-dev-"));
    try {
      for (const f of FOLDERS) cpSync(join(ROOT, f), join(fresh, f), { recursive: true });
      for (const f of FILES) cpSync(join(ROOT, f), join(fresh, f));
      symlinkSync(join(ROOT, "node_modules"), join(fresh, "node_modules"), "dir");
      // an adapter that imports the local chain: reachable from the production entry through the runtime
      plant(fresh, "src/adapters/zz-planted-local.ts", 'export { startLocalChain } from "../local/chain/index.js";\n');
      plant(
        fresh,
        "src/runtime.ts",
        `${readFileSync(join(ROOT, "src/runtime.ts"), "utf8")}\nexport { startLocalChain } from "./adapters/zz-planted-local.js";\n`,
      );
      // a transport that loads Vite (a dev dependency) lazily
      plant(fresh, "src/http/zz-planted-vite.ts", 'export const v = () => import("vite");\n');
      const r = cruise(fresh);
      expect(r.status).not.toBe(0);
      expect(r.output).toMatch(
        /only-the-dev-entry-to-local: src\/adapters\/zz-planted-local\.ts → src\/local\/chain\/index\.ts/,
      );
      expect(r.output).toMatch(/production-entry-not-to-dev-only: src\/main\.ts → src\/local\//);
      expect(r.output).toMatch(/production-not-to-dev-deps: src\/http\/zz-planted-vite\.ts → \S*node_modules\/vite\//);
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});
