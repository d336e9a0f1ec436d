import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { describe, expect } from "vitest";
import { createSql, inTransaction } from "../../../src/adapters/sql.js";
import { appTest } from "../../../testkit/app-test.js";

/** a pg pool of its own on the file's isolated database; no app runs */
const test = appTest.extend("sql", { scope: "file" }, async ({ database }, { onCleanup }) => {
  const sql = createSql(database.databaseUrl, 4);
  onCleanup(() => sql.end());
  return sql;
});

async function backendPid(client: pg.PoolClient) {
  const r = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  return r.rows[0]?.pid ?? 0;
}

describe("inTransaction", () => {
  test("commits what the function wrote and answers its result", async ({ sql }) => {
    await sql.query("CREATE TABLE IF NOT EXISTS tx_probe (v int)");
    const out = await inTransaction(sql, async (c) => {
      await c.query("INSERT INTO tx_probe VALUES (1)");
      return 42;
    });
    expect(out).toBe(42);
    const r = await sql.query<{ n: string }>("SELECT count(*)::text AS n FROM tx_probe WHERE v = 1");
    expect(r.rows[0]?.n).toBe("1");
  });

  test("rolls back when the function throws", async ({ sql }) => {
    await sql.query("CREATE TABLE IF NOT EXISTS tx_probe (v int)");
    await expect(
      inTransaction(sql, async (c) => {
        await c.query("INSERT INTO tx_probe VALUES (2)");
        throw new Error("no");
      }),
    ).rejects.toThrow("no");
    const r = await sql.query<{ n: string }>("SELECT count(*)::text AS n FROM tx_probe WHERE v = 2");
    expect(r.rows[0]?.n).toBe("0");
  });

  test("a connection terminated between two queries fails the work, not the process", async ({ sql }) => {
    // without a listener on the checked-out connection, the server's FATAL arriving while no query
    // runs is an unhandled `error` event: the process (here, the test worker) would die
    await sql.query("CREATE TABLE IF NOT EXISTS tx_probe (v int)");
    const failure = inTransaction(sql, async (c) => {
      await c.query("INSERT INTO tx_probe VALUES (3)");
      const pid = await backendPid(c);
      await sql.query("SELECT pg_terminate_backend($1)", [pid]);
      await sleep(200); // the FATAL message arrives while this connection is idle in its transaction
      await c.query("INSERT INTO tx_probe VALUES (4)");
    });
    await expect(failure).rejects.toThrow();
    const r = await sql.query<{ n: string }>("SELECT count(*)::text AS n FROM tx_probe WHERE v IN (3, 4)");
    expect(r.rows[0]?.n).toBe("0");
    // the pool discarded the dead connection: every connection it now hands out works
    const pids = await Promise.all([1, 2, 3, 4].map(() => inTransaction(sql, (c) => backendPid(c))));
    expect(pids.every((p) => p > 0)).toBe(true);
  });
});
