import type pg from "pg";
import { afterEach, describe, expect, test } from "vitest";
import { databaseBefore } from "../../../testkit/db.js";

/**
 * The migration `drop_usage_rollups` on a database at the previous migration: the table, which
 * nothing in the service ever wrote or read, goes when it is empty; with a row in it the migration
 * refuses and the table and its row stay.
 */
const TARGET = "20261231100000_drop_usage_rollups";

describe("migration drop_usage_rollups", () => {
  let db: Awaited<ReturnType<typeof databaseBefore>> | undefined;
  const exists = async (c: pg.Client) =>
    (await c.query<{ t: string | null }>("SELECT to_regclass('usage_rollups')::text AS t")).rows[0]?.t ?? null;

  afterEach(async () => {
    await db?.drop();
    db = undefined;
  });

  test("an empty table is dropped", async () => {
    db = await databaseBefore(TARGET);
    expect(await exists(db.client)).toBe("usage_rollups");
    await db.migrate();
    expect(await exists(db.client)).toBeNull();
  }, 60_000);

  test("a table with a row stops the migration and keeps the row", async () => {
    db = await databaseBefore(TARGET);
    const c = db.client;
    await c.query("INSERT INTO usage_rollups (day, model, modality) VALUES ('2026-11-01', 'm', 'text')");
    await expect(db.migrate()).rejects.toThrow(/usage_rollups has rows/);
    expect(await exists(c)).toBe("usage_rollups");
    expect((await c.query("SELECT count(*)::int AS n FROM usage_rollups")).rows[0]?.n).toBe(1);
  }, 60_000);
});
