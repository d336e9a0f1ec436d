// Defects planted back for the funding simulation (`npm run sim -- --funding --plant=…`): each undoes
// one rule of the funding domain, and the simulation must catch it. They live here, in the
// simulation's own wiring — a subclass of the reconciler, a wrapper of the database client the
// service is given, a replaced method on one service instance — so production code carries no
// switch for them.
import type { Db } from "../../../src/adapters/db.js";
import type { FundingService } from "../../../src/domain/funding/funding-service.js";
import type { PaymentRecords } from "../../../src/domain/funding/payment-records.js";
import { PaymentReconciler, type ReconcilerDeps } from "../../../src/domain/funding/reconciler.js";

export const FUNDING_DEFECTS = [
  "replay-unverified",
  "failure-overwrites-credit",
  "reverse-on-not-found",
  "cancel-ignored",
  "scan-skips-settling",
] as const;
/**
 * - `replay-unverified`: a replayed header is answered from the record without checking that its
 *   signature is the payer's over the recorded authorization (issue 38 item 5, before its fix);
 * - `failure-overwrites-credit`: the settle path's failure write is unconditional, so it overwrites
 *   a row the reconciler credited meanwhile (item 5, before its fix);
 * - `reverse-on-not-found`: a pending credit whose transaction the node does not find is reversed,
 *   whatever the authorization's state and validBefore (item 5, before its fix: a lagging RPC);
 * - `cancel-ignored`: an authorization cancelled on chain is not recognised, so its payment
 *   reconciles forever (item 5, before its fix);
 * - `scan-skips-settling`: the chain scan takes `reconciling` rows only, so a crash between the
 *   settling row and the credit is never finished.
 */
export type FundingDefect = (typeof FUNDING_DEFECTS)[number];

type Fate = { kind: "settled" | "canceled"; txHash: string } | { kind: "expired" } | { kind: "open" };
interface ReconcilerInternals {
  deps: ReconcilerDeps;
  reverse(p: unknown, reason: string): Promise<void>;
  authorizationFate(p: unknown): Promise<Fate>;
  reconcilePayment: PaymentReconciler["reconcilePayment"];
}

export interface Planted {
  /** the database client the funding service is given */
  fundingDb: Db;
  /** applied to the service once built */
  patchService(s: FundingService): void;
  /** the reconciler class to build */
  Reconciler: typeof PaymentReconciler;
}

export function plantDefects(defects: ReadonlySet<FundingDefect>, db: Db): Planted {
  return {
    fundingDb: defects.has("failure-overwrites-credit") ? unconditionalFailureWrites(db) : db,
    patchService(s) {
      if (!defects.has("replay-unverified")) return;
      const records = (s as unknown as { records: PaymentRecords }).records;
      records.isRecordedAuthorization = async () => true;
    },
    Reconciler: plantedReconciler(defects),
  };
}

/** `payment.updateMany({ where: { id, status: "settling" }, data: { status: "failed" } })` without its status condition. */
function unconditionalFailureWrites(db: Db): Db {
  const payment = new Proxy(db.payment, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop !== "updateMany" || typeof value !== "function") return value;
      return (args: { where?: Record<string, unknown>; data?: Record<string, unknown> }) => {
        if (args.data?.status === "failed" && args.where?.status === "settling") {
          const { status: _dropped, ...where } = args.where;
          return value.call(target, { ...args, where });
        }
        return value.call(target, args);
      };
    },
  });
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "payment") return payment;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

function plantedReconciler(defects: ReadonlySet<FundingDefect>): typeof PaymentReconciler {
  if (!defects.has("reverse-on-not-found") && !defects.has("cancel-ignored") && !defects.has("scan-skips-settling")) {
    return PaymentReconciler;
  }
  const base = PaymentReconciler.prototype as unknown as ReconcilerInternals;
  class Planted extends PaymentReconciler {}
  const proto = Planted.prototype;
  if (defects.has("reverse-on-not-found")) {
    Object.defineProperty(proto, "settlementMissing", {
      value: async function (this: ReconcilerInternals, p: unknown) {
        await this.reverse(p, "planted: the node did not find the settlement");
        return "reversed";
      },
    });
  }
  if (defects.has("cancel-ignored")) {
    Object.defineProperty(proto, "authorizationFate", {
      value: async function (this: ReconcilerInternals, p: unknown): Promise<Fate> {
        const fate = await base.authorizationFate.call(this, p);
        return fate.kind === "canceled" ? { kind: "open" } : fate;
      },
    });
  }
  if (defects.has("scan-skips-settling")) {
    Object.defineProperty(proto, "reconcileOutstanding", {
      value: async function (this: ReconcilerInternals) {
        const rows = await this.deps.db.payment.findMany({
          where: { status: "reconciling" },
          orderBy: [{ createdAt: "asc" }, { id: "asc" }],
          select: { id: true },
        });
        const counts = { credited: 0, failed: 0, waiting: 0 };
        for (const r of rows) {
          const outcome = await this.reconcilePayment(r.id);
          if (outcome !== "already") counts[outcome]++;
        }
        return counts;
      },
    });
  }
  return Planted;
}
