import type pg from "pg";
import { addMonths, monthPartition } from "../src/domain/maintenance/month-closing.js";

/** An index of a partitioned table or of one of its partitions, as a migration test reads it. */
export interface PartitionIndex {
  table: string;
  def: string;
  entries: number;
}

/**
 * Each index of `table` or of one of its partitions whose name ends with `suffix`: its table, its
 * definition and its entries (`reltuples`: ANALYZE the table first), ordered by table.
 */
export async function partitionIndexes(c: pg.Client, table: string, suffix: string): Promise<PartitionIndex[]> {
  const r = await c.query<PartitionIndex>(
    `SELECT t.relname AS "table", pg_get_indexdef(i.indexrelid) AS def, x.reltuples::int AS entries
       FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid
      WHERE (t.oid = $1::regclass OR t.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass))
        AND x.relname LIKE '%' || $2
      ORDER BY 1`,
    [table, suffix],
  );
  return r.rows;
}

/** The partitions of `table`, by name. */
export async function partitionsOf(c: pg.Client, table: string): Promise<string[]> {
  const r = await c.query<{ p: string }>(
    "SELECT inhrelid::regclass::text AS p FROM pg_inherits WHERE inhparent = $1::regclass ORDER BY 1",
    [table],
  );
  return r.rows.map((x) => x.p);
}

/** The plan of `sql` (EXPLAIN, no costs) as one text. */
export async function planOf(c: pg.Client, sql: string, params: unknown[] = []): Promise<string> {
  const r = await c.query<{ "QUERY PLAN": string }>(`EXPLAIN (COSTS OFF) ${sql}`, params);
  return r.rows.map((x) => x["QUERY PLAN"]).join("\n");
}

/**
 * The index definitions of a month of `table` made after the migration (`PARTITION OF`, named and
 * bounded as svc_partitions_ensure makes them; `month` as `YYYY-MM`): what a later month inherits.
 */
export async function laterMonthIndexDefs(c: pg.Client, table: string, month: string): Promise<string[]> {
  const from = new Date(`${month}-01T00:00:00Z`);
  const part = monthPartition(table, from);
  await c.query(
    `CREATE TABLE ${part} PARTITION OF ${table} FOR VALUES FROM ('${from.toISOString()}') TO ('${addMonths(from, 1).toISOString()}')`,
  );
  const r = await c.query<{ def: string }>(
    "SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indrelid = $1::regclass",
    [part],
  );
  return r.rows.map((x) => x.def);
}
