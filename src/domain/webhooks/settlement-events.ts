import { utcDay } from "../../lib/clock.js";
import type { EndItem } from "../inference/settlement/end-item.js";
import type { SettlementEvents, SettlementTx } from "../inference/settlement/stores.js";
import { budgetPeriod, type LimitReset } from "../keys/key-period.js";
import { query, type WebhookOutbox } from "./outbox.js";
import { balanceLowData, keyBudgetExhaustedData } from "./payloads.js";

/**
 * The events a settlement batch causes, written to the outbox in the batch's own transaction
 * (`sqlSettlementStore`; docs/decisions.md "Webhooks"), so an event is never lost nor sent early:
 *
 * - `balance.low` (buyer): the batch's charges took the confirmed balance from at or above an
 *   endpoint's threshold to below it;
 * - `key.budget_exhausted` (buyer): a key's spend for the period reached its limit, or a request on
 *   it was refused 402 `key_budget_exceeded`; once per key and period per endpoint.
 *
 * The batch asks who takes these in the statement that runs it (`types`), so a batch for accounts
 * without endpoints costs nothing more; only accounts in `subscribers` are looked at here. An offer
 * sold out is not the batch's: the holder's fold finds it (`offer.depleted`, `OfferService`).
 */
export const SETTLEMENT_EVENT_TYPES = ["balance.low", "key.budget_exhausted"] as const;

export function settlementWebhooks(outbox: WebhookOutbox): SettlementEvents {
  return {
    types: SETTLEMENT_EVENT_TYPES,
    async record(tx, items, confirmed, subscribers) {
      const takes = (account: string | null, type: string) => account !== null && !!subscribers.get(account)?.has(type);
      return [
        ...(await lowBalances(outbox, tx, items, confirmed, takes)),
        ...(await exhaustedKeys(outbox, tx, items, takes)),
      ];
    },
    dispatch: (ids) => outbox.dispatch(ids),
  };
}

type Takes = (account: string | null, type: string) => boolean;

async function lowBalances(
  outbox: WebhookOutbox,
  tx: SettlementTx,
  items: readonly EndItem[],
  confirmed: readonly bigint[],
  takes: Takes,
) {
  // per buyer: the balance after the batch, and what the batch's charges took from it
  const buyers = new Map<string, { after: bigint; charged: bigint }>();
  items.forEach((i, n) => {
    // a charge paid per request takes nothing from the balance
    if (i.charge === null || i.paymentId !== null || !takes(i.accountId, "balance.low")) return;
    const b = buyers.get(i.accountId) ?? { after: confirmed[n] ?? 0n, charged: 0n };
    b.charged += i.charge.grossMicroUsdc;
    buyers.set(i.accountId, b);
  });
  const ids: string[] = [];
  for (const [account, b] of buyers) {
    if (b.charged <= 0n) continue;
    const before = b.after + b.charged;
    ids.push(
      ...(await outbox.emit(tx, account, "balance.low", (e) => {
        const threshold = e.balanceLowThresholdMicroUsdc;
        return threshold !== null && before >= threshold && b.after < threshold
          ? balanceLowData(b.after, threshold)
          : null;
      })),
    );
  }
  return ids;
}

async function exhaustedKeys(outbox: WebhookOutbox, tx: SettlementTx, items: readonly EndItem[], takes: Takes) {
  // per key: the latest request that may have exhausted it (a charge, or a refusal for the budget)
  const candidates = new Map<string, { account: string; started: Date; refused: boolean }>();
  for (const i of items) {
    const refused = i.errorCode === "key_budget_exceeded";
    if (!i.apiKeyId || !(refused || (i.charge !== null && i.charge.grossMicroUsdc > 0n))) continue;
    if (!takes(i.accountId, "key.budget_exhausted")) continue;
    const c = candidates.get(i.apiKeyId);
    const started = i.startedAt;
    candidates.set(i.apiKeyId, {
      account: i.accountId,
      started: c && c.started > started ? c.started : started,
      refused: refused || (c?.refused ?? false),
    });
  }
  if (candidates.size === 0) return [];
  // a key's spend counts against every budgeted ancestor: they may be exhausted too; a
  // refusal is told to each of them (the refusal does not say whose budget was the tightest)
  const chains = await query<{ id: string; ancestors: string[] }>(
    tx,
    `SELECT id::text AS id, ancestor_ids::text[] AS ancestors FROM api_keys
      WHERE id = ANY($1::uuid[]) AND cardinality(ancestor_ids) > 0`,
    [[...candidates.keys()]],
  );
  for (const { id, ancestors } of chains) {
    const c = candidates.get(id);
    if (!c) continue;
    for (const a of ancestors) {
      const prior = candidates.get(a);
      if (!prior || prior.started < c.started || (c.refused && !prior.refused))
        candidates.set(a, { ...c, refused: c.refused || (prior?.refused ?? false) });
    }
  }
  const keys = await query<{ id: string; name: string; limit: bigint | string; reset: LimitReset }>(
    tx,
    `SELECT id::text AS id, name, limit_micro_usdc AS "limit", limit_reset::text AS reset
       FROM api_keys WHERE id = ANY($1::uuid[]) AND limit_micro_usdc IS NOT NULL`,
    [[...candidates.keys()]],
  );
  const ids: string[] = [];
  for (const k of keys) {
    const c = candidates.get(k.id);
    if (!c) continue;
    // the request counts in the period it started in (docs/decisions.md "Key budgets")
    const period = budgetPeriod(k.reset, c.started);
    const [row] = await query<{ spent: bigint | string }>(
      tx,
      `SELECT COALESCE(sum(s.spent_micro_usdc), 0)::bigint AS spent
         FROM svc_key_spend() s JOIN api_keys d ON d.id = s.api_key_id
        WHERE (d.id = $1::uuid OR d.ancestor_ids @> ARRAY[$1::uuid])
          AND ($2::date IS NULL OR s.day >= $2::date) AND ($3::date IS NULL OR s.day < $3::date)`,
      [k.id, period.start ? utcDay(period.start) : null, period.end ? utcDay(period.end) : null],
    );
    const spent = BigInt(row?.spent ?? 0);
    const limit = BigInt(k.limit);
    if (!c.refused && spent < limit) continue;
    const data = keyBudgetExhaustedData({
      id: k.id,
      name: k.name,
      limitMicroUsdc: limit,
      spentMicroUsdc: spent,
      limitReset: k.reset,
      resetsAt: period.end,
    });
    ids.push(
      ...(await outbox.emit(tx, c.account, "key.budget_exhausted", data, {
        dedupeKey: `key.budget_exhausted:${k.id}:${period.start ? period.start.toISOString() : "all"}`,
      })),
    );
  }
  return ids;
}
