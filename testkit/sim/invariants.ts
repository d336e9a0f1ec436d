// The simulation's invariants (docs/decisions.md "Seeded money simulation (issue 38)"), checked after
// every step against the market database's rows as they are live (`readMarket`: one round trip; the
// rows less what appended clears have not yet folded, svc_unfolded) and what the
// simulation itself knows (what it deposited). Each returns the broken rules as sentences; none is
// computed from the database's own running totals where an independent sum exists (a key's spend is
// summed from the committed requests by start day, not read from `api_key_spend`).

import type { Sql } from "../../src/adapters/sql.js";
import { budgetPeriod, type LimitReset } from "../../src/domain/keys/key-period.js";
import { utcDay } from "../../src/lib/clock.js";
import { computeCharge } from "../../src/lib/money.js";
import type { SimWorld } from "./world.js";

const sum = (xs: Iterable<bigint>) => {
  let s = 0n;
  for (const x of xs) s += x;
  return s;
};

interface Clear {
  id: string;
  request: string;
  buyer: string;
  supplier: string;
  offer: string;
  /** the supplier key it burned */
  key: string;
  price: number;
  burn: bigint;
  gross: bigint;
  fee: bigint;
  share: bigint;
  /** the UTC day of its append (yyyy-mm-dd) and its modality: where the market's totals count it */
  day: string;
  modality: string;
  /** the UTC hour of its append (yyyy-mm-ddThh) and its model: where the model statistics count it */
  hour: string;
  model: string;
}

/** What one refund moved, read from its journal (`refund:<clear>`). */
interface Refund {
  buyer: bigint;
  supplier: bigint;
  platform: bigint;
}

/** The rows the invariants read, as of one instant. */
export interface MarketRows {
  accounts: { id: string; confirmed: bigint; reserved: bigint; payable: bigint; held: bigint }[];
  offers: {
    id: string;
    quantity: bigint;
    remaining: bigint;
    reserved: bigint;
    status: string;
    expiresAt: Date;
    keyStatus: string;
    supplier: string;
    key: string;
  }[];
  buyerEscrows: { id: string; holder: string; amount: bigint }[];
  offerEscrows: { id: string; holder: string; amount: bigint }[];
  holders: Set<string>;
  requests: { id: string; account: string; apiKey: string | null; started: Date; ceiling: number; video: boolean }[];
  clears: Clear[];
  apiKeys: { id: string; account: string; limit: bigint | null; reset: LimitReset; ancestors: string[] }[];
  /** `${apiKeyId}/${yyyy-mm-dd}` → `svc_key_spend` (folded and unfolded) */
  keySpend: Map<string, bigint>;
  keyHolds: { request: string; apiKey: string; holder: string; amount: bigint }[];
  /** clear id → what its refund moved (every refunded clear, a zero charge's too) */
  refunds: Map<string, Refund>;
  /** requests whose clear's held share was released (an odd number of hold moves) */
  released: Set<string>;
  /** supplier account → paid out in total */
  paidOut: Map<string, bigint>;
  /** `${day}/${modality}` → the market's totals there (`svc_market_days`: the folds' rows and the unfolded) */
  market: Map<string, { clears: bigint; burn: bigint; gross: bigint }>;
  /** `${hour}/${model}` → the market's hours (`svc_model_hours`: the folds' rows and the unfolded) */
  modelHours: Map<string, { clears: bigint; burn: bigint; buyers: string[] }>;
}

const READ = `
  SELECT a.id, l.confirmed, l.reserved, l.payable, l.held
    FROM accounts a CROSS JOIN LATERAL svc_account_live(a.id) l ORDER BY a.id;
  SELECT o.id, o.quantity_micro_diem AS quantity, o.remaining_micro_diem - COALESCE(u.burn, 0) AS remaining,
         o.reserved_micro_diem - COALESCE(u.burn, 0) AS reserved, o.status::text AS status,
         o.expires_at AS "expiresAt", k.status::text AS "keyStatus", o.account_id AS supplier,
         o.upstream_key_id AS key
    FROM offers o JOIN upstream_keys k ON k.id = o.upstream_key_id
    LEFT JOIN (SELECT x.offer_id, sum(x.burn_micro_diem)::bigint AS burn FROM svc_unfolded() x GROUP BY 1) u
      ON u.offer_id = o.id
   ORDER BY o.id;
  SELECT e.account_id AS id, e.holder, e.amount_micro_usdc - COALESCE(u.gross, 0) AS amount
    FROM buyer_escrows e
    LEFT JOIN (SELECT x.buyer_account_id, x.holder, sum(x.gross_micro_usdc)::bigint AS gross FROM svc_unfolded() x
                WHERE x.payment_id IS NULL GROUP BY 1, 2) u ON u.buyer_account_id = e.account_id AND u.holder = e.holder
   ORDER BY 1, 2;
  SELECT e.offer_id AS id, e.holder, e.amount_micro_diem - COALESCE(u.burn, 0) AS amount
    FROM offer_escrows e
    LEFT JOIN (SELECT x.offer_id, x.holder, sum(x.burn_micro_diem)::bigint AS burn FROM svc_unfolded() x
                GROUP BY 1, 2) u ON u.offer_id = e.offer_id AND u.holder = e.holder
   ORDER BY 1, 2;
  SELECT id FROM escrow_holders;
  SELECT r.id, r.account_id AS account, r.api_key_id AS "apiKey", r.started_at AS started, r.max_price_cents AS ceiling,
         EXISTS (SELECT 1 FROM video_jobs v WHERE v.request_id = r.id) AS video
    FROM inference_requests r ORDER BY r.id;
  SELECT id, request_id AS request, buyer_account_id AS buyer, supplier_account_id AS supplier, offer_id AS offer,
         upstream_key_id AS key, price_cents_per_dollar AS price, burn_micro_diem AS burn, gross_micro_usdc AS gross, fee_micro_usdc AS fee,
         supplier_micro_usdc AS share, refunded_at IS NOT NULL AS refunded,
         (created_at AT TIME ZONE 'UTC')::date::text AS day, modality::text AS modality,
         to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') AS hour, model
    FROM clears ORDER BY request_id;
  SELECT id, account_id AS account, limit_micro_usdc AS "limit", limit_reset::text AS reset, ancestor_ids::text[] AS ancestors
    FROM api_keys ORDER BY id;
  SELECT api_key_id || '/' || day::text AS k, sum(spent_micro_usdc)::bigint AS spent FROM svc_key_spend() GROUP BY 1;
  SELECT request_id AS request, api_key_id AS "apiKey", holder, amount_micro_usdc AS amount FROM key_budget_holds;
  SELECT t.clear_id AS clear, e.book::text AS book, sum(e.amount_micro_usdc)::bigint AS amount
    FROM ledger_transactions t JOIN ledger_entries e ON e.transaction_id = t.id
   WHERE t.kind = 'refund' GROUP BY 1, 2;
  SELECT c.request_id AS request FROM ledger_transactions t JOIN clears c ON c.id = t.clear_id
   WHERE t.kind IN ('release', 'rehold') GROUP BY 1 HAVING count(*) % 2 = 1;
  SELECT account_id AS id, sum(amount_micro_usdc)::bigint AS paid FROM payouts WHERE status <> 'failed' GROUP BY 1;
  SELECT day::text || '/' || COALESCE(modality::text, 'retired') AS k, clears, burn_micro_diem AS burn,
         gross_micro_usdc AS gross
    FROM svc_market_days();
  SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') || '/' || model AS k, clears, burn_micro_diem AS burn,
         buyers::text[] AS buyers
    FROM svc_model_hours('-infinity', 'infinity')`;

type Row = Record<string, unknown>;

/** Every row the invariants read, in one round trip (one snapshot: the statements of one query). */
export async function readMarket(sql: Sql): Promise<MarketRows> {
  const results = (await sql.query(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; ${READ}; COMMIT`)) as unknown as {
    rows: Row[];
    command: string;
  }[];
  const sets = results.filter((r) => r.command === "SELECT").map((r) => r.rows);
  const [
    accounts,
    offers,
    buyerEscrows,
    offerEscrows,
    holders,
    requests,
    clears,
    apiKeys,
    spend,
    holds,
    refundLines,
    released,
    paid,
    market,
    hours,
  ] = sets as [Row[], Row[], Row[], Row[], Row[], Row[], Row[], Row[], Row[], Row[], Row[], Row[], Row[], Row[], Row[]];
  const refunds = new Map<string, Refund>();
  for (const c of clears as unknown as Array<Clear & { refunded: boolean }>)
    if (c.refunded) refunds.set(c.id, { buyer: 0n, supplier: 0n, platform: 0n });
  for (const l of refundLines as Array<{ clear: string; book: string; amount: bigint }>) {
    const r = refunds.get(l.clear) ?? { buyer: 0n, supplier: 0n, platform: 0n };
    if (l.book === "buyer_confirmed") r.buyer += l.amount;
    else if (l.book === "supplier_held" || l.book === "supplier_payable") r.supplier -= l.amount;
    else if (l.book === "platform_fee") r.platform -= l.amount;
    refunds.set(l.clear, r);
  }
  return {
    accounts: accounts as MarketRows["accounts"],
    offers: offers as MarketRows["offers"],
    buyerEscrows: buyerEscrows as MarketRows["buyerEscrows"],
    offerEscrows: offerEscrows as MarketRows["offerEscrows"],
    holders: new Set(holders.map((h) => h.id as string)),
    requests: requests as MarketRows["requests"],
    clears: clears as unknown as Clear[],
    apiKeys: apiKeys as MarketRows["apiKeys"],
    keySpend: new Map(spend.map((r) => [r.k as string, r.spent as bigint])),
    keyHolds: holds as MarketRows["keyHolds"],
    refunds,
    released: new Set(released.map((r) => r.request as string)),
    paidOut: new Map(paid.map((r) => [r.id as string, r.paid as bigint])),
    market: new Map(
      market.map((r) => [
        r.k as string,
        { clears: r.clears as bigint, burn: r.burn as bigint, gross: r.gross as bigint },
      ]),
    ),
    modelHours: new Map(
      hours.map((r) => [
        r.k as string,
        { clears: r.clears as bigint, burn: r.burn as bigint, buyers: r.buyers as string[] },
      ]),
    ),
  };
}

/** Every rule the books and balances must keep at any instant. */
export function checkInvariants(w: SimWorld, t: MarketRows): string[] {
  const bad: string[] = [];
  const L = (id: string | null | undefined) => w.label(id);
  const feeBps = w.config.fees.platformFeeBps;
  const { refunds, paidOut, released } = t;

  // requests: each recorded once; clears: one per charged request, each balanced and priced by the rule
  const seen = new Set<string>();
  for (const r of t.requests) {
    if (seen.has(r.id)) bad.push(`request ${r.id} recorded twice`);
    seen.add(r.id);
  }
  const clearOf = new Map<string, Clear>();
  for (const c of t.clears) {
    if (clearOf.has(c.request)) bad.push(`request ${c.request} cleared twice`);
    clearOf.set(c.request, c);
    const split = computeCharge(c.burn, c.price, feeBps);
    if (c.fee + c.share !== c.gross) bad.push(`clear of ${c.request}: fee + share ≠ gross`);
    if (split.grossMicroUsdc !== c.gross || split.feeMicroUsdc !== c.fee || c.fee < 0n || c.share < 0n)
      bad.push(`clear of ${c.request}: not computeCharge(burn ${c.burn}, ${c.price}¢)`);
  }
  const items = new Map(t.requests.map((r) => [r.id, r]));
  for (const c of t.clears) {
    const r = items.get(c.request);
    if (!r) bad.push(`clear of ${c.request} without its request`);
    else if (c.price > r.ceiling) bad.push(`clear of ${c.request} at ${c.price}¢ above its ceiling ${r.ceiling}¢`);
  }

  // the parties each record names, which no foreign key holds (docs/decisions.md "The append names its
  // parties without locking them"): a request's account is on record and its API key is that
  // account's; a clear's buyer is its request's account, and its supplier and key are its offer's
  const accountIds = new Set(t.accounts.map((a) => a.id));
  const keyOwner = new Map(t.apiKeys.map((k) => [k.id, k.account]));
  const offerById = new Map(t.offers.map((o) => [o.id, o]));
  for (const r of t.requests) {
    if (!accountIds.has(r.account)) bad.push(`request ${r.id} names an account not on record`);
    if (r.apiKey !== null && keyOwner.get(r.apiKey) !== r.account)
      bad.push(`request ${r.id} names an API key that is not its account's`);
  }
  for (const c of t.clears) {
    const o = offerById.get(c.offer);
    if (items.get(c.request)?.account !== c.buyer)
      bad.push(`clear of ${c.request} names a buyer other than its request's`);
    if (o?.supplier !== c.supplier || o?.key !== c.key)
      bad.push(`clear of ${c.request} names a supplier or key other than its offer's`);
  }

  // the market's totals (GET /v1/market/stats reads them: svc_market_days) are its unrefunded clears',
  // day by day and modality by modality, summed here from the clears themselves
  const owed = new Map<string, { clears: bigint; burn: bigint; gross: bigint }>();
  for (const c of t.clears) {
    if (refunds.has(c.id)) continue;
    const k = `${c.day}/${c.modality}`;
    const o = owed.get(k) ?? { clears: 0n, burn: 0n, gross: 0n };
    owed.set(k, { clears: o.clears + 1n, burn: o.burn + c.burn, gross: o.gross + c.gross });
  }
  for (const k of new Set([...owed.keys(), ...t.market.keys()])) {
    const want = owed.get(k) ?? { clears: 0n, burn: 0n, gross: 0n };
    const got = t.market.get(k) ?? { clears: 0n, burn: 0n, gross: 0n };
    if (got.clears !== want.clears || got.burn !== want.burn || got.gross !== want.gross)
      bad.push(
        `the market's totals of ${k} (${got.clears} clears, burn ${got.burn}, gross ${got.gross}) ≠ its unrefunded clears' (${want.clears}, ${want.burn}, ${want.gross})`,
      );
  }

  // the model statistics' hours (GET /v1/models/stats reads them: svc_model_hours) are its unrefunded
  // clears', hour by hour and model by model, and every buyer they name cleared there unrefunded
  const hourOwed = new Map<string, { clears: bigint; burn: bigint; buyers: Set<string> }>();
  for (const c of t.clears) {
    if (refunds.has(c.id)) continue;
    const k = `${c.hour}/${c.model}`;
    const o = hourOwed.get(k) ?? { clears: 0n, burn: 0n, buyers: new Set<string>() };
    hourOwed.set(k, { clears: o.clears + 1n, burn: o.burn + c.burn, buyers: o.buyers.add(c.buyer) });
  }
  for (const k of new Set([...hourOwed.keys(), ...t.modelHours.keys()])) {
    const want = hourOwed.get(k) ?? { clears: 0n, burn: 0n, buyers: new Set<string>() };
    const got = t.modelHours.get(k) ?? { clears: 0n, burn: 0n, buyers: [] };
    if (got.clears !== want.clears || got.burn !== want.burn)
      bad.push(
        `the market's hour ${k} (${got.clears} clears, burn ${got.burn}) ≠ its unrefunded clears' (${want.clears}, ${want.burn})`,
      );
    for (const b of got.buyers)
      if (!want.buyers.has(b))
        bad.push(`the market's hour ${k} names buyer ${L(b)}, who has no unrefunded clear there`);
  }

  // buyers: confirmed = deposits − charges + refunds; 0 ≤ reserved = Σ its escrow slices ≤ confirmed
  const escrowOf = new Map<string, bigint>();
  for (const e of t.buyerEscrows) {
    escrowOf.set(e.id, (escrowOf.get(e.id) ?? 0n) + e.amount);
    // live, a slice spent to 0 stays until its holder's fold deletes it; below 0 it would not cover
    if (e.amount < 0n) bad.push(`buyer slice ${e.id}/${e.holder} holds ${e.amount}`);
  }
  const charged = new Map<string, bigint>();
  const refunded = new Map<string, bigint>();
  for (const c of t.clears) charged.set(c.buyer, (charged.get(c.buyer) ?? 0n) + c.gross);
  const clearById = new Map(t.clears.map((c) => [c.id, c]));
  for (const [clearId, r] of refunds) {
    const c = clearById.get(clearId);
    if (c) refunded.set(c.buyer, (refunded.get(c.buyer) ?? 0n) + r.buyer);
    if (c && r.buyer > c.gross) bad.push(`refund of ${c.request} gives back more than its gross`);
    if (c && r.platform > c.fee)
      bad.push(`refund of ${c.request}: the platform gave back ${r.platform} > its fee ${c.fee}`);
  }
  for (const a of t.accounts) {
    const expect = (w.funded.get(a.id) ?? 0n) - (charged.get(a.id) ?? 0n) + (refunded.get(a.id) ?? 0n);
    if (a.confirmed !== expect)
      bad.push(`${L(a.id)} confirmed ${a.confirmed} ≠ deposits − charges + refunds ${expect}`);
    if (a.reserved < 0n) bad.push(`${L(a.id)} reserved ${a.reserved} < 0`);
    if (a.reserved > a.confirmed) bad.push(`${L(a.id)} reserved ${a.reserved} > confirmed ${a.confirmed}`);
    if (a.reserved !== (escrowOf.get(a.id) ?? 0n))
      bad.push(`${L(a.id)} reserved ${a.reserved} ≠ its slices ${escrowOf.get(a.id) ?? 0n}`);
  }

  // offers: remaining = quantity − burns; 0 ≤ reserved = Σ its slices ≤ remaining
  const offerEscrow = new Map<string, bigint>();
  for (const e of t.offerEscrows) offerEscrow.set(e.id, (offerEscrow.get(e.id) ?? 0n) + e.amount);
  const burnt = new Map<string, bigint>();
  for (const c of t.clears) burnt.set(c.offer, (burnt.get(c.offer) ?? 0n) + c.burn);
  for (const o of t.offers) {
    if (o.remaining !== o.quantity - (burnt.get(o.id) ?? 0n))
      bad.push(`${L(o.id)} remaining ${o.remaining} ≠ quantity − burns`);
    if (o.remaining < 0n) bad.push(`${L(o.id)} remaining below 0`);
    if (o.reserved < 0n || o.reserved > o.remaining)
      bad.push(`${L(o.id)} reserved ${o.reserved} outside [0, remaining ${o.remaining}]`);
    if (o.reserved !== (offerEscrow.get(o.id) ?? 0n)) bad.push(`${L(o.id)} reserved ≠ its slices`);
  }

  // suppliers: held = Σ shares of video clears neither final nor refunded; payable = the other shares
  // − what refunds took from payable − payouts; a payout never pays a held share
  const held = new Map<string, bigint>();
  const payable = new Map<string, bigint>();
  const earned = new Map<string, bigint>();
  const add = (m: Map<string, bigint>, k: string, v: bigint) => m.set(k, (m.get(k) ?? 0n) + v);
  for (const c of t.clears) {
    const video = items.get(c.request)?.video === true;
    const refund = refunds.get(c.id);
    const onHold = video && !released.has(c.request);
    if (onHold && !refund) add(held, c.supplier, c.share);
    if (!onHold) {
      add(payable, c.supplier, c.share);
      add(earned, c.supplier, c.share);
      if (refund) add(payable, c.supplier, -refund.supplier);
    }
  }
  for (const [s, v] of paidOut) add(payable, s, -v);
  let platform = 0n;
  for (const c of t.clears) platform += c.fee - (refunds.get(c.id)?.platform ?? 0n);
  for (const a of t.accounts) {
    if (a.held < 0n) bad.push(`${L(a.id)} held ${a.held} < 0`);
    if (a.held !== (held.get(a.id) ?? 0n))
      bad.push(`${L(a.id)} held ${a.held} ≠ its unfinished video shares ${held.get(a.id) ?? 0n}`);
    if (a.payable !== (payable.get(a.id) ?? 0n))
      bad.push(`${L(a.id)} payable ${a.payable} ≠ final shares − refunds − payouts ${payable.get(a.id) ?? 0n}`);
    if ((paidOut.get(a.id) ?? 0n) > (earned.get(a.id) ?? 0n))
      bad.push(`${L(a.id)} was paid out ${paidOut.get(a.id)} > its final shares ${earned.get(a.id) ?? 0n}`);
  }
  // the books as a whole: every micro-USDC deposited is in exactly one place
  const deposited = sum(w.funded.values());
  const placed =
    sum(t.accounts.map((a) => a.confirmed)) +
    sum(t.accounts.map((a) => a.payable + a.held)) +
    sum(paidOut.values()) +
    platform;
  if (placed !== deposited) bad.push(`books: deposited ${deposited} ≠ balances + payouts + platform ${placed}`);
  // no platform loss: what the platform keeps is its fees of the clears not refunded
  const fees = sum(t.clears.filter((c) => !refunds.has(c.id)).map((c) => c.fee));
  if (platform !== fees) bad.push(`platform keeps ${platform} ≠ its fees of unrefunded clears ${fees}`);

  // key budgets: each budgeted key and ancestor, in every period, within its limit (committed charges
  // summed by the request's start day); in the current period with the holds in flight too
  const keys = new Map(t.apiKeys.map((k) => [k.id, k]));
  const ancestors = (id: string) => keys.get(id)?.ancestors ?? [];
  const now = w.clock.now();
  for (const k of t.apiKeys) {
    const limit = k.limit;
    if (limit === null) continue;
    const inTree = (id: string) => id === k.id || ancestors(id).includes(k.id);
    const byPeriod = new Map<string, bigint>();
    for (const r of t.requests) {
      const c = clearOf.get(r.id);
      if (!c || r.apiKey === null || !inTree(r.apiKey)) continue;
      const p = budgetPeriod(k.reset, r.started).start?.toISOString() ?? "all";
      byPeriod.set(p, (byPeriod.get(p) ?? 0n) + c.gross);
    }
    for (const [p, spent] of byPeriod) {
      if (spent > limit) bad.push(`${L(k.id)} spent ${spent} > its limit ${limit} in the ${k.reset} period ${p}`);
    }
    const current = budgetPeriod(k.reset, now).start?.toISOString() ?? "all";
    const holds = sum(t.keyHolds.filter((h) => inTree(h.apiKey)).map((h) => h.amount));
    const inPeriod = (byPeriod.get(current) ?? 0n) + holds;
    if (inPeriod > limit) bad.push(`${L(k.id)} spent + held ${inPeriod} > its limit ${limit} now`);
  }
  // the spend record (`api_key_spend`) is each key's charges summed by the day its request started
  const byDay = new Map<string, bigint>();
  for (const r of t.requests) {
    const c = clearOf.get(r.id);
    if (!c || c.gross === 0n || r.apiKey === null) continue;
    const k = `${r.apiKey}/${utcDay(r.started)}`;
    byDay.set(k, (byDay.get(k) ?? 0n) + c.gross);
  }
  for (const k of new Set([...byDay.keys(), ...t.keySpend.keys()])) {
    if ((byDay.get(k) ?? 0n) !== (t.keySpend.get(k) ?? 0n))
      bad.push(
        `key spend ${L(k.slice(0, k.indexOf("/")))} on ${k.slice(k.indexOf("/") + 1)}: recorded ${t.keySpend.get(k) ?? 0n} ≠ its charges by start day ${byDay.get(k) ?? 0n}`,
      );
  }
  // budget holds: each of a registered holder and of a request not ended yet
  for (const h of t.keyHolds) {
    if (!t.holders.has(h.holder)) bad.push(`a budget hold of ${h.request} outlives its holder`);
    if (items.has(h.request)) bad.push(`a budget hold of ${h.request} outlives its ending`);
  }
  return bad;
}

/** After the drain (every request ended, every process closed or swept, every video job final): nothing held. */
export function checkDrained(w: SimWorld, t: MarketRows): string[] {
  const bad: string[] = [];
  if (t.buyerEscrows.length > 0) bad.push(`${t.buyerEscrows.length} buyer slices left after the drain`);
  if (t.offerEscrows.length > 0) bad.push(`${t.offerEscrows.length} offer slices left after the drain`);
  if (t.keyHolds.length > 0) bad.push(`${t.keyHolds.length} budget holds left after the drain`);
  if (t.holders.size > 0) bad.push(`${t.holders.size} holders left after the drain`);
  for (const a of t.accounts) {
    if (a.reserved !== 0n) bad.push(`${w.label(a.id)} reserved ${a.reserved} after the drain`);
    if (a.held !== 0n) bad.push(`${w.label(a.id)} held ${a.held} with every video job final`);
  }
  for (const o of t.offers) if (o.reserved !== 0n) bad.push(`${w.label(o.id)} reserved ${o.reserved} after the drain`);
  return bad;
}
