import type { Db } from "../../adapters/db.js";
import type { Clock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";

/**
 * The webhook outbox (docs/decisions.md "Webhooks"). `emit` writes one `webhook_events`
 * row per active endpoint of the account that takes the event, IN THE CALLER'S TRANSACTION: the
 * event and its notification commit together or not at all, so no event is lost when the process
 * dies right after it. Once the caller committed, `dispatch` queues a delivery job per row; a row
 * whose job never got queued (a crash between the commit and `dispatch`, Redis down) is queued by
 * the sweeper (`sweep`: on worker start and every 30 s). Delivery is at least once; the row's id is
 * the `webhook-id` of every attempt.
 */

type PrismaTx = { $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T> };
type PgTx = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> };
/** An open transaction: Prisma's interactive one, or a `pg` client between BEGIN and COMMIT. */
export type OutboxTx = PrismaTx | PgTx;

/** One SQL text for either client (parameters `$1…`). */
export async function query<T>(tx: OutboxTx, text: string, params: unknown[]): Promise<T[]> {
  if ("$queryRawUnsafe" in tx) return tx.$queryRawUnsafe<T[]>(text, ...params);
  return (await tx.query(text, params)).rows as T[];
}

/** An event's `data` (JSON: amounts as six-decimal strings, never bigints or secrets). */
export type EventData = Record<string, unknown>;

/** What an event may depend on per endpoint (`balance.low` compares with each one's threshold). */
export interface EndpointFacts {
  id: string;
  balanceLowThresholdMicroUsdc: bigint | null;
}

/** Where delivery jobs go (`adapters/queues.ts` `webhookProducer`). */
export interface DeliveryQueue {
  /**
   * Queues attempt `attempt` of the row. `turn` names a lane's hand-off (a released lease's token):
   * such a job has an id of its own, since the row's own job may still be finishing.
   */
  enqueue(eventId: string, attempt: number, delayMs: number, turn?: string): Promise<void>;
}

export interface OutboxDeps {
  db: Db;
  clock: Clock;
  queue: DeliveryQueue;
}

const INSERT_SQL = `
  INSERT INTO webhook_events (id, endpoint_id, type, payload, dedupe_key, next_attempt_at, created_at)
  SELECT gen_random_uuid(), x.endpoint, $1, x.payload, $2, $3::timestamptz, $3::timestamptz
    FROM jsonb_to_recordset($4::jsonb) AS x(endpoint uuid, payload jsonb)
  ON CONFLICT (endpoint_id, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
  RETURNING id::text AS id`;

export class WebhookOutbox {
  constructor(private readonly deps: OutboxDeps) {}

  /**
   * Which of `accountIds` have an active endpoint taking any of `types`: account → the types it
   * takes. One indexed read; callers with many candidate events ask it first.
   */
  async subscribers(tx: OutboxTx, accountIds: readonly string[], types: readonly string[]) {
    const out = new Map<string, Set<string>>();
    if (accountIds.length === 0) return out;
    const rows = await query<{ account: string; type: string }>(
      tx,
      `SELECT DISTINCT e.account_id::text AS account, t.type
         FROM webhook_endpoints e CROSS JOIN LATERAL unnest(e.events) AS t(type)
        WHERE e.account_id = ANY($1::uuid[]) AND e.status = 'active' AND t.type = ANY($2::text[])`,
      [[...new Set(accountIds)], [...types]],
    );
    for (const r of rows) {
      const set = out.get(r.account) ?? new Set<string>();
      set.add(r.type);
      out.set(r.account, set);
    }
    return out;
  }

  /**
   * Records `type` for every active endpoint of `accountId` that takes it, in `tx` (the caller's
   * transaction). `data` may depend on the endpoint (null: not for this one). Locks the endpoint
   * rows it writes for (KEY SHARE: a concurrent deletion waits, it never fails the caller). With a
   * `dedupeKey`, an endpoint gets the event once (a repeat is dropped). The ids written, to
   * `dispatch` after the commit.
   */
  async emit(
    tx: OutboxTx,
    accountId: string,
    type: string,
    data: EventData | ((endpoint: EndpointFacts) => EventData | null),
    opts: { dedupeKey?: string } = {},
  ): Promise<string[]> {
    const endpoints = await query<{ id: string; threshold: bigint | string | null }>(
      tx,
      `SELECT id::text AS id, balance_low_threshold_micro_usdc AS threshold FROM webhook_endpoints
        WHERE account_id = $1::uuid AND status = 'active' AND $2 = ANY(events)
        ORDER BY id FOR KEY SHARE`,
      [accountId, type],
    );
    const rows: { endpoint: string; payload: EventData }[] = [];
    for (const e of endpoints) {
      const facts = { id: e.id, balanceLowThresholdMicroUsdc: e.threshold === null ? null : BigInt(e.threshold) };
      const payload = typeof data === "function" ? data(facts) : data;
      if (payload) rows.push({ endpoint: e.id, payload });
    }
    return this.insert(tx, type, rows, opts.dedupeKey ?? null);
  }

  /**
   * `emit` for many events of one type: asks `subscribers` once and writes only for the accounts
   * that take it (most take none). The ids written, to `dispatch` after the commit.
   */
  async emitEach(
    tx: OutboxTx,
    type: string,
    events: readonly { accountId: string; data: EventData; dedupeKey: string }[],
  ): Promise<string[]> {
    if (events.length === 0) return [];
    const takes = await this.subscribers(
      tx,
      events.map((e) => e.accountId),
      [type],
    );
    const ids: string[] = [];
    for (const e of events) {
      if (takes.has(e.accountId))
        ids.push(...(await this.emit(tx, e.accountId, type, e.data, { dedupeKey: e.dedupeKey })));
    }
    return ids;
  }

  /** Records `type` for one endpoint (the test event), whatever it subscribes to. */
  async emitTo(tx: OutboxTx, endpointId: string, type: string, data: EventData): Promise<string[]> {
    return this.insert(tx, type, [{ endpoint: endpointId, payload: data }], null);
  }

  /**
   * Queues the first attempt of each row written (after the commit). Never throws: a row whose job
   * is not queued here is found by the sweeper.
   */
  async dispatch(ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      try {
        await this.deps.queue.enqueue(id, 0, 0);
      } catch (err) {
        logger.warn({ err, eventId: id }, "webhook delivery not queued; the sweeper will queue it");
      }
    }
  }

  /**
   * The sweeper (worker): queues every pending row that is due (its job may be lost: a crash before
   * `dispatch`, a job that threw, Redis lost its data). Re-queuing a row whose job still waits or
   * runs changes nothing: the job id is the row's and attempt's, and BullMQ keeps one job per id.
   * How many it queued.
   */
  async sweep(limit = 1000): Promise<number> {
    const due = this.deps.clock.now();
    const rows = await this.deps.db.webhookEvent.findMany({
      where: { status: "pending", nextAttemptAt: { lte: due } },
      select: { id: true, attempts: true },
      orderBy: { nextAttemptAt: "asc" },
      take: limit,
    });
    for (const r of rows) await this.deps.queue.enqueue(r.id, r.attempts, 0);
    return rows.length;
  }

  /**
   * The next due rows of `accountId` to hand its free lanes to: the oldest due pending row of each
   * active endpoint not in `busy`, oldest first, at most `limit` (one per endpoint). Reads the
   * pending-due index per endpoint (10 endpoints per account at most).
   */
  async nextDue(
    accountId: string,
    busy: readonly string[],
    limit: number,
  ): Promise<{ id: string; attempts: number }[]> {
    if (limit < 1) return [];
    return this.deps.db.$queryRawUnsafe<{ id: string; attempts: number }[]>(
      `SELECT x.id::text AS id, x.attempts
         FROM webhook_endpoints p
         CROSS JOIN LATERAL (
           SELECT e.id, e.attempts, e.next_attempt_at FROM webhook_events e
            WHERE e.endpoint_id = p.id AND e.status = 'pending' AND e.next_attempt_at <= $2::timestamptz
            ORDER BY e.next_attempt_at LIMIT 1) x
        WHERE p.account_id = $1::uuid AND p.status = 'active' AND p.id <> ALL($3::uuid[])
        ORDER BY x.next_attempt_at LIMIT $4`,
      accountId,
      this.deps.clock.now().toISOString(),
      [...busy],
      limit,
    );
  }

  private async insert(
    tx: OutboxTx,
    type: string,
    rows: { endpoint: string; payload: EventData }[],
    dedupeKey: string | null,
  ): Promise<string[]> {
    if (rows.length === 0) return [];
    const now = this.deps.clock.now().toISOString();
    const ids = await query<{ id: string }>(tx, INSERT_SQL, [type, dedupeKey, now, JSON.stringify(rows)]);
    return ids.map((r) => r.id);
  }
}
