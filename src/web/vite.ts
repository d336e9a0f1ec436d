import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { InlineConfig, ViteDevServer } from "vite";
import { APP_ROOT, WEB_DIST_DIR, webMountPath } from "../lib/app-root.js";
import { isAlive } from "../lib/process.js";

/**
 * The web app's build (Node side). The browser code lives in `src/web/app/` (its own entry,
 * `index.html`, and its own tsconfig); this module is what the server and `npm run web:build` use to
 * build or serve it. Vite and its React plugin are loaded lazily: an API process that never serves
 * the app never loads them (docs/decisions.md "Web app").
 */

export const WEB_APP_ROOT = fileURLToPath(new URL("./app/", import.meta.url));
const REPO_ROOT = APP_ROOT;

export { WEB_DIST_DIR, webMountPath };

const STAMP_FILE = ".build-stamp";

async function baseConfig(mountPath: string): Promise<InlineConfig> {
  const { default: react } = await import("@vitejs/plugin-react");
  return {
    configFile: false,
    envDir: false,
    root: WEB_APP_ROOT,
    base: `${mountPath}/`,
    plugins: [react()],
    logLevel: "warn",
    clearScreen: false,
    cacheDir: join(REPO_ROOT, "node_modules", ".vite", "web"),
    build: { emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 2048 },
  };
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full));
    else out.push(full);
  }
  return out;
}

/**
 * What the built assets depend on: every source file of the app, the mount path baked into the
 * asset URLs, and the lockfile (a dependency bump rebuilds).
 */
export function webBuildStamp(mountPath: string): string {
  const h = createHash("sha256");
  h.update(`base:${mountPath}\n`);
  for (const f of [...filesUnder(WEB_APP_ROOT), fileURLToPath(import.meta.url), join(REPO_ROOT, "package-lock.json")]) {
    if (!existsSync(f)) continue;
    h.update(`${relative(REPO_ROOT, f)}\n`);
    h.update(readFileSync(f));
  }
  return h.digest("hex");
}

export function builtStampOf(dir = WEB_DIST_DIR): string | undefined {
  try {
    return readFileSync(join(dir, STAMP_FILE), "utf8").trim();
  } catch {
    return undefined;
  }
}

/**
 * Builds the app into `outDir` (default dist/web) unless it is already built from the same sources.
 * Builds into a sibling directory and renames it into place, so a concurrent process (several
 * `start:api`) never serves half a build.
 */
export async function buildWebApp(opts: { mountPath: string; outDir?: string; force?: boolean }): Promise<{
  outDir: string;
  built: boolean;
}> {
  const outDir = opts.outDir ?? WEB_DIST_DIR;
  const stamp = webBuildStamp(opts.mountPath);
  if (!opts.force && builtStampOf(outDir) === stamp) return { outDir, built: false };
  removeAbandoned(outDir);
  const staging = `${outDir}.staging-${process.pid}-${Date.now()}`;
  const { build } = await import("vite");
  const config = await baseConfig(opts.mountPath);
  await build({
    ...config,
    mode: "production",
    // React's production build whatever NODE_ENV the building process runs under (vitest sets "test")
    define: { "process.env.NODE_ENV": JSON.stringify("production") },
    build: { ...config.build, outDir: staging },
  });
  writeFileSync(join(staging, STAMP_FILE), `${stamp}\n`);
  if (builtStampOf(outDir) === stamp) {
    rmSync(staging, { recursive: true, force: true }); // another process finished the same build first
    return { outDir, built: false };
  }
  const old = `${outDir}.old-${process.pid}-${Date.now()}`;
  if (existsSync(outDir)) renameSync(outDir, old);
  renameSync(staging, outDir);
  rmSync(old, { recursive: true, force: true });
  return { outDir, built: true };
}

/** Staging and old directories left by a process that stopped mid-build (SIGTERM during a start). */
function removeAbandoned(outDir: string): void {
  const parent = dirname(outDir);
  if (!existsSync(parent)) return;
  const prefix = basename(outDir);
  for (const name of readdirSync(parent)) {
    const m = new RegExp(`^${prefix}\\.(?:staging|old)-(\\d+)-\\d+$`).exec(name);
    if (m && !isAlive(Number(m[1]))) rmSync(join(parent, name), { recursive: true, force: true });
  }
}

/**
 * Local mode: Vite's dev server in middleware mode with live reload. HMR gets its own port (a
 * WebSocket upgraded on the service's listener would hold the listener's close open).
 */
export async function createWebDevServer(opts: { mountPath: string; hmrPort?: number }): Promise<ViteDevServer> {
  const { createServer } = await import("vite");
  const config = await baseConfig(opts.mountPath);
  return createServer({
    ...config,
    appType: "spa",
    server: {
      middlewareMode: true,
      // the dev server reads only the app and the packages it imports (never the repo's other files,
      // .dev-state/ with the local IdP key among them)
      fs: {
        strict: true,
        allow: [WEB_APP_ROOT, join(REPO_ROOT, "node_modules")],
        deny: [".env", ".env.*", "*.{crt,pem}"],
      },
      hmr: opts.hmrPort ? { port: opts.hmrPort, clientPort: opts.hmrPort } : false,
    },
  });
}
