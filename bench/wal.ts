// WAL written on behalf of one database between two positions, read back with `pg_waldump`:
// `pg_current_wal_lsn()` moves with every database of the server (on a shared machine, other test
// runs creating databases write tens of MB a second), so the bench attributes records itself. A
// record belongs to the database when a block it references is in it (`rel <tablespace>/<db>/<rel>`)
// or when its transaction wrote such a block (its commit record, for one). Records of no database
// (checkpoints, running-xacts snapshots) and WAL page headers are not counted: the cluster-wide
// figure beside it is the upper bound.
import { spawn } from "node:child_process";
import { accessSync, constants, existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type pg from "pg";

export interface WalPosition {
  lsn: string;
}

export interface DatabaseWal {
  /** record bytes (with full-page images) of the database's records and its transactions' */
  bytes: number;
  records: number;
  /** transactions that wrote to the database (distinct xids) */
  transactions: number;
  /** every byte of WAL between the two positions, all databases (pg_wal_lsn_diff) */
  clusterBytes: number;
  /**
   * the database's record bytes and records by the relation file of the first block each names (a
   * `relfilenode`; `relationNames` turns them into names); records that name none (commits) are under
   * "none"
   */
  byFile: Map<string, { bytes: number; records: number }>;
}

export async function walPosition(admin: pg.Client): Promise<WalPosition> {
  const r = await admin.query<{ l: string }>("SELECT pg_current_wal_lsn()::text AS l");
  return { lsn: r.rows[0]?.l ?? "0/0" };
}

/** Where pg_waldump and the server's pg_wal are, when this machine runs the server and may read it. */
async function locate(admin: pg.Client): Promise<{ waldump: string; walDir: string } | { unavailable: string }> {
  const r = await admin.query<{ v: string; d: string }>(
    "SELECT current_setting('server_version_num') AS v, current_setting('data_directory') AS d",
  );
  const major = Math.floor(Number(r.rows[0]?.v) / 10_000);
  const waldump = `/usr/lib/postgresql/${major}/bin/pg_waldump`;
  const walDir = join(r.rows[0]?.d ?? "", "pg_wal");
  if (!existsSync(waldump)) return { unavailable: `no ${waldump}` };
  try {
    accessSync(walDir, constants.R_OK);
  } catch {
    return { unavailable: `cannot read ${walDir} (run as root or postgres on the server's machine)` };
  }
  return { waldump, walDir };
}

const RECORD = /len \(rec\/tot\):\s*\d+\/\s*(\d+), tx:\s*(\d+),/;
const REL = / rel \d+\/(\d+)\/(\d+)/g;

export async function databaseWal(
  admin: pg.Client,
  databaseOid: number,
  from: WalPosition,
  to: WalPosition,
): Promise<DatabaseWal | { unavailable: string; clusterBytes: number }> {
  const diff = await admin.query<{ b: string }>("SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS b", [
    to.lsn,
    from.lsn,
  ]);
  const clusterBytes = Number(diff.rows[0]?.b ?? 0);
  const where = await locate(admin);
  if ("unavailable" in where) return { ...where, clusterBytes };
  const byFile = new Map<string, { bytes: number; records: number }>();
  const add = (file: string, b: number, n: number) => {
    const t = byFile.get(file) ?? { bytes: 0, records: 0 };
    t.bytes += b;
    t.records += n;
    byFile.set(file, t);
  };
  if (clusterBytes === 0) return { bytes: 0, records: 0, transactions: 0, clusterBytes, byFile };
  const db = String(databaseOid);
  let bytes = 0;
  let records = 0;
  const ours = new Set<string>();
  /** bytes and records of transactions' records that name no block of any database (commits, mostly) */
  const byXid = new Map<string, { bytes: number; records: number }>();
  const child = spawn(where.waldump, ["-p", where.walDir, "-s", from.lsn, "-e", to.lsn], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr = (stderr + String(d)).slice(-2000);
  });
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  for await (const line of createInterface({ input: child.stdout })) {
    const m = RECORD.exec(line);
    if (!m) continue;
    const tot = Number(m[1]);
    const xid = m[2] as string;
    const rels = [...line.matchAll(REL)];
    const dbs = rels.map((x) => x[1]);
    if (dbs.includes(db)) {
      bytes += tot;
      records++;
      add(rels.find((x) => x[1] === db)?.[2] ?? "none", tot, 1);
      if (xid !== "0") ours.add(xid);
    } else if (dbs.length === 0 && xid !== "0") {
      const t = byXid.get(xid) ?? { bytes: 0, records: 0 };
      t.bytes += tot;
      t.records++;
      byXid.set(xid, t);
    }
  }
  const code = await exited;
  // pg_waldump ends with an error at the end position when the last record runs past it: harmless
  if (code !== 0 && !/could not find a valid record|invalid record length|end of WAL/.test(stderr) && records === 0)
    return { unavailable: `pg_waldump exited ${code}: ${stderr.trim().slice(0, 300)}`, clusterBytes };
  for (const xid of ours) {
    const t = byXid.get(xid);
    if (t) {
      bytes += t.bytes;
      records += t.records;
      add("none", t.bytes, t.records);
    }
  }
  return { bytes, records, transactions: ours.size, clusterBytes, byFile };
}

/**
 * `byFile` by relation name, per `per` (a clear, a request), largest first: a partition is named as
 * its partitioned table or index (`clears_2026_11_pkey` → `clears_pkey`), so months add up.
 */
export async function relationNames(
  db: pg.Client,
  byFile: Map<string, { bytes: number; records: number }>,
  per: number,
): Promise<Record<string, { bytes: number; records: number }>> {
  const r = await db.query<{ f: string; name: string }>(
    `SELECT c.relfilenode::text AS f,
            COALESCE((SELECT p.relname FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
                       WHERE i.inhrelid = c.oid LIMIT 1), c.relname) AS name
       FROM pg_class c WHERE c.relfilenode <> 0`,
  );
  const names = new Map(r.rows.map((x) => [x.f, x.name]));
  const out = new Map<string, { bytes: number; records: number }>();
  for (const [f, t] of byFile) {
    const name = f === "none" ? "(commits and other records of its transactions)" : (names.get(f) ?? `file ${f}`);
    const o = out.get(name) ?? { bytes: 0, records: 0 };
    o.bytes += t.bytes;
    o.records += t.records;
    out.set(name, o);
  }
  return Object.fromEntries(
    [...out]
      .sort((a, b) => b[1].bytes - a[1].bytes)
      .map(([k, t]) => [k, { bytes: Math.round(t.bytes / per), records: +(t.records / per).toFixed(2) }]),
  );
}
