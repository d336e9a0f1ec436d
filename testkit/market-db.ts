// The market of the pipeline's tests and of the seeded money simulation, on Postgres: a database
// cloned from the migrated template (testkit/template.ts), the project's own SQL stores over it
// (`sqlStores`: the stored functions in prisma/functions decide every rule of money and routing),
// the real key-health marks (`KeyHealth`) and the real supply-ledger operations (`moveHeldShare`,
// `refundClear`, the payout run). What this file adds is seeding (rows written as the service
// writes them), reading rows back, emptying the database between runs, and faults injected at the
// adapter (a commit that fails before COMMIT, an acknowledgement lost after it). It decides nothing:
// docs/decisions.md "The simulation runs the SQL".

import { createPubSub } from "graphql-yoga";
import type { Hex } from "viem";
import type { ChainGateway } from "../src/adapters/chain/usdc-gateway.js";
import { createPrisma, type Db } from "../src/adapters/db.js";
import type { EventBus, Topics } from "../src/adapters/pubsub.js";
import { createSql, type Sql } from "../src/adapters/sql.js";
import type { EndItem } from "../src/domain/inference/settlement/end-item.js";
import { sqlStores } from "../src/domain/inference/settlement/sql-stores.js";
import type { InferenceStores, KeyMarks } from "../src/domain/inference/settlement/stores.js";
import type { LimitReset } from "../src/domain/keys/key-period.js";
import { moveHeldShare, refundClear } from "../src/domain/ledger/ledger.js";
import { KeyHealth } from "../src/domain/supply/key-health.js";
import { PayoutRunner } from "../src/domain/supply/payouts.js";
import type { PriceStep } from "../src/domain/supply/price-schedule.js";
import type { SecretBox } from "../src/lib/secret-box.js";
import { createTestDatabase, withAdmin } from "./db.js";
import type { ManualClock } from "./manual-clock.js";

/** A buyer: its account and its root API key. */
export interface BuyerIds {
  accountId: string;
  apiKeyId: string;
}

export interface AccountRow {
  id: string;
  confirmedMicroUsdc: bigint;
  reservedMicroUsdc: bigint;
  ceilingCents: number;
  supplierPayableMicroUsdc: bigint;
  supplierHeldMicroUsdc: bigint;
}

export type OfferStatus = "active" | "paused" | "depleted" | "expired" | "cancelled";

export interface OfferRow {
  id: string;
  accountId: string;
  upstreamKeyId: string;
  priceCentsPerDollar: number;
  quantityMicroDiem: bigint;
  remainingMicroDiem: bigint;
  reservedMicroDiem: bigint;
  status: OfferStatus;
  expiresAt: Date;
}

export type UpstreamKeyStatus = "active" | "auth_failed" | "revoked";

export interface UpstreamKeyRow {
  id: string;
  status: UpstreamKeyStatus;
  lastBalanceMicroDiem: bigint | null;
  cooldownUntil: Date | null;
}

/** One attempt of a request as the view `inference_request_attempts` reads it. */
export interface AttemptRecord {
  ordinal: number;
  upstreamKeyId: string;
  offerId: string;
  priceCents: number;
  outcome: string;
  upstreamStatus: number | null;
  errorKind: string | null;
}

/** A request's record (`inference_requests`), with its clear's id when it was charged. */
export interface RequestRecord {
  id: string;
  accountId: string;
  apiKeyId: string | null;
  status: string;
  errorCode: string | null;
  /** the ceiling it was planned with (`max_price_cents`) */
  ceilingCents: number;
  clearingPriceCents: number | null;
  costMicroUsdc: bigint | null;
  attemptCount: number;
  attempts: AttemptRecord[];
  startedAt: Date;
  clearId: string | null;
}

export interface ClearRecord {
  id: string;
  requestId: string;
  buyerAccountId: string;
  supplierAccountId: string;
  offerId: string;
  priceCents: number;
  burnMicroDiem: bigint;
  grossMicroUsdc: bigint;
  feeMicroUsdc: bigint;
  supplierMicroUsdc: bigint;
}

export interface KeyHold {
  requestId: string;
  apiKeyId: string;
  holder: string;
  amountMicroUsdc: bigint;
}

/** Faults injected where a store meets the database (each cleared once it fired). */
export interface StoreFaults {
  /** the next settlement commit fails before it reaches the database */
  failNextCommit: Error | null;
  /** the next settlement commit applies, then its answer is lost */
  loseNextAck: Error | null;
}

/** What a plant changes in the market's code paths that are not SQL (see testkit/sim/plants.ts). */
export interface MarketWrappers {
  /** the Prisma client the supply-ledger operations and the payout run use */
  db?: (db: Db) => Db;
  /** the stores a pipeline is given */
  stores?: (stores: InferenceStores) => InferenceStores;
}

/** Every table a test or a seed writes, emptied by `reset` (the template's own rows are the migrations'). */
const TABLES_KEPT = new Set(["_prisma_migrations"]);

/**
 * One market database: cloned from the migrated template once, emptied between tests or seeds
 * (`reset`: a few milliseconds, where a clone costs 0.1–0.8 s). Its own pool (`sql`) seeds and
 * reads; `stores(pool)` builds the pipeline's stores over any pool of it (the simulation gives each
 * router process a pool of its own, so a crash can cut one off).
 */
export class MarketDb {
  /** calls per store method, every pool together (what the pipeline asked of the stores) */
  readonly calls = new Map<string, number>();
  readonly faults: StoreFaults = { failNextCommit: null, loseNextAck: null };
  /** the real key-health marks over this database */
  readonly keyHealth: KeyMarks;
  private tables: string[] = [];
  private readonly payouts: PayoutRunner;
  private txHashes = 0;

  private constructor(
    readonly url: string,
    /** the market's own pool: seeding, reading, the sweeper */
    readonly sql: Sql,
    /** Prisma over the same database (the supply-ledger operations, the payout run, key health) */
    readonly db: Db,
    private readonly drop: () => Promise<void>,
    readonly secrets: SecretBox,
    readonly clock: ManualClock,
    private readonly wrap: MarketWrappers,
  ) {
    const bus = createPubSub<Topics>() as EventBus;
    this.keyHealth = new KeyHealth({
      db,
      clock,
      bus,
      market: { publishCapacityChanged: async () => undefined },
    });
    this.payouts = new PayoutRunner({ db, clock, bus, chain: this.chain(), confirmationBlocks: 1 });
  }

  static async open(o: {
    secrets: SecretBox;
    clock: ManualClock;
    /** SQL run once in the new database (the simulation's planted defects) */
    setup?: (sql: Sql) => Promise<void>;
    wrap?: MarketWrappers;
  }): Promise<MarketDb> {
    const database = await createTestDatabase();
    // commits need not wait for the disk: nothing here survives a server crash, and the functions'
    // rules do not depend on it (svc_escrow_take turns it off for itself in production too)
    await withAdmin((c) => c.query(`ALTER DATABASE "${database.name}" SET synchronous_commit = off`));
    const sql = createSql(database.url, 4);
    try {
      await o.setup?.(sql);
      const base = createPrisma(database.url, { max: 4 });
      const db = o.wrap?.db ? o.wrap.db(base) : base;
      const m = new MarketDb(
        database.url,
        sql,
        db,
        async () => {
          await base.$disconnect();
          await database.drop();
        },
        o.secrets,
        o.clock,
        o.wrap ?? {},
      );
      const t = await sql.query<{ name: string }>(
        "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
      );
      m.tables = t.rows.map((r) => r.name).filter((n) => !TABLES_KEPT.has(n));
      return m;
    } catch (e) {
      await sql.end().catch(() => undefined);
      await database.drop();
      throw e;
    }
  }

  /**
   * Empties every table as the template left it (empty): one transaction of DELETEs with the
   * triggers off (the append-only ledger and clears refuse a DELETE; foreign keys are triggers
   * too). TRUNCATE would cost 0.3–0.5 s here.
   */
  async reset(): Promise<void> {
    const deletes = this.tables.map((t) => `DELETE FROM "${t}";`).join(" ");
    await this.sql.query(`BEGIN; SET LOCAL session_replication_role = replica; ${deletes} COMMIT;`);
    this.calls.clear();
    this.faults.failNextCommit = null;
    this.faults.loseNextAck = null;
  }

  async close(): Promise<void> {
    await this.sql.end().catch(() => undefined);
    await this.drop();
  }

  /** A pool of this database (a router process's own connections). */
  pool(max = 1): Sql {
    return createSql(this.url, max);
  }

  /**
   * The pipeline's stores: `sqlStores` over `sql`, each call counted in `calls`, the settlement's
   * commit subject to `faults` (and the plants' wrapper, when one was given).
   */
  stores(sql: Sql = this.sql): InferenceStores {
    const real = sqlStores(sql);
    const counted: InferenceStores = {
      offers: this.counted("offers", real.offers),
      ceilings: this.counted("ceilings", real.ceilings),
      escrow: this.counted("escrow", real.escrow),
      budgets: this.counted("budgets", real.budgets),
      settlement: this.counted("settlement", {
        ended: (id) => real.settlement.ended(id),
        commit: async (items: EndItem[]) => {
          const failure = this.faults.failNextCommit;
          if (failure) {
            this.faults.failNextCommit = null;
            throw failure;
          }
          const out = await real.settlement.commit(items);
          const lost = this.faults.loseNextAck;
          if (lost) {
            this.faults.loseNextAck = null;
            throw lost;
          }
          return out;
        },
      }),
    };
    return this.wrap.stores ? this.wrap.stores(counted) : counted;
  }

  private counted<T extends object>(port: string, impl: T): T {
    const out: Record<string, unknown> = {};
    for (const [name, fn] of Object.entries(impl)) {
      out[name] = (...args: unknown[]) => {
        const key = `${port}.${name}`;
        this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
        return (fn as (...a: unknown[]) => unknown)(...args);
      };
    }
    return out as T;
  }

  // ─────────────────────────── seeding ───────────────────────────

  /** A buyer account with an active root API key. */
  async addBuyer(o: {
    confirmedMicroUsdc: bigint;
    ceilingCents?: number;
    accountId?: string;
    apiKeyId?: string;
  }): Promise<BuyerIds> {
    const accountId = o.accountId ?? crypto.randomUUID();
    const apiKeyId = o.apiKeyId ?? crypto.randomUUID();
    await this.insertAccount(accountId, o.confirmedMicroUsdc, o.ceilingCents ?? 80);
    await this.addApiKey({ id: apiKeyId, accountId });
    return { accountId, apiKeyId };
  }

  /** A supplier account (its upstream keys and offers come with `addOffer`). */
  async addSupplier(accountId: string = crypto.randomUUID()): Promise<string> {
    await this.insertAccount(accountId, 0n, 80);
    return accountId;
  }

  private async insertAccount(id: string, confirmed: bigint, ceiling: number): Promise<void> {
    await this.sql.query(
      `INSERT INTO accounts (id, wallet_address, auth_provider, max_price_cents_per_dollar, confirmed_micro_usdc)
       VALUES ($1, $2, 'siwe', $3, $4)`,
      [id, `0x${id.replaceAll("-", "").padEnd(40, "0")}`, ceiling, confirmed.toString()],
    );
  }

  /** An API key; under `parent` (the key tree: `ancestorIds` root … parent). */
  async addApiKey(o: {
    id: string;
    accountId: string;
    ancestorIds?: readonly string[];
    limitMicroUsdc?: bigint | null;
    limitReset?: LimitReset;
  }): Promise<void> {
    const ancestors = o.ancestorIds ?? [];
    await this.sql.query(
      `INSERT INTO api_keys (id, account_id, name, key_prefix, key_hash, source, parent_id, ancestor_ids,
                             limit_micro_usdc, limit_reset)
       VALUES ($1, $2, 'k', 'svc_x', $3, 'session', $4, $5::uuid[], $6, $7::api_key_limit_reset)`,
      [
        o.id,
        o.accountId,
        o.id,
        ancestors.at(-1) ?? null,
        ancestors,
        o.limitMicroUsdc?.toString() ?? null,
        o.limitReset ?? "never",
      ],
    );
  }

  /** A key's budget (null: none) and its period. */
  async setKeyLimit(apiKeyId: string, limitMicroUsdc: bigint | null, reset: LimitReset = "never"): Promise<void> {
    await this.sql.query(
      "UPDATE api_keys SET limit_micro_usdc = $2, limit_reset = $3::api_key_limit_reset WHERE id = $1",
      [apiKeyId, limitMicroUsdc?.toString() ?? null, reset],
    );
  }

  async revokeApiKey(apiKeyId: string): Promise<void> {
    await this.sql.query("UPDATE api_keys SET status = 'revoked', revoked_at = $2 WHERE id = $1", [
      apiKeyId,
      this.clock.now(),
    ]);
  }

  /** A credit to a buyer's confirmed balance (the funding side's end result). */
  async deposit(accountId: string, amountMicroUsdc: bigint): Promise<void> {
    await this.sql.query("UPDATE accounts SET confirmed_micro_usdc = confirmed_micro_usdc + $2 WHERE id = $1", [
      accountId,
      amountMicroUsdc.toString(),
    ]);
  }

  async setCeiling(accountId: string, ceilingCents: number): Promise<void> {
    await this.sql.query("UPDATE accounts SET max_price_cents_per_dollar = $2 WHERE id = $1", [
      accountId,
      ceilingCents,
    ]);
  }

  /** An upstream key (sealed as the service seals it) with one offer on it. */
  async addOffer(o: {
    priceCents: number;
    schedule?: PriceStep[] | null;
    quantityMicroDiem: bigint;
    keyBalanceMicroDiem?: bigint | null;
    supplierAccountId?: string;
    createdAt?: Date;
    expiresAt?: Date;
    status?: "active" | "paused";
    offerId?: string;
    upstreamKeyId?: string;
  }): Promise<{ offerId: string; upstreamKeyId: string; supplierAccountId: string; secret: string }> {
    const supplierAccountId = o.supplierAccountId ?? (await this.addSupplier());
    const upstreamKeyId = o.upstreamKeyId ?? crypto.randomUUID();
    const offerId = o.offerId ?? crypto.randomUUID();
    const secret = `VENICE_INFERENCE_KEY_${upstreamKeyId.replaceAll("-", "")}`;
    const s = this.secrets.seal(secret, supplierAccountId);
    const balance = o.keyBalanceMicroDiem === undefined ? 100_000_000n : o.keyBalanceMicroDiem;
    await this.sql.query(
      `INSERT INTO upstream_keys (id, account_id, label, secret_ciphertext, secret_iv, secret_tag, encryption_key_id,
                                  secret_fingerprint, secret_last4, last_balance_micro_diem)
       VALUES ($1, $2, 'k', $3, $4, $5, $6, $7, 'abcd', $8)`,
      [
        upstreamKeyId,
        supplierAccountId,
        s.ciphertext,
        s.iv,
        s.tag,
        s.keyId,
        upstreamKeyId,
        balance?.toString() ?? null,
      ],
    );
    const now = this.clock.now();
    // offers posted in one instant keep the order they were posted in (the clearing order's age)
    const posted = o.createdAt ?? new Date(now.getTime() + (await this.count("offers")));
    await this.sql.query(
      `INSERT INTO offers (id, account_id, upstream_key_id, price_cents_per_dollar, schedule, quantity_micro_diem,
                           remaining_micro_diem, status, expires_at, created_at)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6, $6, $7::offer_status, $8, $9)`,
      [
        offerId,
        supplierAccountId,
        upstreamKeyId,
        o.priceCents,
        o.schedule ? JSON.stringify(o.schedule) : null,
        o.quantityMicroDiem.toString(),
        o.status ?? "active",
        o.expiresAt ?? new Date(now.getTime() + 86_400_000),
        posted,
      ],
    );
    return { offerId, upstreamKeyId, supplierAccountId, secret };
  }

  /** Changes an offer's row as a supplier (or a test) would. */
  async updateOffer(
    id: string,
    p: Partial<{
      status: OfferStatus;
      priceCentsPerDollar: number;
      expiresAt: Date;
      remainingMicroDiem: bigint;
      reservedMicroDiem: bigint;
      endedAt: Date | null;
    }>,
  ): Promise<void> {
    await this.update("offers", id, {
      status: p.status === undefined ? undefined : [p.status, "offer_status"],
      price_cents_per_dollar: p.priceCentsPerDollar,
      expires_at: p.expiresAt,
      remaining_micro_diem: p.remainingMicroDiem,
      reserved_micro_diem: p.reservedMicroDiem,
      ended_at: p.endedAt,
    });
  }

  /** Changes an upstream key's row as the balance sync, a supplier or a test would. */
  async updateUpstreamKey(
    id: string,
    p: Partial<{ status: UpstreamKeyStatus; lastBalanceMicroDiem: bigint | null; cooldownUntil: Date | null }>,
  ): Promise<void> {
    const now = this.clock.now();
    await this.update("upstream_keys", id, {
      status: p.status === undefined ? undefined : [p.status, "upstream_key_status"],
      revoked_at: p.status === undefined ? undefined : p.status === "revoked" ? now : null,
      auth_failed_at: p.status === undefined ? undefined : p.status === "auth_failed" ? now : null,
      last_balance_micro_diem: p.lastBalanceMicroDiem,
      cooldown_until: p.cooldownUntil,
    });
  }

  private async update(
    table: string,
    id: string,
    columns: Record<string, unknown | [unknown, string] | undefined>,
  ): Promise<void> {
    const sets: string[] = [];
    const values: unknown[] = [id];
    for (const [column, v] of Object.entries(columns)) {
      if (v === undefined) continue;
      const [value, type] = Array.isArray(v) ? v : [v, null];
      values.push(typeof value === "bigint" ? value.toString() : value);
      sets.push(`${column} = $${values.length}${type ? `::${type}` : ""}`);
    }
    if (sets.length === 0) return;
    // a test sets raw columns: every holder folds first, so the rows hold every appended clear
    await this.sql.query("SELECT count(*) FROM svc_fold_all()");
    const r = await this.sql.query(`UPDATE ${table} SET ${sets.join(", ")} WHERE id = $1`, values);
    if (r.rowCount !== 1) throw new Error(`no ${table} row ${id}`);
  }

  // ─────────────────────────── reading ───────────────────────────

  private async count(table: string): Promise<number> {
    const r = await this.sql.query<{ n: bigint }>(`SELECT count(*) AS n FROM ${table}`);
    return Number(r.rows[0]?.n ?? 0);
  }

  async account(id: string): Promise<AccountRow> {
    const r = await this.sql.query<AccountRow>(
      // live (svc_account_live): the rows less what appended clears have not yet folded
      `SELECT a.id, l.confirmed AS "confirmedMicroUsdc", l.reserved AS "reservedMicroUsdc",
              a.max_price_cents_per_dollar AS "ceilingCents", l.payable AS "supplierPayableMicroUsdc",
              l.held AS "supplierHeldMicroUsdc"
         FROM accounts a CROSS JOIN LATERAL svc_account_live(a.id) l WHERE a.id = $1`,
      [id],
    );
    const row = r.rows[0];
    if (!row) throw new Error(`no account ${id}`);
    return row;
  }

  async offer(id: string): Promise<OfferRow> {
    const r = await this.sql.query<OfferRow>(
      `SELECT id, account_id AS "accountId", upstream_key_id AS "upstreamKeyId",
              price_cents_per_dollar AS "priceCentsPerDollar", quantity_micro_diem AS "quantityMicroDiem",
              remaining_micro_diem - COALESCE(u.burn, 0) AS "remainingMicroDiem",
              reserved_micro_diem - COALESCE(u.burn, 0) AS "reservedMicroDiem",
              status::text AS status, expires_at AS "expiresAt"
         FROM offers LEFT JOIN svc_offers_unfolded(ARRAY[$1::uuid]) u ON u.offer = offers.id WHERE id = $1`,
      [id],
    );
    const row = r.rows[0];
    if (!row) throw new Error(`no offer ${id}`);
    return row;
  }

  async upstreamKey(id: string): Promise<UpstreamKeyRow> {
    const r = await this.sql.query<UpstreamKeyRow>(
      `SELECT id, status::text AS status,
              CASE WHEN last_balance_micro_diem IS NULL THEN NULL
                   ELSE GREATEST(last_balance_micro_diem - COALESCE(u.burn, 0), 0) END AS "lastBalanceMicroDiem",
              cooldown_until AS "cooldownUntil"
         FROM upstream_keys LEFT JOIN svc_upstream_keys_unfolded(ARRAY[$1::uuid]) u ON u.upstream_key = upstream_keys.id
        WHERE id = $1`,
      [id],
    );
    const row = r.rows[0];
    if (!row) throw new Error(`no upstream key ${id}`);
    return row;
  }

  /** Every request's record, in the order they ended. */
  async requests(): Promise<RequestRecord[]> {
    const r = await this.sql.query<RequestRecord>(
      `SELECT r.id, r.account_id AS "accountId", r.api_key_id AS "apiKeyId", r.status::text AS status,
              r.error_code AS "errorCode", r.max_price_cents AS "ceilingCents",
              r.clearing_price_cents AS "clearingPriceCents", r.cost_micro_usdc AS "costMicroUsdc",
              r.attempt_count AS "attemptCount", a.attempts, r.started_at AS "startedAt", c.id AS "clearId"
         FROM inference_requests r
         JOIN inference_request_attempts a ON a.request_id = r.id AND a.started_at = r.started_at
         LEFT JOIN clears c ON c.request_id = r.id
        ORDER BY r.completed_at, r.id`,
    );
    return r.rows;
  }

  async clears(): Promise<ClearRecord[]> {
    const r = await this.sql.query<ClearRecord>(
      `SELECT id, request_id AS "requestId", buyer_account_id AS "buyerAccountId",
              supplier_account_id AS "supplierAccountId", offer_id AS "offerId", price_cents_per_dollar AS "priceCents",
              burn_micro_diem AS "burnMicroDiem", gross_micro_usdc AS "grossMicroUsdc", fee_micro_usdc AS "feeMicroUsdc",
              supplier_micro_usdc AS "supplierMicroUsdc"
         FROM clears ORDER BY created_at, id`,
    );
    return r.rows;
  }

  async keyHolds(): Promise<KeyHold[]> {
    const r = await this.sql.query<KeyHold>(
      `SELECT request_id AS "requestId", api_key_id AS "apiKeyId", holder, amount_micro_usdc AS "amountMicroUsdc"
         FROM key_budget_holds ORDER BY request_id`,
    );
    return r.rows;
  }

  /** What a key was charged on one UTC day (yyyy-mm-dd), or on every day. */
  async keySpend(apiKeyId: string, day?: string): Promise<bigint> {
    const r = await this.sql.query<{ spent: bigint | null }>(
      `SELECT sum(spent_micro_usdc)::bigint AS spent FROM svc_key_spend()
        WHERE api_key_id = $1 AND ($2::date IS NULL OR day = $2::date)`,
      [apiKeyId, day ?? null],
    );
    return r.rows[0]?.spent ?? 0n;
  }

  /** What holders hold of a buyer's balance (micro-USDC), all holders together, live. */
  async escrowOfBuyer(accountId: string): Promise<bigint> {
    const r = await this.sql.query<{ held: bigint | null }>(
      `SELECT (COALESCE(sum(e.amount_micro_usdc), 0) - COALESCE((SELECT sum(u.gross) FROM svc_buyer_unfolded($1) u), 0))::bigint AS held
         FROM buyer_escrows e WHERE e.account_id = $1`,
      [accountId],
    );
    return r.rows[0]?.held ?? 0n;
  }

  // ─────────────────── the supply ledger (src/domain/ledger, src/domain/supply) ───────────────────

  /** A video job became final: its clear's held share moves to payable (`moveHeldShare` "release"). */
  async releaseHeld(requestId: string): Promise<boolean> {
    const moved = await this.db.$transaction((tx) => moveHeldShare(tx, { requestId, move: "release" }));
    return moved !== null;
  }

  /** THE refund of a clear (`refundClear`); false when it was refunded already. */
  async refundClear(clearId: string): Promise<boolean> {
    const r = await this.db.$transaction((tx) => refundClear(tx, { clearId, at: this.clock.now() }));
    return r !== null;
  }

  /** One payout run (`PayoutRunner`) over a local chain that confirms every transfer: how many were paid. */
  async payoutRun(): Promise<number> {
    const r = await this.payouts.run();
    return r.created;
  }

  /** The payout run's chain: every transfer is sent and confirmed at once (no network). */
  private chain(): ChainGateway {
    const chain = {
      transferUsdc: async () => ({
        ok: true as const,
        value: { txHash: `0x${(++this.txHashes).toString(16).padStart(64, "0")}` as Hex },
      }),
      getConfirmations: async (txHash: Hex) => ({
        ok: true as const,
        value: { txHash, blockNumber: 1n, headBlockNumber: 1n, confirmations: 1, status: "success" as const },
      }),
    };
    return chain as unknown as ChainGateway;
  }
}
