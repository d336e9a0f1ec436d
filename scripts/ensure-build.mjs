// Runs before `npm start`, `start:api` and `start:worker`: in a source tree, builds when the build is
// missing or older than the sources (`npm run build`), so a clean clone starts with `npm ci && npm
// start`; in a production install (no src/, only the build output) it does nothing. Several
// processes starting at once build once (a lock directory), the others wait for it.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { ROOT, sourceStamp } from "./build-stamp.mjs";

if (!existsSync(join(ROOT, "src", "main.ts"))) process.exit(0); // a production install: run what is there

const BUILD_INFO = join(ROOT, "dist", "server", "build.json");
const LOCK = join(ROOT, "dist", ".build-lock");
const current = () => {
  try {
    return JSON.parse(readFileSync(BUILD_INFO, "utf8")).sources === sourceStamp();
  } catch {
    return false;
  }
};
if (current()) process.exit(0);

mkdirSync(join(ROOT, "dist"), { recursive: true });
const deadline = Date.now() + 300_000;
for (;;) {
  try {
    mkdirSync(LOCK);
    break;
  } catch {
    // a lock older than 5 minutes was left by a build that died
    if (existsSync(LOCK) && Date.now() - statSync(LOCK).mtimeMs > 300_000)
      rmSync(LOCK, { recursive: true, force: true });
    if (Date.now() > deadline) throw new Error("waited 5 minutes for another build (dist/.build-lock)");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
  }
}
try {
  if (!current()) {
    process.stderr.write("the build is missing or older than the sources: npm run build\n");
    const r = spawnSync(process.execPath, ["--import", "tsx", "scripts/build.ts"], { cwd: ROOT, stdio: "inherit" });
    if (r.status !== 0) process.exit(r.status ?? 1);
  }
} finally {
  rmSync(LOCK, { recursive: true, force: true });
}
