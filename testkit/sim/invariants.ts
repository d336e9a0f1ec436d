// The simulation's invariants (docs/decisions.md "Seeded money simulation (issue 38)"), checked after
// every step against the market's rows and what the simulation itself knows (what it deposited).
// Each returns the broken rules as sentences; none is computed from the store's own running totals
// where an independent sum exists (a key's spend is summed from the committed requests by start day,
// not read from `keySpend`).

import { budgetPeriod } from "../../src/domain/keys/key-period.js";
import { computeCharge } from "../../src/lib/money.js";
import type { SimWorld } from "./world.js";

const sum = (xs: Iterable<bigint>) => {
  let s = 0n;
  for (const x of xs) s += x;
  return s;
};

/** Every rule the books and balances must keep at any instant. */
export function checkInvariants(w: SimWorld): string[] {
  const bad: string[] = [];
  const t = w.market.tables;
  const L = (id: string | null | undefined) => w.label(id);
  const feeBps = w.config.fees.platformFeeBps;
  const { refunds, paidOut, released } = w.market.ledger;

  // requests: each recorded once; clears: one per charged request, each balanced and priced by the rule
  const seen = new Set<string>();
  for (const r of t.requests) {
    if (seen.has(r.request)) bad.push(`request ${r.request} recorded twice`);
    seen.add(r.request);
  }
  const clearOf = new Map<string, (typeof t.clears)[number]>();
  for (const c of t.clears) {
    if (clearOf.has(c.request)) bad.push(`request ${c.request} cleared twice`);
    clearOf.set(c.request, c);
    const split = computeCharge(c.burnMicroDiem, c.price, feeBps);
    if (c.feeMicroUsdc + c.supplierMicroUsdc !== c.grossMicroUsdc)
      bad.push(`clear of ${c.request}: fee + share ≠ gross`);
    if (
      split.grossMicroUsdc !== c.grossMicroUsdc ||
      split.feeMicroUsdc !== c.feeMicroUsdc ||
      c.feeMicroUsdc < 0n ||
      c.supplierMicroUsdc < 0n
    )
      bad.push(`clear of ${c.request}: not computeCharge(burn ${c.burnMicroDiem}, ${c.price}¢)`);
  }
  const items = new Map(t.requests.map((r) => [r.request, r]));
  for (const c of t.clears) {
    const r = items.get(c.request);
    if (!r) bad.push(`clear of ${c.request} without its request`);
    else if (c.price > r.ceiling) bad.push(`clear of ${c.request} at ${c.price}¢ above its ceiling ${r.ceiling}¢`);
  }

  // buyers: confirmed = deposits − charges + refunds; 0 ≤ reserved = Σ its escrow slices ≤ confirmed
  const escrowOf = new Map<string, bigint>();
  for (const [k, v] of t.buyerEscrows) {
    const id = k.slice(0, k.indexOf("/"));
    escrowOf.set(id, (escrowOf.get(id) ?? 0n) + v);
    if (v <= 0n) bad.push(`buyer slice ${k} holds ${v}`);
  }
  const charged = new Map<string, bigint>();
  const refunded = new Map<string, bigint>();
  for (const c of t.clears) charged.set(c.buyer, (charged.get(c.buyer) ?? 0n) + c.grossMicroUsdc);
  for (const [clearId, r] of refunds) {
    const c = t.clears.find((x) => x.id === clearId);
    if (c) refunded.set(c.buyer, (refunded.get(c.buyer) ?? 0n) + r.buyerMicroUsdc);
    if (c && r.buyerMicroUsdc > c.grossMicroUsdc) bad.push(`refund of ${c.request} gives back more than its gross`);
    if (c && r.platformMicroUsdc > c.feeMicroUsdc)
      bad.push(`refund of ${c.request}: the platform gave back ${r.platformMicroUsdc} > its fee ${c.feeMicroUsdc}`);
  }
  for (const a of t.accounts.values()) {
    const expect = (w.funded.get(a.id) ?? 0n) - (charged.get(a.id) ?? 0n) + (refunded.get(a.id) ?? 0n);
    if (a.confirmedMicroUsdc !== expect)
      bad.push(`${L(a.id)} confirmed ${a.confirmedMicroUsdc} ≠ deposits − charges + refunds ${expect}`);
    if (a.reservedMicroUsdc < 0n) bad.push(`${L(a.id)} reserved ${a.reservedMicroUsdc} < 0`);
    if (a.reservedMicroUsdc > a.confirmedMicroUsdc)
      bad.push(`${L(a.id)} reserved ${a.reservedMicroUsdc} > confirmed ${a.confirmedMicroUsdc}`);
    if (a.reservedMicroUsdc !== (escrowOf.get(a.id) ?? 0n))
      bad.push(`${L(a.id)} reserved ${a.reservedMicroUsdc} ≠ its slices ${escrowOf.get(a.id) ?? 0n}`);
  }

  // offers: remaining = quantity − burns; 0 ≤ reserved = Σ its slices ≤ remaining
  const offerEscrow = new Map<string, bigint>();
  for (const [k, v] of t.offerEscrows) {
    const id = k.slice(0, k.indexOf("/"));
    offerEscrow.set(id, (offerEscrow.get(id) ?? 0n) + v);
  }
  const burnt = new Map<string, bigint>();
  for (const c of t.clears) burnt.set(c.offer, (burnt.get(c.offer) ?? 0n) + c.burnMicroDiem);
  for (const o of t.offers.values()) {
    if (o.remainingMicroDiem !== o.quantityMicroDiem - (burnt.get(o.id) ?? 0n))
      bad.push(`${L(o.id)} remaining ${o.remainingMicroDiem} ≠ quantity − burns`);
    if (o.remainingMicroDiem < 0n) bad.push(`${L(o.id)} remaining below 0`);
    if (o.reservedMicroDiem < 0n || o.reservedMicroDiem > o.remainingMicroDiem)
      bad.push(`${L(o.id)} reserved ${o.reservedMicroDiem} outside [0, remaining ${o.remainingMicroDiem}]`);
    if (o.reservedMicroDiem !== (offerEscrow.get(o.id) ?? 0n)) bad.push(`${L(o.id)} reserved ≠ its slices`);
  }

  // suppliers: held = Σ shares of video clears neither final nor refunded; payable = the other shares
  // − what refunds took from payable − payouts; a payout never pays a held share
  const held = new Map<string, bigint>();
  const payable = new Map<string, bigint>();
  const earned = new Map<string, bigint>();
  const add = (m: Map<string, bigint>, k: string, v: bigint) => m.set(k, (m.get(k) ?? 0n) + v);
  for (const c of t.clears) {
    const video = items.get(c.request)?.video != null;
    const refund = refunds.get(c.id);
    const onHold = video && !released.has(c.request);
    if (onHold && !refund) add(held, c.supplier, c.supplierMicroUsdc);
    if (!onHold) {
      add(payable, c.supplier, c.supplierMicroUsdc);
      add(earned, c.supplier, c.supplierMicroUsdc);
      if (refund) add(payable, c.supplier, -refund.supplierMicroUsdc);
    }
  }
  for (const [s, v] of paidOut) add(payable, s, -v);
  let platform = 0n;
  for (const c of t.clears) platform += c.feeMicroUsdc - (refunds.get(c.id)?.platformMicroUsdc ?? 0n);
  for (const a of t.accounts.values()) {
    if (a.supplierHeldMicroUsdc < 0n) bad.push(`${L(a.id)} held ${a.supplierHeldMicroUsdc} < 0`);
    if (a.supplierHeldMicroUsdc !== (held.get(a.id) ?? 0n))
      bad.push(`${L(a.id)} held ${a.supplierHeldMicroUsdc} ≠ its unfinished video shares ${held.get(a.id) ?? 0n}`);
    if (a.supplierPayableMicroUsdc !== (payable.get(a.id) ?? 0n))
      bad.push(
        `${L(a.id)} payable ${a.supplierPayableMicroUsdc} ≠ final shares − refunds − payouts ${payable.get(a.id) ?? 0n}`,
      );
    if ((paidOut.get(a.id) ?? 0n) > (earned.get(a.id) ?? 0n))
      bad.push(`${L(a.id)} was paid out ${paidOut.get(a.id)} > its final shares ${earned.get(a.id) ?? 0n}`);
  }
  // the books as a whole: every micro-USDC deposited is in exactly one place
  const deposited = sum(w.funded.values());
  const accounts = [...t.accounts.values()];
  const placed =
    sum(accounts.map((a) => a.confirmedMicroUsdc)) +
    sum(accounts.map((a) => a.supplierPayableMicroUsdc + a.supplierHeldMicroUsdc)) +
    sum(paidOut.values()) +
    platform;
  if (placed !== deposited) bad.push(`books: deposited ${deposited} ≠ balances + payouts + platform ${placed}`);
  // no platform loss: what the platform keeps is its fees of the clears not refunded
  const fees = sum(t.clears.filter((c) => !refunds.has(c.id)).map((c) => c.feeMicroUsdc));
  if (platform !== fees) bad.push(`platform keeps ${platform} ≠ its fees of unrefunded clears ${fees}`);

  // key budgets: each budgeted key and ancestor, in every period, within its limit (committed charges
  // summed by the request's start day); in the current period with the holds in flight too
  const ancestors = (id: string) => t.apiKeys.get(id)?.ancestorIds ?? [];
  const now = w.clock.now();
  for (const k of t.apiKeys.values()) {
    const limit = k.limitMicroUsdc ?? null;
    if (limit === null) continue;
    const reset = k.limitReset ?? "never";
    const inTree = (id: string) => id === k.id || ancestors(id).includes(k.id);
    const byPeriod = new Map<string, bigint>();
    for (const r of t.requests) {
      if (r.clear === null || r.api_key === null || !inTree(r.api_key)) continue;
      const p = budgetPeriod(reset, new Date(r.started)).start?.toISOString() ?? "all";
      byPeriod.set(p, (byPeriod.get(p) ?? 0n) + BigInt(r.gross ?? 0));
    }
    for (const [p, spent] of byPeriod) {
      if (spent > limit) bad.push(`${L(k.id)} spent ${spent} > its limit ${limit} in the ${reset} period ${p}`);
    }
    const current = budgetPeriod(reset, now).start?.toISOString() ?? "all";
    const holds = sum([...t.keyHolds.values()].filter((h) => inTree(h.apiKeyId)).map((h) => h.amount));
    const inPeriod = (byPeriod.get(current) ?? 0n) + holds;
    if (inPeriod > limit) bad.push(`${L(k.id)} spent + held ${inPeriod} > its limit ${limit} now`);
  }
  // the spend record (`api_key_spend`) is each key's charges summed by the day its request started
  const byDay = new Map<string, bigint>();
  for (const r of t.requests) {
    const gross = BigInt(r.gross ?? 0);
    if (r.clear === null || gross === 0n) continue;
    const k = `${r.api_key}/${r.started.slice(0, 10)}`;
    byDay.set(k, (byDay.get(k) ?? 0n) + gross);
  }
  for (const k of new Set([...byDay.keys(), ...t.keySpend.keys()])) {
    if ((byDay.get(k) ?? 0n) !== (t.keySpend.get(k) ?? 0n))
      bad.push(
        `key spend ${L(k.slice(0, k.indexOf("/")))} on ${k.slice(k.indexOf("/") + 1)}: recorded ${t.keySpend.get(k) ?? 0n} ≠ its charges by start day ${byDay.get(k) ?? 0n}`,
      );
  }
  // budget holds: each of a registered holder and of a request not ended yet
  for (const [request, h] of t.keyHolds) {
    if (!t.holders.has(h.holder)) bad.push(`a budget hold of ${request} outlives its holder`);
    if (items.has(request)) bad.push(`a budget hold of ${request} outlives its ending`);
  }
  return bad;
}

/** After the drain (every request ended, every process closed or swept, every video job final): nothing held. */
export function checkDrained(w: SimWorld): string[] {
  const bad: string[] = [];
  const t = w.market.tables;
  if (t.buyerEscrows.size > 0) bad.push(`${t.buyerEscrows.size} buyer slices left after the drain`);
  if (t.offerEscrows.size > 0) bad.push(`${t.offerEscrows.size} offer slices left after the drain`);
  if (t.keyHolds.size > 0) bad.push(`${t.keyHolds.size} budget holds left after the drain`);
  if (t.holders.size > 0) bad.push(`${t.holders.size} holders left after the drain`);
  for (const a of t.accounts.values()) {
    if (a.reservedMicroUsdc !== 0n) bad.push(`${w.label(a.id)} reserved ${a.reservedMicroUsdc} after the drain`);
    if (a.supplierHeldMicroUsdc !== 0n)
      bad.push(`${w.label(a.id)} held ${a.supplierHeldMicroUsdc} with every video job final`);
  }
  for (const o of t.offers.values())
    if (o.reservedMicroDiem !== 0n) bad.push(`${w.label(o.id)} reserved ${o.reservedMicroDiem} after the drain`);
  return bad;
}
