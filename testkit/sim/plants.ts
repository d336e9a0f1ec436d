// The seeded money simulation's planted defects (docs/decisions.md "Seeded money simulation (issue
// 38)", "The simulation runs the SQL"): each undoes one rule, to prove that the simulation catches
// it. A rule that lives in a stored function is planted as a variant of that function — its file
// in prisma/functions with one change, created in the run's own database — so the simulation checks
// the SQL, and a plant whose text no longer occurs in the function fails loudly instead of testing
// nothing. A rule the schema keeps is planted as a schema change; a rule that lives in TypeScript
// (the refund, the payout run, the pipeline's reading of a lost acknowledgement) is planted by a
// wrapper where that code meets its database or its stores. Never set outside the simulation.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Db } from "../../src/adapters/db.js";
import type { Sql } from "../../src/adapters/sql.js";
import { FUNCTIONS_DIR } from "../../src/adapters/sql-functions.js";
import type { InferenceStores } from "../../src/domain/inference/settlement/stores.js";
import type { MarketWrappers } from "../market-db.js";

export const PLANTED_DEFECTS = [
  /** `svc_key_reserve` checks the calling key's own budget only, not its budgeted ancestors' */
  "ancestor-unchecked",
  /** `svc_key_reserve` ignores the holds of requests in flight (only committed spend counts) */
  "holds-uncounted",
  /** `svc_end_items` counts a key's charge on the day the request ended, not the day it started */
  "spend-by-end-day",
  /** `svc_escrow_take` grants against the confirmed balance, forgetting what is already reserved */
  "take-ignores-reserved",
  /** the fold (`svc_fold_holder`) credits a video clear's share as payable at once instead of holding it */
  "video-share-payable",
  /** the payout run pays the held (unfinished video) balance along with the payable one */
  "payout-includes-held",
  /** a refund takes the whole gross from the platform and leaves the supplier its share */
  "refund-from-platform",
  /** a refund leaves its clear in the market's totals (the public statistics keep counting it) */
  "refund-keeps-market",
  /** the sweeper gives escrow back but leaves the dead holder's key budget holds */
  "sweep-keeps-holds",
  /** the append (`svc_end_items`) charges a buyer's slice without counting the charge on it */
  "charge-uncounted",
  /** the append writes a clear naming a supplier key that is not on record (no foreign key refuses it) */
  "clear-names-no-key",
  /** the pipeline never learns that a commit whose answer was lost did happen (`SettlementStore.ended` says no) */
  "lost-ack-unread",
] as const;

export type PlantedDefect = (typeof PLANTED_DEFECTS)[number];

export function isPlantedDefect(s: string): s is PlantedDefect {
  return (PLANTED_DEFECTS as readonly string[]).includes(s);
}

/** One change to a stored function's source: `from` must occur exactly once. */
interface Edit {
  file: string;
  from: string;
  to: string;
}

const FUNCTION_EDITS: Partial<Record<PlantedDefect, Edit[]>> = {
  "ancestor-unchecked": [
    {
      file: "svc_key_reserve.sql",
      from: "SELECT k.status::text, k.ancestor_ids || k.id INTO v_status, v_chain",
      to: "SELECT k.status::text, ARRAY[k.id] INTO v_status, v_chain",
    },
  ],
  "holds-uncounted": [
    {
      file: "svc_key_reserve.sql",
      from: "- COALESCE((SELECT sum(h.amount_micro_usdc) FROM key_budget_holds h",
      to: "- 0 * COALESCE((SELECT sum(h.amount_micro_usdc) FROM key_budget_holds h",
    },
  ],
  "spend-by-end-day": [
    {
      file: "svc_end_items.sql",
      from: "i.api_key, (i.started AT TIME ZONE 'UTC')::date",
      to: "i.api_key, (i.now AT TIME ZONE 'UTC')::date",
    },
  ],
  "take-ignores-reserved": [
    {
      file: "svc_escrow_take.sql",
      from: "SELECT a.confirmed_micro_usdc - a.reserved_micro_usdc, a.max_price_cents_per_dollar INTO available, ceiling",
      to: "SELECT a.confirmed_micro_usdc, a.max_price_cents_per_dollar INTO available, ceiling",
    },
  ],
  "charge-uncounted": [
    {
      file: "svc_end_items.sql",
      from: "SET charged_micro_usdc = e.charged_micro_usdc + g.gross",
      to: "SET charged_micro_usdc = e.charged_micro_usdc",
    },
  ],
  "clear-names-no-key": [
    {
      file: "svc_end_items.sql",
      from: "SELECT i.clear, i.request, i.account, i.supplier, i.offer, i.key, i.model",
      to: "SELECT i.clear, i.request, i.account, i.supplier, i.offer, gen_random_uuid(), i.model",
    },
  ],
  "video-share-payable": [
    {
      file: "svc_fold_holder.sql",
      from: "COALESCE(sum(x.supplier_micro_usdc) FILTER (WHERE NOT x.supplier_held), 0)::bigint AS p,",
      to: "COALESCE(sum(x.supplier_micro_usdc), 0)::bigint AS p,",
    },
    {
      file: "svc_fold_holder.sql",
      from: "COALESCE(sum(x.supplier_micro_usdc) FILTER (WHERE x.supplier_held), 0)::bigint AS h",
      to: "0::bigint AS h",
    },
  ],
};

/** Schema changes: the sweeper deletes a holder, and its holds go with it by a cascading foreign key. */
const SCHEMA_CHANGES: Partial<Record<PlantedDefect, string>> = {
  "sweep-keeps-holds": "ALTER TABLE key_budget_holds DROP CONSTRAINT key_budget_holds_holder_fkey",
};

/** The stored functions with the defects' edits, as scripts to run (each a whole function file). */
export function plantedFunctions(defects: readonly PlantedDefect[]): string[] {
  const byFile = new Map<string, Edit[]>();
  for (const d of defects)
    for (const e of FUNCTION_EDITS[d] ?? []) byFile.set(e.file, [...(byFile.get(e.file) ?? []), e]);
  return [...byFile].map(([file, edits]) => {
    let sql = readFileSync(join(FUNCTIONS_DIR, file), "utf8");
    for (const e of edits) {
      const found = sql.split(e.from).length - 1;
      if (found !== 1)
        throw new Error(
          `planted defect: ${file} holds "${e.from}" ${found} times, not once: update testkit/sim/plants.ts`,
        );
      sql = sql.replace(e.from, e.to);
    }
    return sql;
  });
}

/** Plants the SQL defects in a database of the simulation's own (never the template). */
export async function plantSql(sql: Sql, defects: readonly PlantedDefect[]): Promise<void> {
  for (const script of plantedFunctions(defects)) await sql.query(script);
  for (const d of defects) {
    const change = SCHEMA_CHANGES[d];
    if (change) await sql.query(change);
  }
}

/** The wrappers of the defects whose rule is TypeScript. */
export function plantWrappers(defects: readonly PlantedDefect[]): MarketWrappers {
  const has = (d: PlantedDefect) => defects.includes(d);
  return {
    db:
      has("refund-from-platform") || has("refund-keeps-market") || has("payout-includes-held")
        ? (db) => plantedDb(db, defects)
        : undefined,
    stores: has("lost-ack-unread") ? lostAckUnread : undefined,
  };
}

/** `SettlementStore.ended` always says "not committed". */
function lostAckUnread(stores: InferenceStores): InferenceStores {
  return { ...stores, settlement: { ...stores.settlement, ended: async () => null } };
}

type Fn = (...args: unknown[]) => unknown;

/** Overrides some members of an object, everything else as it is (bound to the original). */
function override<T extends object>(target: T, members: Record<string, unknown>): T {
  return new Proxy(target, {
    get(t, prop) {
      if (typeof prop === "string" && prop in members) return members[prop];
      const value = Reflect.get(t, prop, t) as unknown;
      return typeof value === "function" ? (value as Fn).bind(t) : value;
    },
  });
}

/**
 * The Prisma client as the refund and the payout run see it with their defects planted:
 * - `refund-from-platform`: the claimed clear reads as if its whole gross were the platform's fee
 *   and the supplier's share nothing, so `refundClear` posts and moves exactly that;
 * - `refund-keeps-market`: `refundClear`'s statement on the market's totals (`svc_market_add`) does nothing;
 * - `payout-includes-held`: the payout run sees each supplier's held balance as payable, and its
 *   guarded debit loses its guard, so the held share is paid out.
 */
function plantedDb(db: Db, defects: readonly PlantedDefect[]): Db {
  const refund = defects.includes("refund-from-platform");
  const keepsMarket = defects.includes("refund-keeps-market");
  const payout = defects.includes("payout-includes-held");
  const client = <T extends object>(c: T): T => {
    const members: Record<string, unknown> = {};
    if (refund) {
      const raw = Reflect.get(c, "$queryRaw") as Fn;
      members.$queryRaw = async (strings: TemplateStringsArray, ...values: unknown[]) => {
        const rows = (await raw.call(c, strings, ...values)) as Array<Record<string, unknown>>;
        if (!strings.join("?").includes("UPDATE clears SET refunded_at")) return rows;
        return rows.map((r) => ({ ...r, fee: r.gross, share: 0n }));
      };
    }
    if (keepsMarket) {
      const execute = Reflect.get(c, "$executeRaw") as Fn;
      members.$executeRaw = async (strings: TemplateStringsArray, ...values: unknown[]) =>
        strings.join("?").includes("svc_market_add") ? 0 : execute.call(c, strings, ...values);
    }
    if (payout) {
      const account = Reflect.get(c, "account") as Record<string, Fn>;
      members.account = override(account, {
        findMany: async (args: { where?: Record<string, unknown>; select?: Record<string, boolean> }) => {
          const due = args.select?.supplierPayableMicroUsdc === true;
          const rows = (await account.findMany?.call(account, {
            ...args,
            ...(due ? { select: { ...args.select, supplierHeldMicroUsdc: true } } : {}),
          })) as Array<Record<string, unknown>>;
          if (!due) return rows;
          return rows.map(({ supplierHeldMicroUsdc, ...r }) => ({
            ...r,
            supplierPayableMicroUsdc: (r.supplierPayableMicroUsdc as bigint) + (supplierHeldMicroUsdc as bigint),
          }));
        },
        updateMany: (args: { where?: Record<string, unknown> }) => {
          const { supplierPayableMicroUsdc: _guard, ...where } = args.where ?? {};
          return account.updateMany?.call(account, { ...args, where });
        },
      });
    }
    const transaction = Reflect.get(c, "$transaction") as Fn | undefined;
    if (transaction) {
      members.$transaction = (fn: unknown, ...rest: unknown[]) =>
        typeof fn === "function"
          ? transaction.call(c, (tx: object) => (fn as Fn)(client(tx)), ...rest)
          : transaction.call(c, fn, ...rest);
    }
    return override(c, members);
  };
  return client(db);
}
