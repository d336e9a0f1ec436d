import { expect } from "vitest";
import type { Db } from "../../src/adapters/db.js";

/**
 * Everything one account owns, re-read from the database: `state` to prove a refused request
 * changed nothing, and `markers` (its ids, wallet, key prefixes and secrets) to prove no answer
 * to anyone else carries them.
 *
 * Left out of `state`: what using a credential legitimately touches (a key's `lastUsedAt`, a
 * session's sliding expiry and `lastSeenAt`) and the upstream keys' balance readings. Left out of
 * `markers`: ids two parties legitimately share (a clear's id is the transaction id of its lines on
 * both the buyer's and the supplier's books, and a refund's journal id too).
 */
export interface Records {
  state: Record<string, unknown>;
  markers: string[];
}

export async function recordsOf(db: Db, accountId: string, secrets: string[] = []): Promise<Records> {
  const [account, apiKeys, sessions, upstreamKeys, offers, videoJobs, payments, payouts, requests, ledger] =
    await Promise.all([
      db.account.findUniqueOrThrow({
        where: { id: accountId },
        select: {
          walletAddress: true,
          maxPriceCentsPerDollar: true,
          confirmedMicroUsdc: true,
          pendingMicroUsdc: true,
          reservedMicroUsdc: true,
          supplierPayableMicroUsdc: true,
        },
      }),
      db.apiKey.findMany({
        where: { accountId },
        select: {
          id: true,
          name: true,
          keyPrefix: true,
          status: true,
          revokedAt: true,
          limitMicroUsdc: true,
          limitReset: true,
          maxPriceCentsPerDollar: true,
          models: true,
          expiresAt: true,
        },
        orderBy: { id: "asc" },
      }),
      db.session.findMany({ where: { accountId }, select: { id: true, revokedAt: true }, orderBy: { id: "asc" } }),
      db.upstreamKey.findMany({
        where: { accountId },
        select: { id: true, label: true, status: true, revokedAt: true },
        orderBy: { id: "asc" },
      }),
      db.offer.findMany({
        where: { accountId },
        select: {
          id: true,
          upstreamKeyId: true,
          status: true,
          priceCentsPerDollar: true,
          quantityMicroDiem: true,
          remainingMicroDiem: true,
          reservedMicroDiem: true,
          endedAt: true,
        },
        orderBy: { id: "asc" },
      }),
      db.videoJob.findMany({
        where: { accountId },
        select: {
          id: true,
          queueId: true,
          upstreamQueueId: true,
          status: true,
          pollCount: true,
          deliveredAt: true,
          refundedAt: true,
          mediaDeletedAt: true,
        },
        orderBy: { id: "asc" },
      }),
      db.payment.findMany({
        where: { accountId },
        select: { id: true, status: true, amountMicroUsdc: true, settlementTxHash: true, authorizationNonce: true },
        orderBy: { id: "asc" },
      }),
      db.payout.findMany({
        where: { accountId },
        select: { id: true, status: true, amountMicroUsdc: true, txHash: true },
        orderBy: { id: "asc" },
      }),
      db.inferenceRequest.findMany({
        where: { accountId },
        select: { id: true, supportReference: true, status: true, costMicroUsdc: true },
        orderBy: { id: "asc" },
      }),
      // every line of its books: the written entries and the lines its clears imply (function ledger_lines)
      db.$queryRaw<{ id: string }[]>`
        SELECT id::text AS id FROM ledger_lines(p_account => ${accountId}::uuid) ORDER BY id`,
    ]);
  const state = { account, apiKeys, sessions, upstreamKeys, offers, videoJobs, payments, payouts, requests, ledger };
  const markers = [
    accountId,
    account.walletAddress,
    ...apiKeys.flatMap((k) => [k.id, k.keyPrefix]),
    ...sessions.map((s) => s.id),
    ...upstreamKeys.map((k) => k.id),
    ...offers.map((o) => o.id),
    ...videoJobs.flatMap((j) => [j.queueId, j.upstreamQueueId]),
    ...payments.flatMap((p) => [p.id, p.authorizationNonce, ...(p.settlementTxHash ? [p.settlementTxHash] : [])]),
    ...payouts.flatMap((p) => [p.id, ...(p.txHash ? [p.txHash] : [])]),
    ...requests.flatMap((r) => (r.supportReference ? [r.id, r.supportReference] : [r.id])),
    ...ledger.map((l) => l.id),
    ...secrets,
  ];
  return { state, markers };
}

/**
 * No marker in the answer (case-insensitive: wallets travel checksummed or lower-case). `echoed`
 * are the values the caller itself sent (an id in the path or body may come back in an error).
 */
export function expectNoMarkers(text: string, markers: string[], label: string, echoed: string[] = []): void {
  const haystack = text.toLowerCase();
  const skip = new Set(echoed.map((e) => e.toLowerCase()));
  const found = markers.filter(
    (m) => m.length >= 8 && !skip.has(m.toLowerCase()) && haystack.includes(m.toLowerCase()),
  );
  expect(found, `${label}: another account's data in the answer`).toEqual([]);
}
