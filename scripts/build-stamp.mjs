// What a production build is made of, as one hash: every file under src/ and workers/, the lockfile
// and the build scripts. Plain JavaScript: `scripts/ensure-build.mjs` runs it before `npm start`
// with no TypeScript loader.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
const INPUTS = ["src", "workers", "package-lock.json", "scripts/build.ts", "scripts/build-stamp.mjs"];

function filesUnder(path) {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((name) => (name === "generated" ? [] : filesUnder(join(path, name))));
}

/** A hash of the build's inputs (generated code is derived from prisma/schema.prisma: hashed instead). */
export function sourceStamp() {
  const h = createHash("sha256");
  for (const f of [...INPUTS, "prisma/schema.prisma"].flatMap((p) => filesUnder(join(ROOT, p)))) {
    h.update(`${relative(ROOT, f)}\n`);
    h.update(readFileSync(f));
  }
  return h.digest("hex");
}
