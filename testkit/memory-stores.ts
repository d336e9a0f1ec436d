// In-memory stores for the inference pipeline (src/domain/inference/stores.ts), for unit tests of its
// rules (fall-forward, admission, clearing) without Postgres or Redis. Each port mirrors what its SQL
// implementation does (sql-stores.ts and the stored functions in prisma/functions): the eligibility
// rule (svc_eligible, svc_routable), the clearing order, svc_escrow_take's guards and outcomes,
// svc_escrow_give_back, svc_release_expired and svc_end_items' guards and effects, each commit all
// or nothing. test/integration/inference/store-contract.test.ts runs the same scenarios against both
// and compares, so the two cannot drift unnoticed. The integration tests stay the proof of the
// real thing; these are for the rules.

import { randomUUID } from "node:crypto";
import type { BookEntry, EligibleOffer, EligibleQuery } from "../src/domain/inference/clearing.js";
import type { EndItem } from "../src/domain/inference/settlement.js";
import type {
  CeilingStore,
  EscrowStore,
  InFlightGates,
  InferenceStores,
  KeyBudgetAsk,
  KeyBudgetResult,
  KeyBudgetStore,
  KeyMarks,
  OfferStore,
  SettlementStore,
  SliceReturn,
  TakeRequest,
  TakeResult,
} from "../src/domain/inference/stores.js";
import { effectivePrice, nextPriceChange, type PriceStep } from "../src/domain/supply/price-schedule.js";
import { utcDay } from "../src/lib/clock.js";
import type { SecretBox } from "../src/lib/secret-box.js";

export interface MemoryAccount {
  id: string;
  confirmedMicroUsdc: bigint;
  reservedMicroUsdc: bigint;
  ceilingCents: number;
  supplierPayableMicroUsdc: bigint;
  /** a video clear's share until its job is final (svc_end_items credits it here) */
  supplierHeldMicroUsdc: bigint;
}

export interface MemoryApiKey {
  id: string;
  accountId: string;
  status: "active" | "revoked";
  /** the key's budget per period (`limit_micro_usdc`), absent: none */
  limitMicroUsdc?: bigint | null;
  limitReset?: "daily" | "weekly" | "monthly" | "never";
  /** root … parent (`ancestor_ids`): its spend counts against each budgeted one */
  ancestorIds?: string[];
}

export interface MemoryUpstreamKey {
  id: string;
  accountId: string;
  status: "active" | "auth_failed" | "revoked";
  lastBalanceMicroDiem: bigint | null;
  cooldownUntil: Date | null;
  authFailedAt: Date | null;
  sealed: BookEntry["sealed"];
}

export interface MemoryOffer {
  id: string;
  accountId: string;
  upstreamKeyId: string;
  priceCentsPerDollar: number;
  /** price steps (`offers.schedule`); the price at an instant is `effectivePrice` */
  schedule: PriceStep[] | null;
  quantityMicroDiem: bigint;
  remainingMicroDiem: bigint;
  reservedMicroDiem: bigint;
  status: "active" | "paused" | "depleted" | "expired" | "cancelled";
  expiresAt: Date;
  createdAt: Date;
  endedAt: Date | null;
}

/** One clear as `svc_end_items` writes it (the fields the rules decide). */
export interface MemoryClear {
  id: string;
  request: string;
  buyer: string;
  supplier: string;
  offer: string;
  key: string;
  price: number;
  burnMicroDiem: bigint;
  grossMicroUsdc: bigint;
  feeMicroUsdc: bigint;
  supplierMicroUsdc: bigint;
}

/**
 * Defects the seeded money simulation (testkit/sim) plants back to prove it finds them
 * (docs/decisions.md "Seeded money simulation (issue 38)"). Each one undoes one rule of a store;
 * none is ever set outside test/unit/sim.
 */
export type PlantedDefect =
  /** `svc_key_reserve` checks the calling key's own budget only, not its budgeted ancestors' */
  | "ancestor-unchecked"
  /** `svc_key_reserve` ignores the holds of requests in flight (only committed spend counts) */
  | "holds-uncounted"
  /** `svc_end_items` counts a key's charge on the day the request ended, not the day it started */
  | "spend-by-end-day"
  /** `svc_escrow_take` grants against the confirmed balance, forgetting what is already reserved */
  | "take-ignores-reserved"
  /** `svc_end_items` credits a video clear's share as payable at once instead of holding it */
  | "video-share-payable"
  /** the payout pays the held (unfinished video) balance along with the payable one */
  | "payout-includes-held"
  /** a refund takes the whole gross from the platform and leaves the supplier its share */
  | "refund-from-platform"
  /** `svc_release_expired` gives escrow back but leaves the dead holder's key budget holds */
  | "sweep-keeps-holds"
  /** the pipeline never learns that a commit whose answer was lost did happen (`SettlementStore.ended` says no) */
  | "lost-ack-unread";

/** What the supply ledger twins (`releaseHeld`, `refundClear`, `payout`) moved, for the simulation's books. */
export interface MemoryLedger {
  /** request id → the clear's held share was released to payable (`moveHeldShare` "release") */
  released: Set<string>;
  /** clear id → what its refund moved */
  refunds: Map<
    string,
    { buyerMicroUsdc: bigint; supplierMicroUsdc: bigint; platformMicroUsdc: bigint; fromHeld: boolean }
  >;
  /** supplier account → paid out in total */
  paidOut: Map<string, bigint>;
}

/** The rows the pipeline's stores read and write. */
export interface MemoryTables {
  accounts: Map<string, MemoryAccount>;
  apiKeys: Map<string, MemoryApiKey>;
  upstreamKeys: Map<string, MemoryUpstreamKey>;
  offers: Map<string, MemoryOffer>;
  /** escrow holder → lease expiry */
  holders: Map<string, Date>;
  /** `${accountId}/${holder}` → amount */
  buyerEscrows: Map<string, bigint>;
  /** `${offerId}/${holder}` → amount */
  offerEscrows: Map<string, bigint>;
  /** every committed ending, in commit order */
  requests: EndItem[];
  clears: MemoryClear[];
  /** `${apiKeyId}/${yyyy-mm-dd}` → what the key was charged that UTC day (`api_key_spend`) */
  keySpend: Map<string, bigint>;
  /** request id → its budget hold (`key_budget_holds`) */
  keyHolds: Map<string, { apiKeyId: string; holder: string; amount: bigint }>;
}

const slot = (id: string, holder: string) => `${id}/${holder}`;
const holderOf = (k: string) => k.slice(k.indexOf("/") + 1);
const idOf = (k: string) => k.slice(0, k.indexOf("/"));
const minBig = (a: bigint, b: bigint) => (a < b ? a : b);
const maxBig = (a: bigint, b: bigint) => (a > b ? a : b);

/** `svc_eligible`: the offer is active and unexpired, its key active and not cooling down. */
export function eligibleNow(o: MemoryOffer, k: MemoryUpstreamKey, now: Date): boolean {
  return (
    o.status === "active" &&
    k.status === "active" &&
    o.expiresAt.getTime() > now.getTime() &&
    (k.cooldownUntil === null || k.cooldownUntil.getTime() <= now.getTime())
  );
}

/** `svc_routable`: min(remaining, the key's last known balance, 0 when unknown) − reserved, never below 0. */
export function routableOf(o: MemoryOffer, k: MemoryUpstreamKey): bigint {
  return maxBig(minBig(o.remainingMicroDiem, k.lastBalanceMicroDiem ?? 0n) - o.reservedMicroDiem, 0n);
}

/** The clearing order (`CLEARING_ORDER_SQL`): cheapest effective price at `now`, then oldest, then id. */
function clearingOrder(a: MemoryOffer, b: MemoryOffer, now: Date): number {
  const pa = effectivePrice(a, now);
  const pb = effectivePrice(b, now);
  if (pa !== pb) return pa - pb;
  if (a.createdAt.getTime() !== b.createdAt.getTime()) return a.createdAt.getTime() - b.createdAt.getTime();
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * A market in memory: accounts, API keys, upstream keys, offers, escrow and endings, with the
 * pipeline's stores over them (`stores`) and the key-health port (`keyHealth`). Seed it with
 * `addBuyer` / `addOffer`, or write `tables` directly.
 */
export class MemoryMarket {
  tables: MemoryTables = {
    accounts: new Map(),
    apiKeys: new Map(),
    upstreamKeys: new Map(),
    offers: new Map(),
    holders: new Map(),
    buyerEscrows: new Map(),
    offerEscrows: new Map(),
    requests: [],
    clears: [],
    keySpend: new Map(),
    keyHolds: new Map(),
  };
  /** calls per port method (what the pipeline asked of the stores) */
  readonly calls = new Map<string, number>();
  /** set to make the next settlement commit fail (then cleared) */
  failNextCommit: Error | null = null;
  /** set to make the next settlement commit apply, then fail (the acknowledgement lost; then cleared) */
  loseNextAck: Error | null = null;
  /** rules undone on purpose (the simulation's planted defects); empty everywhere else */
  readonly defects = new Set<PlantedDefect>();
  /** what the supply ledger twins moved */
  readonly ledger: MemoryLedger = { released: new Set(), refunds: new Map(), paidOut: new Map() };

  readonly stores: InferenceStores;
  readonly keyHealth: KeyMarks;

  constructor(
    private readonly secrets: SecretBox,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.stores = {
      offers: this.offerStore(),
      ceilings: this.ceilingStore(),
      escrow: this.escrowStore(),
      settlement: this.settlementStore(),
      budgets: this.keyBudgetStore(),
    };
    this.keyHealth = this.keyMarks();
  }

  // ─────────────────────────── seeding ───────────────────────────

  /** A buyer account with an active API key. */
  addBuyer(o: { confirmedMicroUsdc: bigint; ceilingCents?: number; accountId?: string; apiKeyId?: string }): {
    accountId: string;
    apiKeyId: string;
  } {
    const accountId = o.accountId ?? randomUUID();
    const apiKeyId = o.apiKeyId ?? randomUUID();
    this.tables.accounts.set(accountId, {
      id: accountId,
      confirmedMicroUsdc: o.confirmedMicroUsdc,
      reservedMicroUsdc: 0n,
      ceilingCents: o.ceilingCents ?? 80,
      supplierPayableMicroUsdc: 0n,
      supplierHeldMicroUsdc: 0n,
    });
    this.tables.apiKeys.set(apiKeyId, { id: apiKeyId, accountId, status: "active" });
    return { accountId, apiKeyId };
  }

  /** A supplier account (an upstream key and offers are added with `addOffer`). */
  addSupplier(accountId: string = randomUUID()): string {
    this.tables.accounts.set(accountId, {
      id: accountId,
      confirmedMicroUsdc: 0n,
      reservedMicroUsdc: 0n,
      ceilingCents: 80,
      supplierPayableMicroUsdc: 0n,
      supplierHeldMicroUsdc: 0n,
    });
    return accountId;
  }

  /** An upstream key (sealed like the service seals it) with one offer on it. */
  addOffer(o: {
    priceCents: number;
    schedule?: PriceStep[] | null;
    quantityMicroDiem: bigint;
    keyBalanceMicroDiem?: bigint | null;
    supplierAccountId?: string;
    createdAt?: Date;
    expiresAt?: Date;
    status?: MemoryOffer["status"];
    offerId?: string;
    upstreamKeyId?: string;
  }): { offerId: string; upstreamKeyId: string; supplierAccountId: string; secret: string } {
    const supplierAccountId = o.supplierAccountId ?? this.addSupplier();
    if (!this.tables.accounts.has(supplierAccountId)) this.addSupplier(supplierAccountId);
    const upstreamKeyId = o.upstreamKeyId ?? randomUUID();
    const offerId = o.offerId ?? randomUUID();
    const secret = `VENICE_INFERENCE_KEY_${upstreamKeyId.replaceAll("-", "")}`;
    const s = this.secrets.seal(secret, supplierAccountId);
    this.tables.upstreamKeys.set(upstreamKeyId, {
      id: upstreamKeyId,
      accountId: supplierAccountId,
      status: "active",
      lastBalanceMicroDiem: o.keyBalanceMicroDiem === undefined ? 100_000_000n : o.keyBalanceMicroDiem,
      cooldownUntil: null,
      authFailedAt: null,
      sealed: {
        ciphertext: new Uint8Array(s.ciphertext),
        iv: new Uint8Array(s.iv),
        tag: new Uint8Array(s.tag),
        keyId: s.keyId,
      },
    });
    const now = this.now();
    this.tables.offers.set(offerId, {
      id: offerId,
      accountId: supplierAccountId,
      upstreamKeyId,
      priceCentsPerDollar: o.priceCents,
      schedule: o.schedule ?? null,
      quantityMicroDiem: o.quantityMicroDiem,
      remainingMicroDiem: o.quantityMicroDiem,
      reservedMicroDiem: 0n,
      status: o.status ?? "active",
      expiresAt: o.expiresAt ?? new Date(now.getTime() + 86_400_000),
      createdAt: o.createdAt ?? new Date(now.getTime() + this.tables.offers.size),
      endedAt: null,
    });
    return { offerId, upstreamKeyId, supplierAccountId, secret };
  }

  account(id: string): MemoryAccount {
    const a = this.tables.accounts.get(id);
    if (!a) throw new Error(`no account ${id}`);
    return a;
  }

  offer(id: string): MemoryOffer {
    const o = this.tables.offers.get(id);
    if (!o) throw new Error(`no offer ${id}`);
    return o;
  }

  upstreamKey(id: string): MemoryUpstreamKey {
    const k = this.tables.upstreamKeys.get(id);
    if (!k) throw new Error(`no upstream key ${id}`);
    return k;
  }

  /** What holders hold of a buyer's balance (micro-USDC), all holders together. */
  escrowOfBuyer(accountId: string): bigint {
    let sum = 0n;
    for (const [k, v] of this.tables.buyerEscrows) if (idOf(k) === accountId) sum += v;
    return sum;
  }

  private count(name: string): void {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
  }

  /** Runs `fn` all or nothing, as a transaction would. */
  private atomically<T>(fn: () => T): T {
    const saved = structuredClone(this.tables);
    try {
      return fn();
    } catch (e) {
      this.tables = saved;
      throw e;
    }
  }

  // ─────────────────────────── ports ───────────────────────────

  private offerStore(): OfferStore {
    const live = (now: Date) => {
      const out: Array<{ o: MemoryOffer; k: MemoryUpstreamKey }> = [];
      for (const o of this.tables.offers.values()) {
        const k = this.tables.upstreamKeys.get(o.upstreamKeyId);
        if (k && eligibleNow(o, k, now)) out.push({ o, k });
      }
      return out.sort((a, b) => clearingOrder(a.o, b.o, now));
    };
    return {
      book: async (now: Date): Promise<BookEntry[]> => {
        this.count("offers.book");
        return live(now).map(({ o, k }) => ({
          offerId: o.id,
          upstreamKeyId: o.upstreamKeyId,
          supplierAccountId: o.accountId,
          priceCentsPerDollar: effectivePrice(o, now),
          priceChangesAt: nextPriceChange(o.schedule, now)?.getTime() ?? null,
          expiresAt: o.expiresAt.getTime(),
          routableMicroDiem: routableOf(o, k),
          keyBalanceMicroDiem: k.lastBalanceMicroDiem,
          eligible: true,
          cooldownUntil: k.cooldownUntil ? k.cooldownUntil.getTime() : null,
          sealed: {
            ciphertext: new Uint8Array(k.sealed.ciphertext),
            iv: new Uint8Array(k.sealed.iv),
            tag: new Uint8Array(k.sealed.tag),
            keyId: k.sealed.keyId,
          },
        }));
      },
      eligible: async (q: EligibleQuery): Promise<EligibleOffer[]> => {
        this.count("offers.eligible");
        const min = q.minRoutableMicroDiem && q.minRoutableMicroDiem > 0n ? q.minRoutableMicroDiem : 1n;
        const exclude = q.excludeKeyIds ?? [];
        return live(q.now)
          .filter(
            ({ o, k }) =>
              effectivePrice(o, q.now) <= q.maxPriceCents &&
              routableOf(o, k) >= min &&
              !exclude.includes(o.upstreamKeyId),
          )
          .slice(0, q.limit ?? 10_000)
          .map(({ o, k }) => ({
            offerId: o.id,
            upstreamKeyId: o.upstreamKeyId,
            supplierAccountId: o.accountId,
            priceCentsPerDollar: effectivePrice(o, q.now),
            routableMicroDiem: routableOf(o, k),
          }));
      },
    };
  }

  private ceilingStore(): CeilingStore {
    return {
      ceilingOf: async (accountId) => {
        this.count("ceilings.ceilingOf");
        return this.tables.accounts.get(accountId)?.ceilingCents ?? null;
      },
    };
  }

  private escrowStore(): EscrowStore {
    const t = () => this.tables;
    /** gives back every slice of `holders` and forgets them (`svc_release_expired`) */
    const releaseHolders = (holders: string[]) => {
      for (const [k, amount] of [...t().buyerEscrows]) {
        if (!holders.includes(holderOf(k))) continue;
        this.account(idOf(k)).reservedMicroUsdc -= amount;
        t().buyerEscrows.delete(k);
      }
      for (const [k, amount] of [...t().offerEscrows]) {
        if (!holders.includes(holderOf(k))) continue;
        this.offer(idOf(k)).reservedMicroDiem -= amount;
        t().offerEscrows.delete(k);
      }
      if (!this.defects.has("sweep-keeps-holds"))
        for (const [r, h] of [...t().keyHolds]) if (holders.includes(h.holder)) t().keyHolds.delete(r);
      for (const h of holders) t().holders.delete(h);
    };
    return {
      enrol: async (holder, expiresAt) => {
        this.count("escrow.enrol");
        if (t().holders.has(holder)) throw new Error(`holder ${holder} exists`);
        t().holders.set(holder, expiresAt);
      },
      renew: async (holder, expiresAt) => {
        this.count("escrow.renew");
        if (!t().holders.has(holder)) return false;
        t().holders.set(holder, expiresAt);
        return true;
      },
      take: async (ask) => {
        this.count("escrow.take");
        return this.atomically(() => this.take(ask));
      },
      giveBack: async (holder, returns) => {
        this.count("escrow.giveBack");
        this.atomically(() => this.giveBack(holder, returns));
      },
      buyerSlices: async (accountId, exceptHolder) => {
        this.count("escrow.buyerSlices");
        const out: { holder: string; amountMicroUsdc: bigint }[] = [];
        for (const [k, amount] of t().buyerEscrows) {
          if (idOf(k) === accountId && holderOf(k) !== exceptHolder)
            out.push({ holder: holderOf(k), amountMicroUsdc: amount });
        }
        return out;
      },
      release: async (holder) => {
        this.count("escrow.release");
        this.atomically(() => (t().holders.has(holder) ? releaseHolders([holder]) : undefined));
      },
      releaseExpired: async (now, limit) => {
        this.count("escrow.releaseExpired");
        const expired = [...t().holders]
          .filter(([, at]) => at.getTime() < now.getTime())
          .map(([id]) => id)
          .sort()
          .slice(0, limit);
        this.atomically(() => releaseHolders(expired));
        return expired.length;
      },
    };
  }

  /** `svc_escrow_take` (see prisma/functions/svc_escrow_take.sql): the buyer part commits even when the offer part is short. */
  private take(ask: TakeRequest): TakeResult {
    const t = this.tables;
    const r: TakeResult = {
      outcome: "ok",
      grantedUsdc: 0n,
      available: null,
      ceiling: null,
      grantedDiem: 0n,
      routable: null,
      keyBalance: null,
    };
    const lease = t.holders.get(ask.holder);
    if (!lease || lease.getTime() <= ask.now.getTime()) return { ...r, outcome: "holder_lost" };
    if (ask.accountId !== null) {
      const key = t.apiKeys.get(ask.apiKeyId);
      if (!key || key.accountId !== ask.accountId || key.status !== "active") return { ...r, outcome: "key_inactive" };
      const a = t.accounts.get(ask.accountId);
      r.available = a
        ? a.confirmedMicroUsdc - (this.defects.has("take-ignores-reserved") ? 0n : a.reservedMicroUsdc)
        : null;
      r.ceiling = a ? a.ceilingCents : null;
      if (!a || r.ceiling !== ask.ceilingCents) return { ...r, outcome: "stale_ceiling" };
      if ((r.available ?? 0n) < ask.usdcMin) return { ...r, outcome: "insufficient_balance" };
      const granted = minBig(maxBig(ask.usdcWant, ask.usdcMin), r.available ?? 0n);
      r.grantedUsdc = granted;
      a.reservedMicroUsdc += granted;
      const k = slot(a.id, ask.holder);
      t.buyerEscrows.set(k, (t.buyerEscrows.get(k) ?? 0n) + granted);
      r.available = (r.available ?? 0n) - granted;
    }
    if (ask.offerId !== null) {
      const o = t.offers.get(ask.offerId);
      const k = o ? t.upstreamKeys.get(o.upstreamKeyId) : undefined;
      if (!o || !k) return { ...r, outcome: "offer_short", routable: 0n, keyBalance: null };
      const eligible = eligibleNow(o, k, ask.now) && effectivePrice(o, ask.now) <= ask.ceilingCents;
      r.routable = routableOf(o, k);
      r.keyBalance = k.lastBalanceMicroDiem;
      if (!eligible) return { ...r, outcome: "offer_short", routable: 0n };
      if (r.routable < ask.diemMin) return { ...r, outcome: "offer_short" };
      const granted = minBig(maxBig(ask.diemWant, ask.diemMin), r.routable);
      r.grantedDiem = granted;
      o.reservedMicroDiem += granted;
      const s = slot(o.id, ask.holder);
      t.offerEscrows.set(s, (t.offerEscrows.get(s) ?? 0n) + granted);
      r.routable -= granted;
    }
    return r;
  }

  /** `svc_escrow_give_back`: each slice by at most what it holds; one that holds less is left alone. */
  private giveBack(holder: string, returns: readonly SliceReturn[]): void {
    const t = this.tables;
    const sums = new Map<string, { kind: "buyer" | "offer"; id: string; amount: bigint }>();
    for (const r of returns) {
      const k = `${r.kind}:${r.id}`;
      const prev = sums.get(k);
      sums.set(k, { kind: r.kind, id: r.id, amount: (prev?.amount ?? 0n) + r.amount });
    }
    for (const { kind, id, amount } of sums.values()) {
      const escrows = kind === "buyer" ? t.buyerEscrows : t.offerEscrows;
      const k = slot(id, holder);
      const held = escrows.get(k);
      if (held === undefined) continue;
      if (amount > 0n && held >= amount) {
        escrows.set(k, held - amount);
        if (kind === "buyer") this.account(id).reservedMicroUsdc -= amount;
        else this.offer(id).reservedMicroDiem -= amount;
      }
      if (escrows.get(k) === 0n) escrows.delete(k);
    }
  }

  /** `svc_key_reserve` (prisma/functions/svc_key_reserve.sql): its outcomes, in the same order. */
  private keyBudgetStore(): KeyBudgetStore {
    const t = () => this.tables;
    return {
      reserve: async (ask: KeyBudgetAsk): Promise<KeyBudgetResult> => {
        this.count("budgets.reserve");
        const none = { remainingMicroUsdc: null, limitMicroUsdc: null, reset: null };
        const lease = t().holders.get(ask.holder);
        if (!lease || lease.getTime() <= ask.now.getTime()) return { outcome: "holder_lost", ...none };
        const key = t().apiKeys.get(ask.apiKeyId);
        if (key?.status !== "active") return { outcome: "key_inactive", ...none };
        const chain = [...(this.defects.has("ancestor-unchecked") ? [] : (key.ancestorIds ?? [])), key.id].map((id) =>
          t().apiKeys.get(id),
        );
        const inSubtree = (keyId: string, root: string) =>
          keyId === root || (t().apiKeys.get(keyId)?.ancestorIds ?? []).includes(root);
        let best: { left: bigint; limit: bigint; reset: MemoryApiKey["limitReset"] & string } | null = null;
        for (const k of chain) {
          if (k?.status !== "active") return { outcome: "key_inactive", ...none };
          const limit = k.limitMicroUsdc ?? null;
          if (limit === null) continue;
          const reset = k.limitReset ?? "never";
          const period = ask.periods[reset];
          const from = period.start ? utcDay(period.start) : null;
          const to = period.end ? utcDay(period.end) : null;
          let left = limit;
          for (const [s, v] of t().keySpend) {
            const day = holderOf(s);
            if (inSubtree(idOf(s), k.id) && (from === null || day >= from) && (to === null || day < to)) left -= v;
          }
          if (!this.defects.has("holds-uncounted"))
            for (const h of t().keyHolds.values()) if (inSubtree(h.apiKeyId, k.id)) left -= h.amount;
          left = maxBig(left, 0n);
          if (best === null || left < best.left) best = { left, limit, reset };
        }
        if (best === null) return { outcome: "unlimited", ...none };
        const found = { remainingMicroUsdc: best.left, limitMicroUsdc: best.limit, reset: best.reset };
        if (ask.amountMicroUsdc > best.left) return { outcome: "exceeded", ...found };
        if (t().keyHolds.has(ask.requestId)) throw new Error("duplicate key value (key_budget_holds_pkey)");
        t().keyHolds.set(ask.requestId, { apiKeyId: ask.apiKeyId, holder: ask.holder, amount: ask.amountMicroUsdc });
        return { outcome: "ok", ...found };
      },
    };
  }

  private settlementStore(): SettlementStore {
    return {
      commit: async (items: EndItem[]) => {
        this.count("settlement.commit");
        const failure = this.failNextCommit;
        if (failure) {
          this.failNextCommit = null;
          throw failure;
        }
        // a JSON round trip, as the SQL store sends the items
        const copy = JSON.parse(JSON.stringify(items)) as EndItem[];
        const balances = this.atomically(() => this.endItems(copy));
        const lost = this.loseNextAck;
        if (lost) {
          this.loseNextAck = null;
          throw lost;
        }
        return balances;
      },
      ended: async (requestId: string) => {
        this.count("settlement.ended");
        const item = this.defects.has("lost-ack-unread")
          ? undefined
          : this.tables.requests.find((r) => r.request === requestId);
        return item ? { status: item.status, confirmed: this.account(item.account).confirmedMicroUsdc } : null;
      },
    };
  }

  /** `svc_end_items` (prisma/functions/svc_end_items.sql): its guards, then its effects; any guard that fails throws. */
  private endItems(v: EndItem[]): bigint[] {
    const t = this.tables;
    const fail = (why: string): never => {
      throw new Error(`end: ${why}`);
    };
    const charged = v.filter((i) => i.clear !== null);
    if (v.length > 1 && new Set(v.map((i) => i.request)).size !== v.length)
      fail("a request appears twice in one batch");
    for (const i of charged) {
      const big = (x: string | null) => BigInt(x ?? 0);
      const [gross, burn, fee, share] = [big(i.gross), big(i.burn), big(i.fee), big(i.share)];
      if (!i.buyer_holder || !i.offer_holder || gross < 0n || burn < 0n || fee + share !== gross)
        fail("a charge without its slices or not balanced");
    }
    if (v.some((i) => i.video !== null && i.clear === null)) fail("a video job without its charge");
    for (const i of charged) {
      const hold = t.keyHolds.get(i.request);
      if (hold && BigInt(i.gross ?? 0) > hold.amount) fail("a charge beyond its key budget hold");
    }
    for (const i of v) {
      if (t.requests.some((r) => r.request === i.request)) fail("duplicate key value (inference_requests_pkey)");
      if (!t.accounts.has(i.account)) fail("foreign key (account)");
    }
    t.requests.push(...v);
    // key budgets: the request's hold ends with it; its charge counts on its start day
    for (const i of v) {
      t.keyHolds.delete(i.request);
      const gross = BigInt(i.gross ?? 0);
      if (i.clear !== null && gross > 0n && i.api_key) {
        const k = slot(i.api_key, (this.defects.has("spend-by-end-day") ? i.now : i.started).slice(0, 10));
        t.keySpend.set(k, (t.keySpend.get(k) ?? 0n) + gross);
      }
    }
    for (const i of charged) {
      t.clears.push({
        id: i.clear as string,
        request: i.request,
        buyer: i.account,
        supplier: i.supplier as string,
        offer: i.offer as string,
        key: i.key as string,
        price: i.price as number,
        burnMicroDiem: BigInt(i.burn ?? 0),
        grossMicroUsdc: BigInt(i.gross ?? 0),
        feeMicroUsdc: BigInt(i.fee ?? 0),
        supplierMicroUsdc: BigInt(i.share ?? 0),
      });
    }
    // what leaves each buyer slice (charges and returns) and each offer slice (burns and returns)
    const debits = new Map<string, bigint>();
    const burns = new Map<string, bigint>();
    const add = (m: Map<string, bigint>, k: string, n: bigint) => m.set(k, (m.get(k) ?? 0n) + n);
    for (const i of charged) {
      add(debits, slot(i.account, i.buyer_holder as string), BigInt(i.gross ?? 0));
      add(burns, slot(i.offer as string, i.offer_holder as string), BigInt(i.burn ?? 0));
    }
    for (const i of v) {
      for (const r of i.returns ?? []) {
        if ("account" in r) add(debits, slot(r.account, r.holder), BigInt(r.amount));
        else add(burns, slot(r.offer, r.holder), BigInt(r.amount));
      }
    }
    const apply = (m: Map<string, bigint>, escrows: Map<string, bigint>, what: string) => {
      const perId = new Map<string, bigint>();
      for (const [k, amount] of m) {
        if (amount <= 0n) continue;
        const held = escrows.get(k);
        if (held === undefined || held < amount) fail(`${what} slice is missing or short`);
        escrows.set(k, (held as bigint) - amount);
        if (escrows.get(k) === 0n) escrows.delete(k);
        add(perId, idOf(k), amount);
      }
      return perId;
    };
    for (const [id, m] of apply(debits, t.buyerEscrows, "a buyer")) {
      const a = this.account(id);
      const g = charged.filter((i) => i.account === id).reduce((s, i) => s + BigInt(i.gross ?? 0), 0n);
      if (a.reservedMicroUsdc < m || a.confirmedMicroUsdc - g < a.reservedMicroUsdc - m)
        fail("a buyer balance is short");
      a.reservedMicroUsdc -= m;
      a.confirmedMicroUsdc -= g;
    }
    const at = new Date(
      v
        .map((i) => i.now)
        .sort()
        .at(-1) ?? "",
    );
    for (const [id, m] of apply(burns, t.offerEscrows, "an offer")) {
      const o = this.offer(id);
      const b = charged.filter((i) => i.offer === id).reduce((s, i) => s + BigInt(i.burn ?? 0), 0n);
      if (o.reservedMicroDiem < m || o.remainingMicroDiem < b) fail("an offer is short");
      const depleted = o.remainingMicroDiem - b === 0n && (o.status === "active" || o.status === "paused") && b > 0n;
      o.reservedMicroDiem -= m;
      o.remainingMicroDiem -= b;
      if (depleted) {
        o.status = "depleted";
        o.endedAt = at;
      }
    }
    for (const i of charged) {
      const k = t.upstreamKeys.get(i.key as string);
      const burn = BigInt(i.burn ?? 0);
      if (k && k.lastBalanceMicroDiem !== null && burn > 0n)
        k.lastBalanceMicroDiem = maxBig(k.lastBalanceMicroDiem - burn, 0n);
      const share = BigInt(i.share ?? 0);
      const supplier = this.account(i.supplier as string);
      if (share > 0n && i.video !== null && !this.defects.has("video-share-payable"))
        supplier.supplierHeldMicroUsdc += share;
      else if (share > 0n) supplier.supplierPayableMicroUsdc += share;
    }
    return v.map((i) => this.account(i.account).confirmedMicroUsdc);
  }

  // ─────────────────── supply ledger twins (src/domain/ledger/ledger.ts) ───────────────────

  /**
   * `moveHeldShare` "release" (a video job became final): the clear's held share moves from the
   * supplier's held balance to payable, once; a clear never held, refunded or already released moves
   * nothing (false).
   */
  releaseHeld(requestId: string): boolean {
    return this.atomically(() => {
      const c = this.tables.clears.find((x) => x.request === requestId);
      const item = this.tables.requests.find((r) => r.request === requestId);
      if (!c || item?.video == null || this.ledger.refunds.has(c.id) || this.ledger.released.has(requestId))
        return false;
      if (c.supplierMicroUsdc === 0n) return false;
      const s = this.account(c.supplier);
      if (s.supplierHeldMicroUsdc < c.supplierMicroUsdc)
        throw new Error("supplier held balance does not cover the release");
      s.supplierHeldMicroUsdc -= c.supplierMicroUsdc;
      s.supplierPayableMicroUsdc += c.supplierMicroUsdc;
      this.ledger.released.add(requestId);
      return true;
    });
  }

  /**
   * `refundClear`: once per clear, the buyer gets the whole gross back, the supplier's share is taken
   * back whole (off held while the job is not final, else off payable, which may go negative) and the
   * platform gives back only its fee. False when already refunded.
   */
  refundClear(clearId: string): boolean {
    return this.atomically(() => {
      const c = this.tables.clears.find((x) => x.id === clearId);
      if (!c || this.ledger.refunds.has(clearId)) return false;
      const item = this.tables.requests.find((r) => r.request === c.request);
      const fromHeld = item?.video != null && !this.ledger.released.has(c.request);
      const buyer = this.account(c.buyer);
      const supplier = this.account(c.supplier);
      const keepShare = this.defects.has("refund-from-platform");
      buyer.confirmedMicroUsdc += c.grossMicroUsdc;
      const share = keepShare ? 0n : c.supplierMicroUsdc;
      if (fromHeld) {
        if (supplier.supplierHeldMicroUsdc < share) throw new Error("supplier held balance does not cover the refund");
        supplier.supplierHeldMicroUsdc -= share;
      } else supplier.supplierPayableMicroUsdc -= share;
      this.ledger.refunds.set(clearId, {
        buyerMicroUsdc: c.grossMicroUsdc,
        supplierMicroUsdc: share,
        platformMicroUsdc: c.grossMicroUsdc - share,
        fromHeld,
      });
      return true;
    });
  }

  /** A payout run for one supplier: its whole payable balance when at least `minimumMicroUsdc` (0n when none). */
  payout(supplierAccountId: string, minimumMicroUsdc: bigint): bigint {
    return this.atomically(() => {
      const s = this.account(supplierAccountId);
      let amount = s.supplierPayableMicroUsdc;
      if (this.defects.has("payout-includes-held")) amount += s.supplierHeldMicroUsdc;
      if (amount < minimumMicroUsdc || amount <= 0n) return 0n;
      s.supplierPayableMicroUsdc -= amount;
      this.ledger.paidOut.set(supplierAccountId, (this.ledger.paidOut.get(supplierAccountId) ?? 0n) + amount);
      return amount;
    });
  }

  private keyMarks(): KeyMarks {
    return {
      // KeyHealth.coolDown: only extends
      coolDown: async (upstreamKeyId, untilMs) => {
        this.count("keyHealth.coolDown");
        const k = this.tables.upstreamKeys.get(upstreamKeyId);
        if (!k || (k.cooldownUntil !== null && k.cooldownUntil.getTime() >= untilMs)) return false;
        k.cooldownUntil = new Date(untilMs);
        return true;
      },
      // KeyHealth.markAuthFailed: active → auth_failed
      markAuthFailed: async (upstreamKeyId) => {
        this.count("keyHealth.markAuthFailed");
        const k = this.tables.upstreamKeys.get(upstreamKeyId);
        if (k?.status !== "active") return false;
        k.status = "auth_failed";
        k.authFailedAt = this.now();
        return true;
      },
    };
  }
}

/**
 * In-flight gates in memory (`GateLeases` without Redis): at most `limit` slots of a gate in use
 * at once; this process is the only holder.
 */
export class MemoryGates implements InFlightGates {
  readonly id = randomUUID();
  private readonly used = new Map<string, number>();
  closed = false;

  async acquire(gate: string, limit: number): Promise<boolean> {
    if (this.closed) throw new Error("gates closed");
    const n = this.used.get(gate) ?? 0;
    if (n >= limit) return false;
    this.used.set(gate, n + 1);
    return true;
  }

  release(gate: string): void {
    const n = this.used.get(gate) ?? 0;
    if (n <= 0) {
      if (!this.closed) throw new Error(`gate ${gate} released twice`);
      return;
    }
    if (n === 1) this.used.delete(gate);
    else this.used.set(gate, n - 1);
  }

  claimed(gate: string): number {
    return this.used.get(gate) ?? 0;
  }

  inUse(gate: string): number {
    return this.used.get(gate) ?? 0;
  }

  yieldIdle(): void {}

  /** every gate with a slot in use (a test's "nothing left held") */
  held(): string[] {
    return [...this.used.keys()];
  }

  async close(): Promise<void> {
    this.closed = true;
    this.used.clear();
  }
}
