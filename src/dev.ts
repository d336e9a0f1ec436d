import { boot, parseRole } from "./boot.js";
import { localWebDev } from "./local/web-dev.js";
import { startLocalWorld } from "./local/world.js";

/**
 * Local mode's entry (`npm run dev`, run from source): the production boot with the local world —
 * the upstream simulator, a local chain and facilitator, a local identity provider, seed data — and
 * the web app's dev routes (Vite's dev server, dev sign-in). See CONTRACT "Local mode".
 */
boot({
  role: parseRole(process.argv.slice(2)),
  dev: { startWorld: (env) => startLocalWorld({ appId: env.IDP_APP_ID, env }), web: localWebDev },
}).catch((e: unknown) => {
  process.stderr.write(`fatal: ${(e as Error)?.stack ?? String(e)}\n`);
  process.exit(1);
});
