import type pg from "pg";
import { createPrisma, type Db } from "../src/adapters/db.js";

/**
 * Query plans of what the service actually sends: a Prisma client that records each statement with
 * its parameters, and EXPLAIN (ANALYZE, BUFFERS) of a recorded statement, as JSON (for assertions)
 * or text (for people). For the partitioning proofs (test/integration/db/partition-plans.test.ts,
 * scripts/scale-rows.ts).
 */

export interface Statement {
  sql: string;
  params: unknown[];
}

/** A Prisma client on `databaseUrl` whose statements land in `statements` (clear it between calls). */
export function recordingPrisma(databaseUrl: string): { db: Db; statements: Statement[] } {
  const statements: Statement[] = [];
  const db = createPrisma(databaseUrl, {
    max: 2,
    onQuery: (sql, params) => statements.push({ sql, params: JSON.parse(params || "[]") as unknown[] }),
  });
  return { db, statements };
}

/** One node of EXPLAIN (FORMAT JSON) output, the fields read here. */
export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  "Shared Hit Blocks": number;
  "Shared Read Blocks": number;
  Plans?: PlanNode[];
}

export interface Explained {
  plan: PlanNode;
  planningMs: number;
  executionMs: number;
}

export async function explainJson(c: pg.ClientBase, s: Statement): Promise<Explained> {
  const r = await c.query<{ "QUERY PLAN": { Plan: PlanNode; "Planning Time": number; "Execution Time": number }[] }>(
    `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${s.sql}`,
    s.params,
  );
  const top = r.rows[0]?.["QUERY PLAN"][0];
  if (!top) throw new Error("no plan");
  return { plan: top.Plan, planningMs: top["Planning Time"], executionMs: top["Execution Time"] };
}

export async function explainText(c: pg.ClientBase, s: Statement): Promise<string> {
  const r = await c.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${s.sql}`, s.params);
  return r.rows.map((row) => row["QUERY PLAN"]).join("\n");
}

/** Every node of the plan, depth first. */
export function planNodes(p: PlanNode): PlanNode[] {
  return [p, ...(p.Plans ?? []).flatMap(planNodes)];
}

/**
 * The scans that ran (a pruned or never-executed partition's scan has no loops), of `table`'s
 * partitions when given (`<table>_…`).
 */
export function executedScans(p: PlanNode, table?: string): PlanNode[] {
  return planNodes(p).filter(
    (n) =>
      /Scan/.test(n["Node Type"]) &&
      n["Actual Loops"] > 0 &&
      (table === undefined || (n["Relation Name"] ?? "").startsWith(`${table}_`)),
  );
}

/** Shared buffers the statement touched (hit in cache or read); `table`: its partitions' scans alone. */
export function buffersOf(p: PlanNode, table?: string): number {
  if (table === undefined) return p["Shared Hit Blocks"] + p["Shared Read Blocks"];
  return executedScans(p, table).reduce((a, n) => a + n["Shared Hit Blocks"] + n["Shared Read Blocks"], 0);
}

/** Whether a statement's FROM names `table` (Prisma's `"public"."t"`, or a raw `t`). */
export function reads(s: Statement, table: string): boolean {
  return new RegExp(`FROM\\s+(?:"public"\\.)?"?${table}"?[\\s,]`).test(`${s.sql} `);
}

/** The statement of `statements` that reads `table` (the first whose FROM names it). */
export function statementOn(statements: Statement[], table: string): Statement {
  const s = statements.find((x) => reads(x, table));
  if (!s) throw new Error(`no statement on ${table} among ${statements.length}`);
  return s;
}
