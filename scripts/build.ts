// `npm run build`: the production build. The server and its workers are bundled by esbuild from the
// production entry (src/main.ts) into dist/server/main.js, with every package left external (the
// production install provides them) and a source map; the web app is built by Vite into dist/web.
// `npm start` runs the result with plain node (docs/decisions.md "Compiled build").
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { loadConfig, processEnv } from "../src/config.js";
import { appPath } from "../src/lib/app-root.js";
import { buildWebApp, webMountPath } from "../src/web/vite.js";
import { sourceStamp } from "./build-stamp.mjs";

const started = Date.now();
const outDir = appPath("dist", "server");
mkdirSync(outDir, { recursive: true });

const server = await build({
  entryPoints: { main: appPath("src", "main.ts") },
  outdir: outDir,
  bundle: true,
  packages: "external",
  platform: "node",
  format: "esm",
  target: "node20.19",
  sourcemap: "linked",
  sourcesContent: false,
  legalComments: "none",
  logLevel: "warning",
  metafile: true,
});
const modules = Object.keys(server.metafile.inputs);
const leaked = modules.filter((m) => /^src\/(local\/|dev\.ts$|web\/)/.test(m));
if (leaked.length > 0) throw new Error(`the production bundle reached dev-only modules: ${leaked.join(", ")}`);

const r = loadConfig(processEnv(), { mode: "local" });
if (!r.ok) throw new Error(r.errors.join("\n"));
const mountPath = webMountPath(r.config.urls.web);
const web = await buildWebApp({ mountPath, force: process.argv.includes("--force") });

writeFileSync(
  join(outDir, "build.json"),
  `${JSON.stringify({ builtAt: new Date().toISOString(), sources: sourceStamp(), modules: modules.length, webMountPath: mountPath }, null, 2)}\n`,
);
console.log(
  `built dist/server/main.js (${modules.length} modules) and ${web.built ? "" : "kept "}dist/web for ${mountPath}/ in ${Date.now() - started} ms`,
);
