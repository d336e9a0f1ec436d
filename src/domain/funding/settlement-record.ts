import type { Hex } from "viem";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import { DEFAULT_SIGNUP_KEY_NAME } from "../../contract/funding.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { upsertAccountByWallet } from "../accounts/account-upsert.js";
import type { ApiKeyService, CreatedApiKey } from "../keys/api-key-service.js";
import { creditPendingTopUp } from "../ledger/ledger.js";

export interface RecordDeps {
  db: Db;
  clock: Clock;
  bus: EventBus;
  apiKeys: Pick<ApiKeyService, "createKeyInTx">;
}

export interface Recorded {
  payment: {
    settlementTxHash: string | null;
    amountMicroUsdc: bigint;
    accountId: string | null;
    /** the key a signup issued for this payment; null when none was (credited from the chain, key cap) */
    apiKeyId: string | null;
  };
  account: { id: string; walletAddress: string; confirmedMicroUsdc: bigint; pendingMicroUsdc: bigint };
  key: CreatedApiKey | null;
  keyCapReached: boolean;
  fresh: boolean;
}

/**
 * THE credit of a settled x402 payment (the request path and reconciliation both end here): the
 * payment row moves to `pending` with its settlement hash and the pending credit is journaled in
 * the same transaction, conditional on the row still being uncredited, so a second call is a
 * no-op that returns the recorded state. A signup mints its API key in that transaction too.
 */
export async function recordSettlement(
  deps: RecordDeps,
  paymentId: string,
  txHash: Hex,
  opts: { mintKey: boolean },
): Promise<Recorded> {
  const now = deps.clock.now();
  const result = await deps.db.$transaction(async (tx) => {
    const p = await tx.payment.findUniqueOrThrow({ where: { id: paymentId } });
    if (p.status === "pending" || p.status === "confirmed") {
      return { payment: p, key: null as CreatedApiKey | null, keyCapReached: false, fresh: false };
    }
    let accountId = p.accountId;
    if (!accountId) {
      const meta = (p.requestMeta ?? {}) as { maxPriceCentsPerDollar?: number };
      const account = await upsertAccountByWallet(tx, {
        walletAddress: p.payerAddress,
        provider: "x402",
        maxPriceCentsPerDollar: meta.maxPriceCentsPerDollar,
      });
      accountId = account.id;
    }
    const claimed = await tx.payment.updateMany({
      where: { id: paymentId, status: { in: ["settling", "reconciling", "failed"] } },
      data: { status: "pending", settlementTxHash: txHash, settledAt: now, accountId },
    });
    if (claimed.count !== 1) throw new Error(`payment ${paymentId} changed concurrently`);
    await creditPendingTopUp(tx, { accountId, paymentId, amountMicroUsdc: p.amountMicroUsdc });
    let key: CreatedApiKey | null = null;
    let keyCapReached = false;
    if (opts.mintKey && p.kind === "signup") {
      const meta = (p.requestMeta ?? {}) as { keyName?: string };
      try {
        key = await deps.apiKeys.createKeyInTx(tx, {
          accountId,
          name: meta.keyName ?? DEFAULT_SIGNUP_KEY_NAME,
          source: "signup",
        });
        await tx.payment.update({ where: { id: paymentId }, data: { apiKeyId: key.id } });
      } catch (e) {
        if (!(e instanceof DomainError && e.code === "key_limit_reached")) throw e;
        keyCapReached = true; // SPEC rule 9: credited, no key
      }
    }
    const payment = await tx.payment.findUniqueOrThrow({ where: { id: paymentId } });
    return { payment, key, keyCapReached, fresh: true };
  });
  const account = await deps.db.account.findUniqueOrThrow({ where: { id: result.payment.accountId ?? "" } });
  if (result.fresh) {
    deps.bus.publish("balanceChanged", account.id, {
      accountId: account.id,
      kind: "top_up_pending",
      at: now.toISOString(),
    });
  }
  return { ...result, account };
}
