// The image's check (CI, issue 42): `node --import tsx scripts/image-check.ts <image>`, after
// `docker build --network host -t <image> .` (scripts/image-check.sh does both). Starts the outside
// world of scripts/smoke-world.ts on 127.0.0.1 (Postgres and Redis are the machine's), runs the
// image with the production environment on the host's network (never a bridge) and checks:
//   /readyz, the Docker health status turning `healthy`, the process user (not root), a paid chat
//   (supply, x402 signup, a charged chat, its spans), a worker-role container (`--role=worker`)
//   serving its probes and nothing else, and SIGTERM (`docker stop -t 30`) → exit 0 for both, within
//   the documented drain (the process exits by 25 s).
// Prints one JSON line per step; exits 1 on any failure, leaving no container or process behind.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { freePort } from "../testkit/harness.js";
import { paidChat, type SmokeWorld, startSmokeWorld, until } from "./smoke-world.js";

const run = promisify(execFile);
const image = process.argv[2];
if (!image) {
  console.error("usage: node --import tsx scripts/image-check.ts <image>");
  process.exit(2);
}
const started = Date.now();
const say = (step: string, extra: Record<string, unknown> = {}) =>
  console.log(JSON.stringify({ check: "image", image, step, ms: Date.now() - started, ...extra }));

const DRAIN_S = 30; // docs/operations.md: `docker run --stop-timeout 30`, compose's stop_grace_period
const containers: string[] = [];
let world: SmokeWorld | undefined;

async function docker(...args: string[]): Promise<string> {
  const { stdout } = await run("docker", args, { maxBuffer: 16 * 1024 * 1024 });
  return stdout.trim();
}

/** Starts the image on the host's network with the world's production environment; its name. */
async function startContainer(role: "api" | "worker", port: number): Promise<string> {
  if (!world) throw new Error("no world");
  const name = `svc-image-check-${role}-${port}`;
  // HOST: the host's network is the container's; listen on loopback as the native smoke does
  const env = { ...world.env(port), HOST: "127.0.0.1" };
  const command = role === "worker" ? ["node", "--enable-source-maps", "dist/server/main.js", "--role=worker"] : [];
  await docker(
    "run",
    "--detach",
    "--name",
    name,
    "--network",
    "host",
    "--stop-timeout",
    String(DRAIN_S),
    ...Object.entries(env).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
    image as string,
    ...command,
  );
  containers.push(name);
  return name;
}

function aliveCheck(name: string): () => Promise<void> {
  return async () => {
    const state = await docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", name);
    if (!state.startsWith("running")) throw new Error(`${name} is ${state}`);
  };
}

async function health(name: string): Promise<string> {
  return docker("inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}", name);
}

/** `docker stop -t 30`, then the exit code and how long it took. */
async function stop(name: string): Promise<{ exitCode: number; seconds: number }> {
  const t0 = Date.now();
  await docker("stop", "-t", String(DRAIN_S), name);
  const seconds = (Date.now() - t0) / 1000;
  const exitCode = Number(await docker("inspect", "-f", "{{.State.ExitCode}}", name));
  const killed = await docker("inspect", "-f", "{{.State.OOMKilled}}", name);
  if (exitCode !== 0 || killed !== "false") throw new Error(`${name}: SIGTERM → exit ${exitCode} after ${seconds}s`);
  if (seconds >= DRAIN_S) throw new Error(`${name}: stopped only after ${seconds}s (killed at the drain's end)`);
  return { exitCode, seconds };
}

async function main(): Promise<void> {
  const inspect = JSON.parse(await docker("image", "inspect", image as string))[0] as {
    Config: { User: string; Env: string[]; Healthcheck?: unknown };
    Size: number;
  };
  say("image", { user: inspect.Config.User, sizeMB: Math.round(inspect.Size / 1e6), env: inspect.Config.Env });
  world = await startSmokeWorld("imagecheck");

  // the API (the image's own command: --role=all, the default)
  const apiPort = await freePort();
  const base = `http://127.0.0.1:${apiPort}`;
  const api = await startContainer("api", apiPort);
  const apiAlive = aliveCheck(api);
  let aliveErr: Error | undefined;
  const alive = () => {
    if (aliveErr) throw aliveErr;
  };
  const watcher = setInterval(() => void apiAlive().catch((e: Error) => (aliveErr ??= e)), 1000);
  try {
    say("started", { container: api, port: apiPort });
    await until(
      async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200,
      120_000,
      "/readyz",
      alive,
    );
    say("ready");
    const uid = await docker("exec", api, "id", "-u");
    const user = await docker("exec", api, "id", "-un");
    const owner = await docker("exec", api, "stat", "-c", "%U", "/app");
    if (uid === "0" || user !== "node") throw new Error(`the service runs as uid ${uid} (${user})`);
    if (owner !== "node") throw new Error(`/app belongs to ${owner}`);
    say("user", { uid, user, appOwner: owner });
    await until(async () => (await health(api)) === "healthy", 60_000, "the health status `healthy`", alive);
    say("healthy");
    await paidChat(base, world, alive, say);
  } finally {
    clearInterval(watcher);
  }

  // a worker-role container: the probes on its PORT, nothing of the API
  const workerPort = await freePort();
  const worker = await startContainer("worker", workerPort);
  const wbase = `http://127.0.0.1:${workerPort}`;
  const workerAlive = aliveCheck(worker);
  let workerErr: Error | undefined;
  const wwatch = setInterval(() => void workerAlive().catch((e: Error) => (workerErr ??= e)), 1000);
  try {
    await until(
      async () => (await fetch(`${wbase}/readyz`).catch(() => undefined))?.status === 200,
      120_000,
      "the worker's /readyz",
      () => {
        if (workerErr) throw workerErr;
      },
    );
    const healthz = await fetch(`${wbase}/healthz`);
    if (healthz.status !== 200) throw new Error(`the worker's /healthz → ${healthz.status}`);
    const metrics = await (await fetch(`${wbase}/metrics`)).text();
    if (!metrics.includes("svc_")) throw new Error("the worker's /metrics has no svc_ metric");
    const models = await fetch(`${wbase}/v1/models`);
    if (models.status !== 404) throw new Error(`the worker serves the API: /v1/models → ${models.status}`);
    await until(async () => (await health(worker)) === "healthy", 60_000, "the worker's health status `healthy`");
    say("worker", { container: worker, port: workerPort, readyz: 200, apiRoute: models.status, health: "healthy" });
  } finally {
    clearInterval(wwatch);
  }

  say("stopped", { api: await stop(api), worker: await stop(worker) });
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  const logs: Record<string, string> = {};
  for (const c of containers) {
    logs[c] = await run("docker", ["logs", "--tail", "60", c]).then(
      (r) => `${r.stdout}${r.stderr}`,
      (x: Error) => x.message,
    );
  }
  say("failed", { error: (e as Error).message, logs });
} finally {
  for (const c of containers) await docker("rm", "-f", c).catch(() => undefined);
  await world?.close();
}
process.exit(failed ? 1 : 0);
