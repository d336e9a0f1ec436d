import type { Db } from "../../adapters/db.js";
import type { Prisma } from "../../generated/prisma/client.js";
import { utcDay } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { MAX_KEY_LIMIT_MICRO_USDC, MAX_KEY_MODEL_ID_LENGTH, MAX_KEY_MODELS } from "../../lib/key-bounds.js";
import { formatDecimal6, MAX_CEILING_CENTS, MIN_CEILING_CENTS } from "../../lib/money.js";
import { bareModelId } from "../catalog/catalog-service.js";
import { budgetPeriod, LIMIT_RESETS, type LimitReset } from "./key-period.js";

/**
 * A key's policy and what it spent (docs/decisions.md "Per-key policy"): the one place
 * for its rules. Every route that mints, changes or lists keys (REST session and agent routes,
 * GraphQL, MCP) goes through `policyColumns` and `keyUsage`, so they refuse and show the same.
 */

/** What a key may do. `null` (and empty `models`) means no such limit. */
export interface KeyPolicy {
  /** the most the key may spend per period (> 0) */
  limitMicroUsdc: bigint | null;
  limitReset: LimitReset;
  /** the key's own ceiling (30-80); the effective ceiling is the lower of it and the account's */
  maxPriceCentsPerDollar: number | null;
  /** bare catalog ids the key may call; empty = every model */
  models: string[];
  /** after it the key authenticates nothing, as a revoked key */
  expiresAt: Date | null;
}

/** A key with no policy: the signup key, and every key minted without one. */
export const NO_POLICY: KeyPolicy = {
  limitMicroUsdc: null,
  limitReset: "never",
  maxPriceCentsPerDollar: null,
  models: [],
  expiresAt: null,
};

/** What a key spent in the period that contains now, and what its limit leaves. */
export interface KeyUsage {
  /** the charges of the key's requests started in the current period (`budgetPeriod`), refunds left out */
  spentMicroUsdc: bigint;
  /** limit − spent, never below 0; null when the key has no limit */
  remainingMicroUsdc: bigint | null;
  /** the next period boundary; null when the key has no limit or its limit never resets */
  resetsAt: Date | null;
}

/**
 * What a create or an update asks for. A field left out is unchanged (at creation: not set); `null`
 * removes the setting. REST's `limitUsdc` decimal string arrives here already in micro-USDC.
 */
export interface KeyPolicyChange {
  limitMicroUsdc?: bigint | null;
  limitReset?: LimitReset | null;
  maxPriceCentsPerDollar?: number | null;
  models?: readonly string[] | null;
  expiresAt?: Date | null;
}

/** The fields a change may name, in the order they are checked. */
export const POLICY_FIELDS = ["limitUsdc", "limitReset", "maxPriceCentsPerDollar", "models", "expiresAt"] as const;

/** Which of these bare ids are catalog rows (listed and not disabled): the catalog service answers. */
export type ListedModelIds = (bareIds: readonly string[]) => Promise<ReadonlySet<string>>;

const invalid = (field: string, message: string) => new DomainError("invalid_request", message, { field });

/**
 * THE policy rules: checks a change and returns the columns to write. Every field is checked before
 * anything is written, in the order of POLICY_FIELDS; the first bad one is a 400 naming it:
 *   limitUsdc > 0 and at most MAX_KEY_LIMIT_MICRO_USDC; limitReset one of LIMIT_RESETS (null = never);
 *   maxPriceCentsPerDollar an integer 30-80; models 1-100 catalog ids, bare or `svc/`, stored bare and
 *   once each (unknown, disabled or unlisted ids refused: docs/decisions.md); expiresAt after `now`.
 * @throws DomainError invalid_request naming the field
 */
export async function policyColumns(
  change: KeyPolicyChange,
  ctx: { now: Date; listedModelIds: ListedModelIds },
): Promise<Partial<KeyPolicy>> {
  const out: Partial<KeyPolicy> = {};
  const limit = change.limitMicroUsdc;
  if (limit !== undefined) {
    if (limit !== null && (typeof limit !== "bigint" || limit <= 0n || limit > MAX_KEY_LIMIT_MICRO_USDC)) {
      throw invalid(
        "limitUsdc",
        `limitUsdc must be above 0 and at most ${formatDecimal6(MAX_KEY_LIMIT_MICRO_USDC)} USDC, with six decimals (e.g. "5.000000"); nothing was changed.`,
      );
    }
    out.limitMicroUsdc = limit;
  }
  const reset = change.limitReset;
  if (reset !== undefined) {
    if (reset !== null && !LIMIT_RESETS.includes(reset)) {
      throw invalid("limitReset", `limitReset must be one of ${LIMIT_RESETS.join(", ")}; nothing was changed.`);
    }
    out.limitReset = reset ?? "never";
  }
  const ceiling = change.maxPriceCentsPerDollar;
  if (ceiling !== undefined) {
    if (
      ceiling !== null &&
      (typeof ceiling !== "number" ||
        !Number.isInteger(ceiling) ||
        ceiling < MIN_CEILING_CENTS ||
        ceiling > MAX_CEILING_CENTS)
    ) {
      throw invalid(
        "maxPriceCentsPerDollar",
        `maxPriceCentsPerDollar must be an integer ${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}; nothing was changed.`,
      );
    }
    out.maxPriceCentsPerDollar = ceiling;
  }
  if (change.models !== undefined) out.models = await modelColumn(change.models, ctx.listedModelIds);
  const expiresAt = change.expiresAt;
  if (expiresAt !== undefined) {
    if (expiresAt !== null && (!(expiresAt instanceof Date) || Number.isNaN(expiresAt.getTime()))) {
      throw invalid("expiresAt", "expiresAt must be an ISO 8601 timestamp; nothing was changed.");
    }
    if (expiresAt !== null && expiresAt.getTime() <= ctx.now.getTime()) {
      throw invalid(
        "expiresAt",
        `expiresAt must be in the future (now is ${ctx.now.toISOString()}); nothing was changed.`,
      );
    }
    out.expiresAt = expiresAt;
  }
  return out;
}

/** `models`: null = every model (stored empty); otherwise 1-100 known catalog ids, stored bare, once each. */
async function modelColumn(models: readonly string[] | null, listed: ListedModelIds): Promise<string[]> {
  if (models === null) return [];
  const shape = `models must be a list of 1-${MAX_KEY_MODELS} catalog model ids (GET /v1/models); send null to allow every model; nothing was changed.`;
  if (!Array.isArray(models) || models.length === 0 || models.length > MAX_KEY_MODELS) throw invalid("models", shape);
  const bare: string[] = [];
  for (const id of models) {
    if (typeof id !== "string" || id.trim().length === 0 || id.length > MAX_KEY_MODEL_ID_LENGTH) {
      throw invalid("models", shape);
    }
    const b = bareModelId(id.trim());
    if (!bare.includes(b)) bare.push(b);
  }
  const known = await listed(bare);
  const unknown = bare.filter((id) => !known.has(id));
  if (unknown.length > 0) {
    throw invalid(
      "models",
      `models names ${unknown.length === 1 ? "a model" : "models"} the catalog does not list: ${unknown
        .slice(0, 5)
        .join(", ")}; use ids from GET /v1/models; nothing was changed.`,
    );
  }
  return bare;
}

/** The policy columns of a stored key. */
export function policyOf(row: KeyPolicy): KeyPolicy {
  return {
    limitMicroUsdc: row.limitMicroUsdc,
    limitReset: row.limitReset,
    maxPriceCentsPerDollar: row.maxPriceCentsPerDollar,
    models: row.models,
    expiresAt: row.expiresAt,
  };
}

/** Whether a key's expiry has passed at `now` (then it is refused as a revoked key is). */
export function isExpired(expiresAt: Date | null, now: Date): boolean {
  return expiresAt !== null && expiresAt.getTime() <= now.getTime();
}

/** Usage from what the key spent this period: remaining floored at 0; resetsAt for a resetting limit. */
export function keyUsage(
  policy: Pick<KeyPolicy, "limitMicroUsdc" | "limitReset">,
  spentMicroUsdc: bigint,
  now: Date,
): KeyUsage {
  const limit = policy.limitMicroUsdc;
  if (limit === null) return { spentMicroUsdc, remainingMicroUsdc: null, resetsAt: null };
  const left = limit - spentMicroUsdc;
  return {
    spentMicroUsdc,
    remainingMicroUsdc: left > 0n ? left : 0n,
    resetsAt: budgetPeriod(policy.limitReset, now).end,
  };
}

type Reader = Pick<Db, "$queryRaw"> | Pick<Prisma.TransactionClient, "$queryRaw">;

/**
 * THE spend query: what each key and every key below it (a child's spend counts against its
 * ancestors) were charged for their requests started in the key's current period
 * (`budgetPeriod(limitReset, now)`): the sum of its UTC days in `api_key_spend` (each ending adds
 * its charge in the transaction of the charge; a refunded video job takes its charge back), the
 * figure `svc_key_reserve` holds budgets against. One statement for any number of keys; a key with
 * no charge is 0. A request is counted in the period it started in (admission), whenever it
 * settled. Reads only.
 */
export async function spentThisPeriod(
  db: Reader,
  keys: readonly { id: string; limitReset: LimitReset }[],
  now: Date,
): Promise<Map<string, bigint>> {
  const out = new Map<string, bigint>();
  if (keys.length === 0) return out;
  // periods as UTC days: a key's spend is kept per UTC day of its requests' start (`svc_key_spend`:
  // api_key_spend, which the folds add each charge to and a video refund lowers, plus the charges
  // not yet folded), the same figure the budget hold reads (`svc_key_reserve`), so a listing and the
  // enforcement never disagree
  const day = (d: Date | null) => (d ? utcDay(d) : null);
  const periods = keys.map((k) => {
    const p = budgetPeriod(k.limitReset, now);
    return { id: k.id, start: day(p.start), end: day(p.end) };
  });
  const rows = await (db as Pick<Db, "$queryRaw">).$queryRaw<{ id: string; spent: bigint }[]>`
    SELECT k.id::text AS id,
           COALESCE((SELECT SUM(s.spent_micro_usdc)
                       FROM svc_key_spend() s JOIN api_keys d ON d.id = s.api_key_id
                      WHERE (d.id = k.id OR d.ancestor_ids @> ARRAY[k.id])
                        AND (k.start IS NULL OR s.day >= k.start)
                        AND (k."end" IS NULL OR s.day < k."end")), 0)::bigint AS spent
      FROM jsonb_to_recordset(${JSON.stringify(periods)}::jsonb) AS k(id uuid, start date, "end" date)`;
  for (const r of rows) out.set(r.id, BigInt(r.spent));
  return out;
}

/** Key names are 1-64 characters (SPEC "Limits"). */
export function assertKeyName(name: unknown, field = "name"): asserts name is string {
  if (typeof name !== "string" || name.length < 1 || name.length > 64) {
    throw new DomainError("invalid_request", `${field} must be a string of 1-64 characters.`, { field });
  }
}
