/**
 * Standalone runner: `npx tsx src/local/upstream-sim/cli.ts [--port 4010] [--host 127.0.0.1]
 * [--key SECRET:DIEM[:USD]]...` (DIEM/USD as decimals, e.g. `--key sk-sim-1:25.5`). Prints the base
 * and admin URLs and runs until SIGINT/SIGTERM.
 */

import type { SimKeyInit } from "./keys.js";
import { parseDecimalToMicro } from "./money.js";
import { startUpstreamSimulator } from "./server.js";

function parseArgs(argv: readonly string[]): { port: number; host: string; keys: SimKeyInit[] } {
  let port = 4010;
  let host = "127.0.0.1";
  const keys: SimKeyInit[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = argv[i + 1];
    if (arg === "--port" && value !== undefined) {
      port = Number(value);
      i++;
    } else if (arg === "--host" && value !== undefined) {
      host = value;
      i++;
    } else if (arg === "--key" && value !== undefined) {
      const [key = "", diem = "0", usd = "0"] = value.split(":");
      keys.push({ key, diemMicro: parseDecimalToMicro(diem), usdMicro: parseDecimalToMicro(usd) });
      i++;
    } else {
      throw new Error(`unknown argument: ${arg}`);
    }
  }
  if (keys.length === 0) keys.push({ key: "sk-sim-local", diemMicro: 100_000_000n });
  return { port, host, keys };
}

const { port, host, keys } = parseArgs(process.argv.slice(2));
const sim = await startUpstreamSimulator({ port, host, keys });
process.stdout.write(
  `upstream simulator\n  UPSTREAM_BASE_URL=${sim.baseUrl}\n  admin: ${sim.adminUrl}\n  keys: ${keys.map((k) => k.key).join(", ")}\n`,
);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void sim.close().then(() => process.exit(0));
  });
}
