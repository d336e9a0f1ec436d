import pg from "pg";
import { describe, expect } from "vitest";
import { PARTITION_MONTHS_AHEAD } from "../../../src/adapters/db.js";
import { monthPartition } from "../../../src/domain/maintenance/retention.js";
import { appTest } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chargedRequest, fund, monthStart, seller } from "../../../testkit/month-rows.js";

/**
 * The months made ahead (svc_partitions_ensure, run at start-up and by the maintenance job
 * `ensure-partitions`): this month and the next three exist; a row no month takes lands in the
 * DEFAULT partition, never in an error, and the next run makes its month and moves it there (its
 * clear too: a move, not a delete, so the append-only rule does not stand in the way); a second run
 * makes nothing.
 */
const test = appTest.extend("client", { scope: "file" }, async ({ app }, { onCleanup }) => {
  const c = new pg.Client({ connectionString: app.rt.config.database.url });
  await c.connect();
  onCleanup(() => c.end());
  return c;
});

const partitionOf = async (c: pg.Client, table: string, id: string) =>
  (await c.query(`SELECT tableoid::regclass::text AS p FROM ${table} WHERE id = $1`, [id])).rows[0]?.p as string;

describe("months made ahead", () => {
  test("this month and the next three exist from the start", async ({ client: c }) => {
    for (let i = 0; i <= PARTITION_MONTHS_AHEAD; i++) {
      for (const t of ["inference_requests", "clears"]) {
        const name = monthPartition(t, monthStart(new Date(), i));
        const r = await c.query("SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1)", [name]);
        expect(r.rowCount, name).toBe(1);
      }
    }
  });

  test("a row beyond them waits in the default partition; the job makes its month and moves it", async ({
    app,
    client: c,
  }) => {
    const s = await seller(c);
    const buyer = (
      await c.query<{ id: string }>(
        `INSERT INTO accounts (id, wallet_address, auth_provider)
         VALUES (gen_random_uuid(), '0x00000000000000000000000000000000000e0002', 'siwe') RETURNING id`,
      )
    ).rows[0]?.id as string;
    await fund(c, buyer, 1_000_000n, new Date());
    const far = new Date(Date.UTC(2031, 4, 20, 12));
    const r = await chargedRequest(c, { accountId: buyer, seller: s, at: far });
    expect(await partitionOf(c, "inference_requests", r.requestId)).toBe("inference_requests_default");
    expect(await partitionOf(c, "clears", r.clearId)).toBe("clears_default");

    const made = await app.rt.services.maintenance.ensurePartitions();
    expect(made.created.sort()).toEqual(["clears_y2031m05", "inference_requests_y2031m05"]);
    expect(await partitionOf(c, "inference_requests", r.requestId)).toBe("inference_requests_y2031m05");
    expect(await partitionOf(c, "clears", r.clearId)).toBe("clears_y2031m05");
    expect((await c.query("SELECT count(*)::int AS n FROM clears_default")).rows[0]?.n).toBe(0);
    // the moved rows are the same rows, with their indexes and rules
    const found = await app.rt.services.accounts.requestDetail({
      accountId: buyer,
      supportReference: r.supportReference,
    });
    expect(found.requestId).toBe(r.requestId);
    await expect(c.query("DELETE FROM clears WHERE id = $1", [r.clearId])).rejects.toThrow(/append-only \(clears\)/);
    await assertBooksBalance(app.rt.db);

    expect(await app.rt.services.maintenance.ensurePartitions()).toEqual({ created: [] });
  });
});
