// `npm run web:build`: builds the web app (src/web/app) into dist/web, as `npm start` does at boot
// when the build is missing or stale. Mounted at WEB_URL's path (default /app).
import { loadConfig, processEnv } from "../src/config.js";
import { buildWebApp, webMountPath } from "../src/web/vite.js";

const r = loadConfig(processEnv(), { mode: "local" });
if (!r.ok) {
  for (const e of r.errors) console.error(e);
  process.exit(1);
}
const mountPath = webMountPath(r.config.urls.web);
const started = Date.now();
const { outDir, built } = await buildWebApp({ mountPath, force: process.argv.includes("--force") });
console.log(
  built
    ? `built ${outDir} for ${mountPath}/ in ${Date.now() - started} ms`
    : `${outDir} is up to date for ${mountPath}/`,
);
