import { type ChildProcess, execFile, spawn } from "node:child_process";
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { PG_ADMIN_URL, withAdmin } from "./db.js";

/**
 * A real streaming replica of the machine's PostgreSQL (the primary at PG_ADMIN_URL), for the read
 * replica test (issue 42 item 5): `pg_basebackup -R` into a temporary directory, then `postgres`
 * as a hot standby on a free loopback port, run as the `postgres` OS user when this is root
 * (postgres refuses root). Nothing of the primary is restarted: when its pg_hba.conf has no
 * `replication` entry for 127.0.0.1, one line is appended and the configuration reloaded
 * (`pg_reload_conf()`), which leaves every session as it is. `stop()` ends the standby and removes
 * its directory.
 */
export interface Replica {
  /** the standby's URL for `database` (it serves every database of the primary, read-only) */
  url(database: string): string;
  port: number;
  /** stops applying WAL (`pg_wal_replay_pause()`): the standby's reads go stale from here */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** waits until the standby has replayed everything the primary has written so far */
  catchUp(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** Why a replica cannot be started here (no PostgreSQL binaries, not root, ...), or undefined. */
export function replicaUnavailable(): string | undefined {
  if (!pgBinDir()) return "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin";
  if (process.getuid?.() !== 0 && process.env.USER !== "postgres") return "needs root (to run the standby as postgres)";
  return undefined;
}

/** The server binaries of `major` (the primary's), or of the newest version installed. */
function pgBinDir(major?: number): string | undefined {
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, "bin", "pg_basebackup")) && existsSync(join(base, v, "bin", "postgres")))
    .filter((v) => major === undefined || Number(v) === major)
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(base, versions[0], "bin") : undefined;
}

function run(cmd: string, args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, { env: { ...process.env, ...env } }, (err, stdout, stderr) =>
      err ? reject(new Error(`${cmd} ${args.join(" ")}: ${stderr || err.message}`)) : resolve(stdout),
    ),
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** The primary must accept a replication connection from 127.0.0.1; adds the pg_hba line and reloads when not. */
async function allowReplication(): Promise<void> {
  await withAdmin(async (c) => {
    const { rows } = await c.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_hba_file_rules
        WHERE 'replication' = ANY(database) AND type IN ('host','hostnossl')
          AND (address IS NULL OR address = '127.0.0.1' OR address = 'all' OR address = 'samehost')
          AND auth_method IN ('trust','md5','scram-sha-256','password')`,
    );
    if (Number(rows[0]?.n) > 0) return;
    const hba = (await c.query<{ hba_file: string }>("SHOW hba_file")).rows[0]?.hba_file;
    if (!hba) throw new Error("primary: no hba_file");
    appendFileSync(
      hba,
      "\n# added by testkit/replica.ts (read replica test): streaming from loopback\nhost replication all 127.0.0.1/32 trust\n",
    );
    await c.query("SELECT pg_reload_conf()");
    // the reload is asynchronous: wait for the rule to show
    for (let i = 0; i < 50; i++) {
      const r = await c.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_hba_file_rules WHERE 'replication' = ANY(database) AND address = '127.0.0.1'",
      );
      if (Number(r.rows[0]?.n) > 0) return;
      await new Promise((r2) => setTimeout(r2, 100));
    }
  });
}

export async function startReplica(): Promise<Replica> {
  const why = replicaUnavailable();
  if (why) throw new Error(`replica: ${why}`);
  // a standby runs the primary's major version (an embedded PostgreSQL may differ from the machine's)
  const major = await withAdmin(async (c) =>
    Math.floor(Number((await c.query("SHOW server_version_num")).rows[0]?.server_version_num) / 10_000),
  );
  const bin = pgBinDir(major);
  if (!bin)
    throw new Error(
      `replica: no PostgreSQL ${major} server binaries under /usr/lib/postgresql (the primary's version)`,
    );
  await allowReplication();
  const primary = new URL(PG_ADMIN_URL);
  const root = mkdtempSync(join(tmpdir(), "svc-replica-"));
  const dir = join(root, "data");
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? ["runuser", "-u", "postgres", "--"] : [];
  if (asRoot) await run("chown", ["postgres:postgres", root]);
  chmodSync(root, 0o700);
  const [cmd0, ...pre] = [...owner, join(bin, "pg_basebackup")];
  await run(cmd0 as string, [
    ...pre,
    "-h",
    primary.hostname,
    "-p",
    primary.port || "5432",
    "-U",
    decodeURIComponent(primary.username || "postgres"),
    "-D",
    dir,
    "-R", // standby.signal + primary_conninfo
    "-X",
    "stream",
    "-c",
    "fast",
  ]);
  const port = await freePort();
  // a hot standby needs these at least as high as the primary's
  const mirrored = await withAdmin(
    async (c) =>
      (
        await c.query<{ name: string; setting: string }>(
          `SELECT name, setting FROM pg_settings WHERE name IN ('max_connections', 'max_worker_processes',
             'max_wal_senders', 'max_prepared_transactions', 'max_locks_per_transaction')`,
        )
      ).rows,
  );
  // a Debian data directory keeps its configuration in /etc: the standby gets a minimal one of its own
  const conf = join(dir, "postgresql.conf");
  writeFileSync(
    conf,
    [
      `port = ${port}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${root}'`,
      "hot_standby = on",
      ...mirrored.map((r) => `${r.name} = ${r.setting}`),
      "shared_buffers = 32MB",
      "fsync = off",
      "logging_collector = off",
      "max_standby_streaming_delay = -1",
      "",
    ].join("\n"),
  );
  writeFileSync(join(dir, "pg_hba.conf"), "local all all trust\nhost all all 127.0.0.1/32 trust\n");
  writeFileSync(join(dir, "pg_ident.conf"), "");
  if (asRoot) await run("chown", ["-R", "postgres:postgres", dir]);
  const [pcmd, ...pargs] = [...owner, join(bin, "postgres"), "-D", dir, "-c", `config_file=${conf}`];
  let log = "";
  const child: ChildProcess = spawn(pcmd as string, pargs, { stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.on("data", (d) => (log += d));
  child.stderr?.on("data", (d) => (log += d));
  const url = (database: string) => `postgresql://postgres@127.0.0.1:${port}/${database}`;
  const admin = () => new pg.Client({ connectionString: url("postgres") });
  const q = async (sql: string) => {
    const c = admin();
    await c.connect();
    try {
      return (await c.query(sql)).rows;
    } finally {
      await c.end();
    }
  };
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      // fast shutdown, sent to the postmaster itself (runuser does not pass SIGINT on)
      try {
        process.kill(Number(readFileSync(join(dir, "postmaster.pid"), "utf8").split("\n")[0]), "SIGINT");
      } catch {
        child.kill("SIGINT");
      }
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (child.exitCode === null) child.kill("SIGKILL");
    }
    rmSync(root, { recursive: true, force: true });
  };
  try {
    for (let i = 0; ; i++) {
      try {
        const rows = await q("SELECT pg_is_in_recovery() AS r");
        if (rows[0]?.r !== true) throw new Error("replica: not in recovery");
        break;
      } catch (e) {
        if (child.exitCode !== null || i > 150)
          throw new Error(`replica did not start: ${(e as Error).message}\n${log}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    url,
    port,
    pauseReplay: async () => void (await q("SELECT pg_wal_replay_pause()")),
    resumeReplay: async () => void (await q("SELECT pg_wal_replay_resume()")),
    async catchUp(timeoutMs = 15_000) {
      const target = await withAdmin(async (c) => (await c.query("SELECT pg_current_wal_lsn()::text AS l")).rows[0]?.l);
      const until = Date.now() + timeoutMs;
      for (;;) {
        const rows = await q(`SELECT pg_last_wal_replay_lsn() >= '${target}'::pg_lsn AS ok`);
        if (rows[0]?.ok === true) return;
        if (Date.now() > until) throw new Error(`replica: not caught up to ${target} in ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    stop,
  };
}
