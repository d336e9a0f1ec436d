import pg from "pg";
import { logger } from "../lib/logger.js";

/**
 * A plain `pg` pool for the router's hot path (stored functions, one round trip each): Prisma's
 * interactive transactions cost ~10 ms each here, far above the latency budget. BIGINT comes back
 * as `bigint`. Everything else uses Prisma.
 */
export type Sql = pg.Pool;

const INT8 = 20;

export function createSql(databaseUrl: string, max = 20): Sql {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    types: {
      getTypeParser: ((oid: number, format?: "text" | "binary") =>
        oid === INT8 ? (v: string) => BigInt(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  // an idle connection the server dropped (restart, failover) must not crash the process: the pool
  // discards it and opens a new one on the next query
  pool.on("error", (err) => logger.warn({ err: err.message }, "postgres connection lost (idle); it will be replaced"));
  return pool;
}

/** A query runner over either client, so one SQL text serves both (e.g. the eligibility rule). */
export type QueryRunner = <T>(text: string, params: unknown[]) => Promise<T[]>;

export function sqlRunner(sql: Sql): QueryRunner {
  return async <T>(text: string, params: unknown[]) => (await sql.query(text, params)).rows as T[];
}

/**
 * Runs `fn` in one transaction on a connection of its own. The pool listens for errors only on
 * idle connections: a checked-out one the server terminates between two queries (a restart,
 * `pg_terminate_backend`) emits `error` with no listener, which would crash the process. Here the
 * error is held while checked out, the work fails, and the connection is discarded on release.
 */
export async function inTransaction<T>(sql: Sql, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await sql.connect();
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on("error", onError);
  try {
    await client.query("BEGIN");
    const out = await fn(client);
    await client.query("COMMIT");
    return out;
  } catch (e) {
    if (!broken) {
      await client.query("ROLLBACK").catch((err: Error) => {
        broken = err;
      });
    }
    throw e;
  } finally {
    client.removeListener("error", onError);
    client.release(broken ?? false);
  }
}

/**
 * Runs `fn` on a connection of its own, outside any transaction (`fn` opens its own): for session
 * state such as an advisory lock held across transactions, or a COPY. Errors of the checked-out
 * connection are held as in `inTransaction`, and a connection that failed (or was left in a
 * transaction) is discarded rather than returned to the pool.
 */
export async function withConnection<T>(sql: Sql, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await sql.connect();
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on("error", onError);
  let failed = false;
  try {
    return await fn(client);
  } catch (e) {
    failed = true;
    throw e;
  } finally {
    client.removeListener("error", onError);
    client.release(broken ?? failed);
  }
}
