import type { Db } from "../../adapters/db.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { CursorKey } from "../../lib/cursor.js";
import { newestReadBound } from "../../lib/partitions.js";
import { uuidV7Time } from "../../lib/uuid7.js";
import type { HistoryRow } from "./account-types.js";

/**
 * The buyer history's reads of `inference_requests`, partitioned by month (docs/decisions.md
 * "Monthly partitions and retention"): one statement each, the key's name joined in, the columns a
 * row shows and no more (not the attempts' JSON). A page is bounded above by its cursor's time, or
 * now and a day (`newestReadBound`), so the planner prunes the later months and the DEFAULT
 * partition and reads the months newest first on (account_id, started_at DESC, id DESC), stopping
 * at the page.
 */

export interface HistoryQuery {
  accountId: string;
  modality?: string;
  apiKeyId?: string;
  /** started at or after */
  from?: Date;
  /** started before */
  to?: Date;
  /** only rows after this key in newest-first order */
  after?: CursorKey;
  /** the reader's clock */
  now: Date;
  limit: number;
}

interface Row {
  id: string;
  account_id: string;
  support_reference: string;
  api_key_id: string | null;
  key_name: string | null;
  route: string;
  modality: string;
  model: string;
  stream: boolean;
  status: string;
  error_code: string | null;
  max_price_cents: number;
  clearing_price_cents: number | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cached_tokens: number | null;
  cache_write_tokens: number | null;
  burn_micro_diem: bigint | null;
  cost_micro_usdc: bigint | null;
  attempt_count: number;
  started_at: Date;
  first_byte_at: Date | null;
  completed_at: Date | null;
}

const SELECT = Prisma.sql`
  SELECT r.id::text AS id, COALESCE(r.support_reference, r.id)::text AS support_reference, r.api_key_id::text AS api_key_id,
         k.name AS key_name, r.route::text AS route, r.modality::text AS modality, r.model, r.stream,
         r.status::text AS status, r.error_code, r.max_price_cents, r.clearing_price_cents, r.prompt_tokens,
         r.completion_tokens, r.cached_tokens, r.cache_write_tokens, r.burn_micro_diem, r.cost_micro_usdc,
         r.attempt_count, r.started_at, r.first_byte_at, r.completed_at, r.account_id::text AS account_id
    FROM inference_requests r LEFT JOIN api_keys k ON k.id = r.api_key_id`;

/** A page of an account's requests, newest first (`limit` rows: ask one more to learn of a next page). */
export async function historyPage(db: Pick<Db, "$queryRaw">, q: HistoryQuery): Promise<HistoryRow[]> {
  const where: Prisma.Sql[] = [
    Prisma.sql`r.account_id = ${q.accountId}::uuid`,
    Prisma.sql`r.started_at <= ${newestReadBound(q.now, q.after?.at)}::timestamptz`,
  ];
  if (q.modality !== undefined) where.push(Prisma.sql`r.modality::text = ${q.modality}`);
  if (q.apiKeyId !== undefined) where.push(Prisma.sql`r.api_key_id = ${q.apiKeyId}::uuid`);
  if (q.from) where.push(Prisma.sql`r.started_at >= ${q.from}::timestamptz`);
  if (q.to) where.push(Prisma.sql`r.started_at < ${q.to}::timestamptz`);
  if (q.after) where.push(Prisma.sql`(r.started_at, r.id) < (${q.after.at}::timestamptz, ${q.after.id}::uuid)`);
  const rows = await db.$queryRaw<Row[]>`${SELECT} WHERE ${Prisma.join(where, " AND ")}
    ORDER BY r.started_at DESC, r.id DESC LIMIT ${q.limit}`;
  return rows.map(historyRow);
}

/**
 * A record's support reference: its request id, or the reference a record written before that stored
 * beside it (decisions.md "The support reference is the request id"); SQL reads it as
 * `COALESCE(support_reference, id)`.
 */
export function supportReferenceOf(r: { id: string; supportReference: string | null }): string {
  return r.supportReference ?? r.id;
}

/**
 * A request by support reference: its request id (decisions.md "The support reference is the request
 * id"), or the reference an older record stored beside its id. A v7 reference carries the request's
 * arrival (`uuidV7Time`), and its record started within a day of it, so the lookup reads that day's
 * partitions alone, on their primary keys (and, for an older record, the unique index (support_reference,
 * started_at) at its start); a v4 reference (made before v7 ones), or one not found there, is looked up
 * in every partition.
 */
export async function requestByReference(
  db: Pick<Db, "$queryRaw">,
  supportReference: string,
): Promise<(HistoryRow & { accountId: string }) | null> {
  const find = async (where: Prisma.Sql) => (await db.$queryRaw<Row[]>`${SELECT} WHERE ${where} LIMIT 1`)[0];
  const ref = Prisma.sql`${supportReference}::uuid`;
  const at = uuidV7Time(supportReference);
  const row =
    (at
      ? await find(Prisma.sql`(r.id = ${ref} AND r.started_at >= ${at}::timestamptz
                                 AND r.started_at < ${at}::timestamptz + interval '1 day')
                              OR (r.support_reference = ${ref} AND r.started_at = ${at}::timestamptz)`)
      : undefined) ?? (await find(Prisma.sql`r.id = ${ref} OR r.support_reference = ${ref}`));
  return row ? { ...historyRow(row), accountId: row.account_id } : null;
}

function historyRow(r: Row): HistoryRow {
  return {
    requestId: r.id,
    supportReference: r.support_reference,
    keyId: r.api_key_id,
    keyName: r.key_name,
    route: r.route,
    modality: r.modality,
    model: r.model,
    stream: r.stream,
    status: r.status,
    errorCode: r.error_code,
    maxPriceCents: r.max_price_cents,
    clearingPriceCents: r.clearing_price_cents,
    promptTokens: r.prompt_tokens,
    completionTokens: r.completion_tokens,
    cachedTokens: r.cached_tokens,
    cacheWriteTokens: r.cache_write_tokens,
    burnMicroDiem: r.burn_micro_diem === null ? null : BigInt(r.burn_micro_diem),
    costMicroUsdc: r.cost_micro_usdc === null ? null : BigInt(r.cost_micro_usdc),
    attempts: r.attempt_count,
    startedAt: r.started_at,
    firstByteAt: r.first_byte_at,
    completedAt: r.completed_at,
  };
}
