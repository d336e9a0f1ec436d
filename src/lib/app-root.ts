import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The service's root folder: the nearest folder above this module that holds `package.json`. The
 * same answer from the sources (`src/lib/app-root.ts`) and from the compiled bundle
 * (`dist/server/main.js`), so files read at run time (prisma/, docs/public/, dist/web/) resolve
 * alike in `npm run dev`, the tests and a production install.
 */
function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

export const APP_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));

/** A path under the root. */
export function appPath(...parts: string[]): string {
  return join(APP_ROOT, ...parts);
}

/** The built web app (`npm run build`); served by production processes. */
export const WEB_DIST_DIR = appPath("dist", "web");

/** `/app` from `http://host/app` (WEB_URL's path); an empty path serves the app at `/app`. */
export function webMountPath(webUrl: string): string {
  const path = new URL(webUrl).pathname.replace(/\/+$/, "");
  return path === "" ? "/app" : path;
}
