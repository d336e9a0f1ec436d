import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "../generated/prisma/client.js";
import { APP_ROOT } from "../lib/app-root.js";
import { logger } from "../lib/logger.js";
import { applyFunctions } from "./sql-functions.js";

export type Db = PrismaClient;

type Released = (err?: Error | boolean) => void;
interface PgTx {
  client: { release: Released };
  executeRaw(q: { sql: string }): Promise<number>;
}
interface PgAdapter {
  startTransaction(isolation?: string): Promise<PgTx>;
}

/**
 * Prisma 6.19's client engine sends COMMIT through `executeRaw` and releases the pool connection
 * only when that succeeds: a COMMIT that fails (a deferred constraint such as the balanced-ledger
 * trigger, a serialization failure) leaks the connection until the pool is exhausted. This adapter
 * releases (and discards) the connection when COMMIT or ROLLBACK throws, and makes release idempotent.
 */
class LeakFreePrismaPg extends PrismaPg {
  override async connect(): ReturnType<PrismaPg["connect"]> {
    const adapter = await super.connect();
    const a = adapter as unknown as PgAdapter;
    const start = a.startTransaction.bind(a);
    a.startTransaction = async (isolation) => {
      const tx = await start(isolation);
      const client = tx.client;
      const release = client.release.bind(client);
      let released = false;
      client.release = (err) => {
        if (released) return;
        released = true;
        release(err);
      };
      const exec = tx.executeRaw.bind(tx);
      tx.executeRaw = async (q) => {
        try {
          return await exec(q);
        } catch (e) {
          if (/^\s*(COMMIT|ROLLBACK)\b/i.test(q.sql)) client.release(true);
          throw e;
        }
      };
      return tx;
    };
    return adapter;
  }
}

/**
 * How long a transaction may wait for a connection of the pool (`maxWait`) and run (`timeout`), ms.
 * Prisma's defaults (2 s, 5 s) suit the API, whose callers are waiting; background jobs use longer
 * ones (WORKER_TRANSACTION_OPTIONS) on their own pool.
 */
export interface TransactionOptions {
  maxWait?: number;
  timeout?: number;
}

/** Background jobs: a busy moment waits (up to 10 s for a connection) instead of failing the job. */
export const WORKER_TRANSACTION_OPTIONS: TransactionOptions = { maxWait: 10_000, timeout: 60_000 };

export function createPrisma(
  databaseUrl: string,
  opts: {
    max?: number;
    /** each statement Prisma sends, with its parameters as a JSON array (tests: N+1 guards, plans) */
    onQuery?: (sql: string, params: string) => void;
    transactionOptions?: TransactionOptions;
  } = {},
): Db {
  const adapter = new LeakFreePrismaPg({ connectionString: databaseUrl, max: opts.max ?? 20 });
  const transactionOptions = opts.transactionOptions;
  if (!opts.onQuery) return new PrismaClient({ adapter, transactionOptions });
  // query events (tests: N+1 guards); off by default
  const db = new PrismaClient({ adapter, transactionOptions, log: [{ emit: "event", level: "query" }] });
  const onQuery = opts.onQuery;
  (db as unknown as { $on: (e: "query", cb: (ev: { query: string; params: string }) => void) => void }).$on(
    "query",
    (ev) => onQuery(ev.query, ev.params),
  );
  return db;
}

/** Failure of a start-up step that names the variable at fault. */
export class StartupError extends Error {
  override readonly name = "StartupError";
}

function describeDbTarget(databaseUrl: string): string {
  const u = new URL(databaseUrl);
  return `${u.hostname}:${u.port || 5432}/${decodeURIComponent(u.pathname.slice(1))}`;
}

/**
 * Creates the database when missing and the role may (CONTRACT: "created if missing when the
 * role may"). Throws StartupError naming DATABASE_URL when the server cannot be reached.
 */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const u = new URL(databaseUrl);
  const dbName = decodeURIComponent(u.pathname.slice(1));
  if (!dbName) throw new StartupError("DATABASE_URL: no database name in the URL");
  const admin = new URL(databaseUrl);
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (e) {
    // the maintenance database may be forbidden: try the target itself
    const direct = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
    try {
      await direct.connect();
      await direct.end();
      return;
    } catch (e2) {
      throw new StartupError(
        `DATABASE_URL: cannot connect to ${describeDbTarget(databaseUrl)} (${errText(e2) || errText(e)})`,
      );
    }
  }
  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [dbName]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE "${dbName.replaceAll('"', '""')}"`);
      } catch (e) {
        // a concurrent creator wins; anything else is fatal
        if ((e as { code?: string }).code !== "42P04") {
          throw new StartupError(
            `DATABASE_URL: database ${dbName} does not exist and cannot be created (${errText(e)})`,
          );
        }
      }
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

function errText(e: unknown): string {
  if (e instanceof AggregateError) return e.errors.map(errText).join("; ");
  const err = e as { code?: string; message?: string };
  return [err.code, err.message].filter(Boolean).join(" ") || String(e);
}

/**
 * The migration step: applies pending migrations with the Prisma CLI (offline JS engine; see
 * prisma.config.ts), then the stored functions from prisma/functions (`applyFunctions`: skipped when
 * they are current, under an advisory lock when not), then makes sure the monthly partitions of this
 * month and the next ones exist (`ensurePartitions`). Every path that migrates a database runs this.
 */
export async function runMigrations(databaseUrl: string): Promise<void> {
  const require = createRequire(import.meta.url);
  const cli = require.resolve("prisma/build/index.js");
  await new Promise<void>((resolve, reject) => {
    execFile(
      process.execPath,
      [cli, "migrate", "deploy"],
      { cwd: APP_ROOT, env: { ...process.env, DATABASE_URL: databaseUrl, PRISMA_HIDE_UPDATE_MESSAGE: "1" } },
      (err, _stdout, stderr) => {
        if (err) {
          const line = stderr
            .split("\n")
            .find((l) => /Error|error:/.test(l))
            ?.trim();
          reject(new StartupError(`DATABASE_URL: migrations failed (${line ?? err.message})`));
        } else resolve();
      },
    );
  });
  try {
    await applyFunctions(databaseUrl);
  } catch (e) {
    throw new StartupError(`DATABASE_URL: stored functions failed (${errText(e)})`);
  }
  await ensurePartitions(databaseUrl);
}

/** Months ahead whose partitions exist (svc_partitions_ensure): a quarter of slack for the daily job. */
export const PARTITION_MONTHS_AHEAD = 3;

/**
 * Creates the monthly partitions of this month and the next PARTITION_MONTHS_AHEAD ones when missing
 * (docs/decisions.md "Monthly partitions and retention"). Not fatal: the DEFAULT partition takes any
 * row whose month has no partition, and the maintenance worker tries again daily.
 */
export async function ensurePartitions(databaseUrl: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  try {
    await client.connect();
    const r = await client.query<{ part: string }>("SELECT svc_partitions_ensure(now(), $1) AS part", [
      PARTITION_MONTHS_AHEAD,
    ]);
    return r.rows.map((row) => row.part);
  } catch (e) {
    logger.warn({ err: errText(e) }, "could not create the monthly partitions ahead; the maintenance job retries");
    return [];
  } finally {
    await client.end().catch(() => undefined);
  }
}
