// What the append's shape costs in WAL, apart from everything else a clear does (`--only=append-shape`,
// docs/performance.md "What one row would save"). In a scratch database cloned from the migrated
// template, tables copied from the live schema with their indexes (`LIKE … INCLUDING INDEXES`, so the
// shapes follow the migrations) take 4,000 ended requests in statements of 16, each statement its
// own transaction as a group commit is, in three shapes:
//   two_rows      — today: the request record and its clear, two rows in one statement;
//   one_row       — the request record carrying its clear's columns, the clears' indexes on it;
//   one_row_lean  — that row with its lone successful attempt in those columns (no attempts JSON).
// WAL is attributed to the scratch database with pg_waldump (bench/wal.ts); the shapes alternate
// order each round. No fold, no slices, no ledger: this is the append's own write, not a clear's.
// Then the ids at scale (`append_ids`): today's two rows, their tables first filled with
// BENCH_APPEND_SCALE_ROWS ended requests (500,000) of random (v4) ids, take the same appends after a
// CHECKPOINT with their request and clear ids random (v4) or in time order (v7), alternated. The
// first change to a page after a checkpoint writes the whole page to the WAL: a random id changes a
// random page of its primary key, an id in time order the right edge's
// (docs/decisions.md "Record ids in time order").
import { randomUUID } from "node:crypto";
import pg from "pg";
import { createTestDatabase, PG_ADMIN_URL } from "../testkit/db.js";
import { migrateTemplate } from "../testkit/template.js";
import { databaseWal, relationNames, walPosition } from "./wal.js";

type Emit = (f: Record<string, unknown>) => void;

const STATEMENTS = 250;
const PER_STATEMENT = 16;

const SHAPES_DDL = `
CREATE TABLE shape_requests (LIKE inference_requests INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE TABLE shape_clears (LIKE clears INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE TABLE shape_one (LIKE inference_requests INCLUDING DEFAULTS INCLUDING INDEXES,
  supplier_account_id uuid, offer_id uuid, upstream_key_id uuid, fee_micro_usdc bigint,
  supplier_micro_usdc bigint, refunded_at timestamptz, supplier_held boolean, holder uuid, seq bigint,
  spend_day date);
-- the clears' indexes the request's own do not cover: the supplier's history, the holder's fold, the
-- time (a block-range index, as clears_created_at_idx is)
CREATE INDEX ON shape_one (supplier_account_id, started_at) WHERE supplier_account_id IS NOT NULL;
CREATE INDEX ON shape_one (holder, seq) WHERE holder IS NOT NULL;
CREATE INDEX ON shape_one USING brin (started_at) WITH (autosummarize = on);
CREATE TABLE shape_lean (LIKE shape_one INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE SEQUENCE shape_seq;`;

/** One attempt's record as the append writes it today (docs/decisions.md "Attempts"). */
function attemptsJson(): string {
  const started = new Date();
  return JSON.stringify([
    {
      ordinal: 1,
      key: randomUUID(),
      offer: randomUUID(),
      price: 40,
      outcome: "succeeded",
      status: null,
      detail: null,
      started: started.toISOString(),
      ended: new Date(started.getTime() + 420).toISOString(),
    },
  ]);
}

const ids = {
  buyer: randomUUID(),
  key: randomUUID(),
  supplier: randomUUID(),
  offer: randomUUID(),
  upstreamKey: randomUUID(),
  holder: randomUUID(),
};

const REQUEST_COLUMNS = `gen_random_uuid(), gen_random_uuid(), '${ids.buyer}', '${ids.key}', 'chat', 'text',
  'zai-org-glm-5-1', false, 'succeeded', NULL, 60, 40, 512, 812, 233, 0, 1234567, 493827, 1, t, t, t`;

function statement(shape: string): string {
  const v = `(SELECT now() + g * interval '1 ms' AS t FROM generate_series(1, ${PER_STATEMENT}) g)`;
  if (shape === "two_rows") {
    return `WITH v AS (SELECT gen_random_uuid() AS id, t FROM ${v} s),
      r AS (INSERT INTO shape_requests SELECT id, gen_random_uuid(), '${ids.buyer}', '${ids.key}', 'chat', 'text',
              'zai-org-glm-5-1', false, 'succeeded', NULL, 60, 40, 512, 812, 233, 0, 1234567, 493827, 1, t, t, t,
              '${attemptsJson()}', 0, NULL FROM v RETURNING 1)
      INSERT INTO shape_clears SELECT gen_random_uuid(), id, '${ids.buyer}', '${ids.supplier}', '${ids.offer}',
        '${ids.upstreamKey}', 'zai-org-glm-5-1', 'text', 40, 60, 1234567, 493827, 24691, 469136, NULL, t, false,
        NULL, '${ids.holder}', nextval('shape_seq'), '${ids.key}', current_date FROM v`;
  }
  const table = shape === "one_row" ? "shape_one" : "shape_lean";
  const attempts = shape === "one_row" ? `'${attemptsJson()}'` : "'[]'";
  return `INSERT INTO ${table} SELECT ${REQUEST_COLUMNS}, ${attempts}, 0, NULL, '${ids.supplier}', '${ids.offer}',
    '${ids.upstreamKey}', 24691, 469136, NULL, false, '${ids.holder}', nextval('shape_seq'), current_date FROM ${v} s`;
}

/** A v7 uuid of `t` in SQL (PostgreSQL 15 has no uuidv7()): 48 bits of ms, version 7, variant 10. */
const V7 = (t: string) =>
  `(lpad(to_hex((extract(epoch FROM ${t}) * 1000)::bigint), 12, '0') || '7' || substr(md5(random()::text), 1, 3)
    || substr('89ab', 1 + floor(random() * 4)::int, 1) || substr(md5(random()::text), 1, 15))::uuid`;

/** Today's append (two rows, the lone attempt stored as its clear) with ids `v4` or `v7`. */
function idsStatement(kind: "v4" | "v7" | "fill", n: number): string {
  const id = (t: string) => (kind === "v7" ? V7(t) : "gen_random_uuid()");
  const at = kind === "fill" ? `now() - interval '1 day' + g * interval '1 ms'` : "now() + g * interval '1 ms'";
  return `WITH v AS (SELECT ${id("t")} AS id, ${id("t")} AS clear, t
                       FROM (SELECT ${at} AS t FROM generate_series(1, ${n}) g) s),
      r AS (INSERT INTO shape_requests SELECT id, ${V7("t")}, '${ids.buyer}', '${ids.key}', 'chat', 'text',
              'zai-org-glm-5-1', false, 'succeeded', NULL, 60, 40, 512, 812, 233, 0, 1234567, 493827, 1, t, t, t,
              '[]', 0, NULL FROM v RETURNING 1)
      INSERT INTO shape_clears SELECT clear, id, '${ids.buyer}', '${ids.supplier}', '${ids.offer}',
        '${ids.upstreamKey}', 'zai-org-glm-5-1', 'text', 40, 60, 1234567, 493827, 24691, 469136, NULL, t, false,
        NULL, '${ids.holder}', nextval('shape_seq'), '${ids.key}', current_date FROM v`;
}

/** The ids at scale: see the head of this file. */
async function idsAtScale(emit: Emit, admin: pg.Client, c: pg.Client, oid: number, rounds: number): Promise<void> {
  const rows = Number(process.env.BENCH_APPEND_SCALE_ROWS ?? 500_000);
  await c.query("TRUNCATE shape_requests, shape_clears");
  for (let done = 0; done < rows; done += 50_000) await c.query(idsStatement("fill", Math.min(50_000, rows - done)));
  await c.query("VACUUM ANALYZE shape_requests, shape_clears");
  const pages = await c.query<{ name: string; pages: number }>(
    `SELECT relname AS name, relpages AS pages FROM pg_class
      WHERE relname IN ('shape_requests_pkey', 'shape_clears_pkey') ORDER BY 1`,
  );
  for (let round = 1; round <= rounds; round++) {
    const order: ("v4" | "v7")[] = round % 2 === 1 ? ["v4", "v7"] : ["v7", "v4"];
    for (const kind of order) {
      await admin.query("CHECKPOINT");
      const from = await walPosition(admin);
      for (let i = 0; i < STATEMENTS; i++) await c.query(idsStatement(kind, PER_STATEMENT));
      const to = await walPosition(admin);
      const wal = await databaseWal(admin, oid, from, to);
      const requests = STATEMENTS * PER_STATEMENT;
      emit(
        "unavailable" in wal
          ? { bench: "append_ids", ids: kind, round, unavailable: wal.unavailable }
          : {
              bench: "append_ids",
              ids: kind,
              round,
              rowsBefore: rows,
              primaryKeyLeafPages: Object.fromEntries(pages.rows.map((p) => [p.name, p.pages])),
              requests,
              walBytesPerRequest: Math.round(wal.bytes / requests),
              walRecordsPerRequest: Number((wal.records / requests).toFixed(2)),
              byRelation: await relationNames(c, wal.byFile, requests),
            },
      );
    }
  }
}

export async function benchAppendShape(emit: Emit, rounds = 2): Promise<void> {
  await migrateTemplate();
  const db = await createTestDatabase();
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  const c = new pg.Client({ connectionString: db.url });
  await admin.connect();
  await c.connect();
  try {
    const oid = Number(
      (await admin.query<{ oid: string }>("SELECT oid::text FROM pg_database WHERE datname = $1", [db.name])).rows[0]
        ?.oid,
    );
    await c.query(SHAPES_DDL);
    const shapes = ["two_rows", "one_row", "one_row_lean"];
    for (let round = 1; round <= rounds; round++) {
      const order = round % 2 === 1 ? shapes : [...shapes].reverse();
      for (const shape of order) {
        const from = await walPosition(admin);
        for (let i = 0; i < STATEMENTS; i++) await c.query(statement(shape));
        const to = await walPosition(admin);
        const wal = await databaseWal(admin, oid, from, to);
        const requests = STATEMENTS * PER_STATEMENT;
        emit(
          "unavailable" in wal
            ? { bench: "append_shape", shape, round, unavailable: wal.unavailable }
            : {
                bench: "append_shape",
                shape,
                round,
                requests,
                walBytesPerRequest: Math.round(wal.bytes / requests),
                walRecordsPerRequest: Number((wal.records / requests).toFixed(2)),
                transactions: wal.transactions,
              },
        );
      }
    }
    await idsAtScale(emit, admin, c, oid, rounds);
  } finally {
    await c.end();
    await admin.end();
    await db.drop();
  }
}
