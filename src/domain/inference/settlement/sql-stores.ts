import { inTransaction, type Sql, sqlRunner } from "../../../adapters/sql.js";
import { utcDay } from "../../../lib/clock.js";
import type { LimitReset } from "../../keys/key-period.js";
import { nextPriceChange, storedSchedule } from "../../supply/price-schedule.js";
import { type BookEntry, CLEARING_ORDER_SQL, eligibleOffers } from "../routing/clearing.js";
import type { EndItem } from "./end-item.js";
import { endItemsJson } from "./end-item-row.js";
import type {
  CeilingStore,
  EscrowStore,
  InferenceStores,
  KeyBudgetAsk,
  KeyBudgetResult,
  KeyBudgetStore,
  OfferStore,
  SettlementEvents,
  SettlementStore,
  TakeRequest,
  TakeResult,
} from "./stores.js";

/**
 * The pipeline's stores in Postgres (see `stores.ts`): the statements and stored functions of the
 * hot path (prisma/functions), over the plain `pg` pool. Kept in the domain because they map rows
 * onto the domain's types (adapters may not import them); nothing here decides a rule.
 */
export function sqlStores(sql: Sql, events?: SettlementEvents): InferenceStores {
  return {
    offers: sqlOfferStore(sql),
    ceilings: sqlCeilingStore(sql),
    escrow: sqlEscrowStore(sql),
    settlement: sqlSettlementStore(sql, events),
    budgets: sqlKeyBudgetStore(sql),
  };
}

const BOOK_SQL = `
  SELECT o.id, o.upstream_key_id, o.account_id, svc_effective_price(o, $1) AS price, o.schedule, o.expires_at,
         svc_routable(o, k) AS routable, k.last_balance_micro_diem AS key_balance, k.cooldown_until,
         k.secret_ciphertext, k.secret_iv, k.secret_tag, k.encryption_key_id
    FROM offers o
    JOIN upstream_keys k ON k.id = o.upstream_key_id
   WHERE svc_eligible(o, k, $1)
   ORDER BY ${CLEARING_ORDER_SQL}`;

export function sqlOfferStore(sql: Sql): OfferStore {
  const run = sqlRunner(sql);
  return {
    async book(now: Date): Promise<BookEntry[]> {
      const r = await sql.query<{
        id: string;
        upstream_key_id: string;
        account_id: string;
        price: number;
        schedule: unknown;
        expires_at: Date;
        routable: string;
        key_balance: string | null;
        cooldown_until: Date | null;
        secret_ciphertext: Buffer;
        secret_iv: Buffer;
        secret_tag: Buffer;
        encryption_key_id: string;
      }>(BOOK_SQL, [now]);
      return r.rows.map((o) => ({
        offerId: o.id,
        upstreamKeyId: o.upstream_key_id,
        supplierAccountId: o.account_id,
        priceCentsPerDollar: Number(o.price),
        priceChangesAt: nextPriceChange(storedSchedule(o.schedule), now)?.getTime() ?? null,
        expiresAt: o.expires_at.getTime(),
        routableMicroDiem: BigInt(o.routable),
        keyBalanceMicroDiem: o.key_balance === null ? null : BigInt(o.key_balance),
        eligible: true,
        cooldownUntil: o.cooldown_until ? o.cooldown_until.getTime() : null,
        sealed: {
          ciphertext: new Uint8Array(o.secret_ciphertext),
          iv: new Uint8Array(o.secret_iv),
          tag: new Uint8Array(o.secret_tag),
          keyId: o.encryption_key_id,
        },
      }));
    },
    eligible: (q) => eligibleOffers(run, q),
  };
}

export function sqlCeilingStore(sql: Sql): CeilingStore {
  return {
    async ceilingOf(accountId: string): Promise<number | null> {
      const rows = await sql.query<{ ceiling: number }>(
        "SELECT max_price_cents_per_dollar AS ceiling FROM accounts WHERE id = $1",
        [accountId],
      );
      const row = rows.rows[0];
      return row ? Number(row.ceiling) : null;
    },
  };
}

/** `svc_escrow_take`'s row as `pg` reads it (BIGINT as bigint, see `createSql`). */
interface TakeRow {
  outcome: TakeResult["outcome"];
  granted_usdc: bigint | string;
  available: bigint | string | null;
  ceiling: number | null;
  granted_diem: bigint | string;
  routable: bigint | string | null;
  key_balance: bigint | string | null;
}

const big = (v: bigint | string | null): bigint | null => (v === null ? null : BigInt(v));

export function sqlEscrowStore(sql: Sql): EscrowStore {
  return {
    async enrol(holder: string, expiresAt: Date): Promise<void> {
      await sql.query("INSERT INTO escrow_holders (id, expires_at) VALUES ($1, $2)", [holder, expiresAt]);
    },

    async renew(holder: string, expiresAt: Date): Promise<boolean> {
      const r = await sql.query("UPDATE escrow_holders SET expires_at = $2 WHERE id = $1", [holder, expiresAt]);
      return r.rowCount !== 0;
    },

    async take(ask: TakeRequest): Promise<TakeResult> {
      const r = await sql.query<TakeRow>({
        name: "svc_escrow_take",
        text: `SELECT * FROM svc_escrow_take($1::uuid, $2::uuid, $3::uuid, $4::int, $5::bigint, $6::bigint, $7::uuid,
                                       $8::bigint, $9::bigint, $10::timestamptz)`,
        values: [
          ask.holder,
          ask.accountId,
          // none for a request paid per request (no key; it takes no buyer slice)
          ask.apiKeyId || null,
          ask.ceilingCents,
          ask.usdcMin.toString(),
          ask.usdcWant.toString(),
          ask.offerId,
          ask.diemMin.toString(),
          ask.diemWant.toString(),
          ask.now,
        ],
      });
      const row = r.rows[0];
      if (!row) throw new Error("svc_escrow_take returned nothing");
      return {
        outcome: row.outcome,
        grantedUsdc: BigInt(row.granted_usdc ?? 0n),
        available: big(row.available),
        ceiling: row.ceiling === null ? null : Number(row.ceiling),
        grantedDiem: BigInt(row.granted_diem ?? 0n),
        routable: big(row.routable),
        keyBalance: big(row.key_balance),
      };
    },

    async giveBack(holder, returns): Promise<void> {
      const json = returns.map((r) =>
        r.kind === "buyer"
          ? { account: r.id, amount: r.amount.toString() }
          : { offer: r.id, amount: r.amount.toString() },
      );
      await sql.query("SELECT svc_escrow_give_back($1::uuid, $2::jsonb)", [holder, JSON.stringify(json)]);
    },

    async fold(holder: string) {
      const r = await sql.query<{ offer_id: string; account_id: string }>({
        name: "svc_fold_holder",
        text: "SELECT offer_id, account_id FROM svc_fold_holder($1::uuid)",
        values: [holder],
      });
      return r.rows.map((row) => ({ offerId: row.offer_id, accountId: row.account_id }));
    },

    async buyerSlices(accountId, exceptHolder) {
      // live: what the slice holds less what it counts as charged by its holder's unfolded clears
      const r = await sql.query<{ holder: string; amount: string }>(
        `SELECT e.holder, (e.amount_micro_usdc - e.charged_micro_usdc)::text AS amount
           FROM buyer_escrows e
          WHERE e.account_id = $1 AND e.holder IS DISTINCT FROM $2::uuid`,
        [accountId, exceptHolder],
      );
      return r.rows.map((row) => ({ holder: row.holder, amountMicroUsdc: BigInt(row.amount) }));
    },

    async release(holder: string, now: Date): Promise<void> {
      await sql.query("SELECT svc_release_expired($1::timestamptz, 1, $2::uuid)", [now, holder]);
    },

    async releaseExpired(now: Date, limit: number): Promise<number> {
      const r = await sql.query<{ released: number }>(
        "SELECT svc_release_expired($1::timestamptz, $2::int) AS released",
        [now, limit],
      );
      return Number(r.rows[0]?.released ?? 0);
    },
  };
}

/**
 * The batch, and in the same statement who takes the events it may cause (`events.types`): the
 * accounts of its buyers and suppliers with an active webhook endpoint for one of them, as
 * `[[account, type], …]` (endpoints are not written by the batch, so the one snapshot serves).
 */
const END_BATCH_WITH_SUBSCRIBERS = `
  SELECT b.idx, b.confirmed, s.subscribers
    FROM svc_end_batch($1::jsonb) b
   CROSS JOIN (SELECT COALESCE(jsonb_agg(DISTINCT jsonb_build_array(e.account_id, t.type)), '[]'::jsonb) AS subscribers
                 FROM webhook_endpoints e CROSS JOIN LATERAL unnest(e.events) AS t(type)
                WHERE e.account_id = ANY($2::uuid[]) AND e.status = 'active' AND t.type = ANY($3::text[])) s`;

export function sqlSettlementStore(sql: Sql, events?: SettlementEvents): SettlementStore {
  return {
    async ended(requestId: string) {
      const r = await sql.query<{ status: string; confirmed: string }>(
        `SELECT r.status::text AS status, a.confirmed::text AS confirmed
           FROM inference_requests r CROSS JOIN LATERAL svc_account_live(r.account_id) a WHERE r.id = $1`,
        [requestId],
      );
      const row = r.rows[0];
      return row ? { status: row.status, confirmed: BigInt(row.confirmed) } : null;
    },
    async commit(items: EndItem[]): Promise<bigint[]> {
      if (!events) {
        // a named statement: each pooled connection parses and plans it once
        const r = await sql.query<{ idx: number; confirmed: bigint }>({
          name: "svc_end_batch",
          text: "SELECT * FROM svc_end_batch($1::jsonb)",
          values: [endItemsJson(items)],
        });
        return byIndex(r.rows, items.length).map((row) => BigInt(row.confirmed));
      }
      const json = endItemsJson(items);
      const accounts = [
        ...new Set(items.flatMap((i) => (i.charge ? [i.accountId, i.charge.supplierAccountId] : [i.accountId]))),
      ];
      // nobody takes the events this batch may cause (the common case): one autocommitted statement,
      // which refuses (SV001) before touching anything when an endpoint of these accounts does
      try {
        const quiet = await sql.query<{ idx: number; confirmed: bigint }>({
          name: "svc_end_batch_quiet",
          text: "SELECT * FROM svc_end_batch_quiet($1::jsonb, $2::uuid[], $3::text[])",
          values: [json, accounts, events.types],
        });
        return byIndex(quiet.rows, items.length).map((row) => BigInt(row.confirmed));
      } catch (e) {
        if ((e as { code?: string }).code !== HAS_SUBSCRIBERS) throw e;
      }
      // the events are written in the batch's transaction (the webhook outbox): BEGIN, the batch with
      // its subscribers, the events when someone takes them, COMMIT
      const { confirmed, ids } = await inTransaction(sql, async (client) => {
        const r = await client.query<{ idx: number; confirmed: bigint; subscribers: [string, string][] }>({
          name: "svc_end_batch_events",
          text: END_BATCH_WITH_SUBSCRIBERS,
          values: [json, accounts, events.types],
        });
        const confirmed = byIndex(r.rows, items.length).map((row) => BigInt(row.confirmed));
        const subscribers = new Map<string, Set<string>>();
        for (const [account, type] of r.rows[0]?.subscribers ?? []) {
          subscribers.set(account, (subscribers.get(account) ?? new Set<string>()).add(type));
        }
        const ids = subscribers.size > 0 ? await events.record(client, items, confirmed, subscribers) : [];
        return { confirmed, ids };
      });
      if (ids.length > 0) void events.dispatch(ids);
      return confirmed;
    },
  };
}

/** `svc_end_batch_quiet`'s refusal: an endpoint takes an event the batch may cause. */
const HAS_SUBSCRIBERS = "SV001";

/** Batch rows back in item order; exactly one per item. */
function byIndex<T extends { idx: number }>(rows: T[], n: number): T[] {
  const out = new Array<T>(n);
  for (const row of rows) out[Number(row.idx)] = row;
  for (let i = 0; i < n; i++) if (!out[i]) throw new Error(`batch row ${i} missing`);
  return out;
}

/** UTC day of a period bound (the spend is kept per UTC day: `api_key_spend`). */
const day = (d: Date | null) => (d ? utcDay(d) : null);

export function sqlKeyBudgetStore(sql: Sql): KeyBudgetStore {
  const hold =
    (fn: "svc_key_reserve" | "svc_key_rehold") =>
    async (ask: KeyBudgetAsk): Promise<KeyBudgetResult> => {
      const periods: Record<string, { start: string | null; end: string | null }> = {};
      for (const [reset, p] of Object.entries(ask.periods)) periods[reset] = { start: day(p.start), end: day(p.end) };
      const r = await sql.query<{
        outcome: KeyBudgetResult["outcome"];
        remaining: string | null;
        lim: string | null;
        reset: LimitReset | null;
      }>({
        name: fn,
        text: `SELECT * FROM ${fn}($1::uuid, $2::uuid, $3::uuid, $4::jsonb, $5::bigint, $6::timestamptz)`,
        values: [
          ask.holder,
          ask.requestId,
          ask.apiKeyId,
          JSON.stringify(periods),
          ask.amountMicroUsdc.toString(),
          ask.now,
        ],
      });
      const row = r.rows[0];
      if (!row) throw new Error(`${fn} returned nothing`);
      return {
        outcome: row.outcome,
        remainingMicroUsdc: row.remaining === null ? null : BigInt(row.remaining),
        limitMicroUsdc: row.lim === null ? null : BigInt(row.lim),
        reset: row.reset,
      };
    };
  return { reserve: hold("svc_key_reserve"), rehold: hold("svc_key_rehold") };
}
