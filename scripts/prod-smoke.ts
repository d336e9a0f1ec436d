// The production install's smoke (CI, issue 31): `node --import tsx scripts/prod-smoke.ts <dir>`, where
// <dir> holds what `scripts/release.sh assemble` puts there (the build output and `npm ci --omit=dev`).
// Starts the outside world from this source tree (scripts/smoke-world.ts: an upstream simulator, a
// local chain, an identity provider; Postgres and Redis are the machine's), runs <dir>'s `npm start`
// command with plain node in production mode against them, and checks /readyz and one paid chat: a
// supplier signs in, registers a key and posts an offer; a buyer signs up through x402, and its chat
// is charged.
// Prints one JSON line per step; exits 1 on any failure, leaving no process behind.
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "../testkit/harness.js";
import { paidChat, type SmokeWorld, startSmokeWorld, until } from "./smoke-world.js";

const dir = resolve(process.argv[2] ?? "");
if (!process.argv[2]) {
  console.error("usage: node --import tsx scripts/prod-smoke.ts <production install dir>");
  process.exit(2);
}
const started = Date.now();
const say = (step: string, extra: Record<string, unknown> = {}) =>
  console.log(JSON.stringify({ smoke: "production-install", step, ms: Date.now() - started, ...extra }));

let world: SmokeWorld | undefined;
let child: ChildProcess | undefined;
let output = "";
const alive = () => {
  if (child && child.exitCode !== null) throw new Error(`the service exited (${child.exitCode})`);
};

async function main(): Promise<void> {
  world = await startSmokeWorld("smoke");
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...world.env(port) };

  // exactly the install's `npm start` command, with plain node (no TypeScript loader)
  const start = (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { scripts: { start: string } }).scripts
    .start;
  const [bin, ...args] = start.split(/\s+/);
  if (bin !== "node") throw new Error(`npm start is not plain node: ${start}`);
  child = spawn(process.execPath, args, { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.on("data", (d) => {
    output = (output + d).slice(-20_000);
  });
  child.stderr?.on("data", (d) => {
    output = (output + d).slice(-20_000);
  });
  say("started", { command: start, cwd: dir });

  await until(
    async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200,
    90_000,
    "/readyz",
    alive,
  );
  say("ready");

  await paidChat(base, world, alive, say);

  child.kill("SIGTERM");
  const code = await new Promise<number | null>((r) => child?.once("exit", (c) => r(c)));
  if (code !== 0) throw new Error(`SIGTERM: exit ${code}`);
  say("stopped", { exitCode: code });
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  say("failed", { error: (e as Error).message, serviceOutput: output.slice(-4000) });
} finally {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  await world?.close();
}
process.exit(failed ? 1 : 0);
