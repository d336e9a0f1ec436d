import { boot, fail, parseRole } from "./boot.js";

/**
 * Production entry, compiled by `npm run build` to dist/server/main.js and run with plain node:
 *   npm start             → API + workers
 *   npm run start:api     → --role=api
 *   npm run start:worker  → --role=worker
 * Local mode is `npm run dev` (src/dev.ts, from source): this entry never loads the local world.
 */
const argv = process.argv.slice(2);
if (argv.includes("--local")) fail("--local: local mode is `npm run dev` (src/dev.ts), not this entry");

boot({ role: parseRole(argv) }).catch((e: unknown) => {
  process.stderr.write(`fatal: ${(e as Error)?.stack ?? String(e)}\n`);
  process.exit(1);
});
