import pg from "pg";
import { logger } from "../lib/logger.js";
import { createPrisma, type Db } from "./db.js";
import type { RedisClient } from "./redis/client.js";

/**
 * Where a read-only query runs (docs/decisions.md "Read replica"). With
 * DATABASE_URL_READ_REPLICA set, dashboards, history, market statistics and GraphQL queries read
 * from a streaming replica — unless the replica could miss something the caller should see:
 *
 * - **read-your-writes**: a caller's write request records, after it committed and before its
 *   response ends, the time it finished (`wrote`, in Redis: every process sees it). Every
 *   POLL_MS this process samples the primary's WAL position (`pg_current_wal_lsn()`, with the time
 *   the query was sent) and the replica's replay position; the replica is *fresh up to* the latest
 *   sample time whose position it has replayed. A caller whose last write is later than that reads
 *   the primary.
 * - **bounded staleness**: a replica fresh up to more than `maxLagMs` ago (replay paused, a broken
 *   stream, unreachable) serves nobody; everything reads the primary until it catches up. A write's
 *   mark lives longer than `maxLagMs`, so once it is gone the replica is known to hold the write.
 *
 * Admission, settlement and anything read-then-written never come here: they use the primary client
 * they were built with. Without a replica, `reader` is the primary and `wrote` does nothing.
 */
export interface ReadRouting {
  /** whether a replica is configured */
  readonly replicated: boolean;
  /** the client for one read-only page on behalf of `accountId` (null: public data, no caller) */
  reader(accountId: string | null): Promise<Db>;
  /** `accountId` has just committed a write: its reads go to the primary until the replica has it */
  wrote(accountId: string): Promise<void>;
  /** how stale the replica is now (ms since the moment it is fresh up to); undefined: no replica or no sample yet */
  lagMs(): number | undefined;
  close(): Promise<void>;
}

/** The client one read-only page reads with, on behalf of `accountId` (null: public data). */
export type ReadDb = (accountId: string | null) => Promise<Db>;

/** how often the WAL positions are sampled */
export const POLL_MS = 100;
/** clock difference allowed between the process that marked a write and the one that samples (same NTP) */
export const CLOCK_ALLOWANCE_MS = 50;

export function primaryOnly(db: Db): ReadRouting {
  return {
    replicated: false,
    reader: async () => db,
    wrote: async () => undefined,
    lagMs: () => undefined,
    close: async () => undefined,
  };
}

/** "16/B374D848" → a comparable number */
export function parseLsn(lsn: string): bigint {
  const [hi, lo] = lsn.split("/");
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`);
}

/** Keeps the newest mark: an older write finishing late on another process does not shorten it. */
const MARK_SCRIPT = `local cur = redis.call('GET', KEYS[1])
if (not cur) or tonumber(cur) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1`;

export function createReadRouting(opts: {
  primary: Db;
  primaryUrl: string;
  replicaUrl: string;
  maxLagMs: number;
  redis: RedisClient;
  /** the Redis key prefix (RedisKeys.prefix) */
  prefix: string;
  poolSize?: number;
  now?: () => number;
}): ReadRouting {
  const now = opts.now ?? Date.now;
  const replica = createPrisma(opts.replicaUrl, { max: opts.poolSize ?? 20 });
  const probe = (url: string) => {
    const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 2_000 });
    pool.on("error", () => undefined);
    return pool;
  };
  const primaryProbe = probe(opts.primaryUrl);
  const replicaProbe = probe(opts.replicaUrl);
  const markKey = (accountId: string) => `${opts.prefix}:read-replica:wrote:${accountId}`;
  const markTtlMs = opts.maxLagMs + 1_000;
  /** primary WAL positions with the time each query was sent, oldest first */
  let samples: { at: number; lsn: bigint }[] = [];
  let freshUpTo: number | undefined;
  let closed = false;
  let warned = false;

  const poll = async () => {
    const at = now();
    const p = await primaryProbe.query<{ l: string }>("SELECT pg_current_wal_lsn()::text AS l");
    samples.push({ at, lsn: parseLsn(p.rows[0]?.l ?? "0/0") });
    const r = await replicaProbe.query<{ l: string | null }>(
      `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text AS l`,
    );
    const replayed = r.rows[0]?.l ? parseLsn(r.rows[0].l) : -1n;
    let newest = -1;
    for (let i = 0; i < samples.length; i++) if ((samples[i] as { lsn: bigint }).lsn <= replayed) newest = i;
    if (newest >= 0) {
      freshUpTo = (samples[newest] as { at: number }).at;
      samples = samples.slice(newest);
    }
    // a replica far behind: keep what bounds the staleness, not every sample
    if (samples.length > 10_000) samples = samples.filter((_, i) => i % 2 === 0);
    warned = false;
  };
  let timer: NodeJS.Timeout | undefined;
  const loop = async () => {
    try {
      await poll();
    } catch (e) {
      if (!warned)
        logger.warn({ err: (e as Error).message }, "read replica: lag probe failed; reads go to the primary");
      warned = true;
    }
    if (!closed) timer = setTimeout(loop, POLL_MS);
  };
  void loop();

  const lagMs = () => (freshUpTo === undefined ? undefined : Math.max(0, now() - freshUpTo));
  return {
    replicated: true,
    lagMs,
    async reader(accountId) {
      const lag = lagMs();
      if (lag === undefined || lag > opts.maxLagMs) return opts.primary;
      if (accountId === null) return replica;
      const mark = await opts.redis.get(markKey(accountId));
      if (mark !== null && (freshUpTo as number) < Number(mark) + CLOCK_ALLOWANCE_MS) return opts.primary;
      return replica;
    },
    async wrote(accountId) {
      await opts.redis.eval(MARK_SCRIPT, 1, markKey(accountId), String(now()), String(markTtlMs));
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await replica.$disconnect().catch(() => undefined);
      await Promise.all([primaryProbe.end(), replicaProbe.end()]).catch(() => undefined);
    },
  };
}

const WRITER = Symbol("svc.readReplica.writer");
type Noted = { [WRITER]?: string };
interface Ending {
  end: (...args: never[]) => unknown;
}

/** The transport's note that this response's request wrote on behalf of `accountId` (a credentialed write, a GraphQL mutation). */
export function noteWriter(res: object, accountId: string): void {
  (res as Noted)[WRITER] = accountId;
}

/**
 * Delays `res.end` of a write request until its caller's write is marked (`wrote`), so the caller
 * cannot read before the mark exists: everything the request committed happened before its end (a
 * stream settles before its last frame). A request that noted no writer ends as it would.
 */
export function markWriteOnEnd(res: Ending, reads: ReadRouting): void {
  const end = res.end.bind(res) as (...args: unknown[]) => unknown;
  (res as { end: unknown }).end = (...args: unknown[]) => {
    const accountId = (res as Noted)[WRITER];
    if (accountId === undefined) return end(...args);
    reads
      .wrote(accountId)
      .catch((err: Error) => logger.warn({ err: err.message }, "read replica: write mark failed"))
      .finally(() => end(...args));
    return res;
  };
}
