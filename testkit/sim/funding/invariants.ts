// The funding simulation's invariants (docs/decisions.md "Seeded money simulation (issue 38)"),
// read after every step from the database's rows and from the chain as it is (not through the
// node the reconciler reads, which may lag). Each returns the broken rules as sentences.
import { AssertionError } from "node:assert";
import type { Hex } from "viem";
import type { UsdcSettlement } from "../../../src/adapters/chain/usdc-gateway.js";
import { assertBooksBalance } from "../../books.js";
import { authKey, CONFIRMATION_BLOCKS, type FundingWorld } from "./world.js";

export interface PaymentState {
  id: string;
  label: string;
  key: string;
  status: string;
  kind: string;
  amount: bigint;
  validBefore: number | null;
  settlementTxHash: string | null;
  accountWallet: string | null;
  payer: string;
  /** buyer credit journaled for it, net (top-up − reversal) */
  credited: bigint;
  journals: Record<string, number>;
}

export interface ChainState {
  head: bigint;
  /** the time of the block CONFIRMATION_BLOCKS below the head (what the chain can no longer undo) */
  deepTime: number;
  /** settlements to payTo, by payer and nonce */
  settlements: Map<string, UsdcSettlement[]>;
  /** authorizations cancelled on chain, by payer and nonce */
  cancelled: Set<string>;
}

export interface FundingSnapshot {
  payments: PaymentState[];
  byKey: Map<string, PaymentState>;
  chain: ChainState;
  /** the first broken rule of testkit/books.ts, if any */
  books: string | null;
  /** Σ buyers' pending and confirmed balances */
  balances: bigint;
}

/**
 * The rows, the books and the chain, read at once; with `unchanged`, a snapshot taken since which
 * nothing wrote to the database (a step of the chain or the clock alone), its rows and books are
 * kept and only the chain is read again.
 */
export async function snapshot(w: FundingWorld, unchanged?: FundingSnapshot): Promise<FundingSnapshot> {
  if (unchanged) return { ...unchanged, chain: await chainState(w) };
  const [{ payments, byKey }, chain, books, balances] = await Promise.all([
    paymentStates(w),
    chainState(w),
    assertBooksBalance(w.db).then(
      () => null,
      (e: unknown) => (e instanceof AssertionError ? (e.message.split("\n")[0] ?? "") : String(e)),
    ),
    w.db.$queryRaw<{ total: bigint | null }[]>`
      SELECT SUM(pending_micro_usdc + confirmed_micro_usdc)::bigint AS total FROM accounts`.then(
      (r) => r[0]?.total ?? 0n,
    ),
  ]);
  return { payments, byKey, chain, books, balances };
}

async function paymentStates(w: FundingWorld): Promise<Pick<FundingSnapshot, "payments" | "byKey">> {
  const [rows, journals] = await Promise.all([
    w.db.$queryRaw<
      {
        id: string;
        status: string;
        kind: string;
        payer_address: string;
        authorization_nonce: string;
        amount_micro_usdc: bigint;
        valid_before: Date | null;
        settlement_tx_hash: string | null;
        wallet: string | null;
      }[]
    >`SELECT p.id, p.status::text, p.kind::text, p.payer_address, p.authorization_nonce, p.amount_micro_usdc,
           p.valid_before, p.settlement_tx_hash, a.wallet_address AS wallet
      FROM payments p LEFT JOIN accounts a ON a.id = p.account_id
     ORDER BY p.payer_address, p.authorization_nonce`,
    w.db.$queryRaw<{ payment_id: string; kind: string; n: bigint; buyer: bigint }[]>`
    SELECT t.payment_id, t.kind::text, COUNT(DISTINCT t.id)::bigint AS n,
           COALESCE(SUM(e.amount_micro_usdc) FILTER (WHERE e.book IN ('buyer_pending', 'buyer_confirmed')), 0)::bigint AS buyer
      FROM ledger_transactions t JOIN ledger_entries e ON e.transaction_id = t.id
     WHERE t.payment_id IS NOT NULL
     GROUP BY t.payment_id, t.kind`,
  ]);
  const payments: PaymentState[] = rows.map((r) => ({
    id: r.id,
    label: w.paymentLabel(r.payer_address, r.authorization_nonce),
    key: authKey(r.payer_address, r.authorization_nonce),
    status: r.status,
    kind: r.kind,
    amount: r.amount_micro_usdc,
    validBefore: r.valid_before ? r.valid_before.getTime() / 1000 : null,
    settlementTxHash: r.settlement_tx_hash,
    accountWallet: r.wallet,
    payer: r.payer_address,
    credited: 0n,
    journals: {},
  }));
  const byId = new Map(payments.map((p) => [p.id, p]));
  for (const j of journals) {
    const p = byId.get(j.payment_id);
    if (!p) continue;
    p.journals[j.kind] = Number(j.n);
    p.credited += j.buyer;
  }
  return { payments, byKey: new Map(payments.map((p) => [p.key, p])) };
}

export async function chainState(w: FundingWorld): Promise<ChainState> {
  const head = await w.head();
  const [moved, cancels, deep] = await Promise.all([
    w.truth.getUsdcSettlements({ to: w.payTo, fromBlock: 0n, toBlock: head }),
    w.publicClient.getContractEvents({
      address: w.chain.usdcAddress,
      abi: CANCELED_ABI,
      eventName: "AuthorizationCanceled",
      fromBlock: 0n,
      toBlock: head,
      strict: true,
    }),
    w.publicClient.getBlock({
      blockNumber: head > BigInt(CONFIRMATION_BLOCKS) ? head - BigInt(CONFIRMATION_BLOCKS) : 0n,
    }),
  ]);
  if (!moved.ok) throw new Error(`the chain's settlements could not be read: ${moved.failure.message}`);
  const settlements = new Map<string, UsdcSettlement[]>();
  for (const s of moved.value) {
    if (!s.authorizationNonce || !s.authorizer) continue;
    const k = authKey(s.authorizer, s.authorizationNonce);
    settlements.set(k, [...(settlements.get(k) ?? []), s]);
  }
  const cancelled = new Set(cancels.map((c) => authKey(c.args.authorizer as string, c.args.nonce as Hex)));
  return { head, deepTime: Number(deep.timestamp), settlements, cancelled };
}

const CANCELED_ABI = [
  {
    type: "event",
    name: "AuthorizationCanceled",
    inputs: [
      { name: "authorizer", type: "address", indexed: true },
      { name: "nonce", type: "bytes32", indexed: true },
    ],
  },
] as const;

const usdc = (n: bigint) => `${n / 1_000_000n}.${(n % 1_000_000n).toString().padStart(6, "0")}`;

/**
 * After every step:
 * - each authorization (payer, nonce) is one payment, credited at most once: at most one journal of
 *   each kind, never both confirmed and reversed, and its net credit 0 or its amount;
 * - a payment is credited exactly when its status says so (pending, confirmed);
 * - no payment credited without its transfer on chain: the chain carries (payer, nonce) to payTo
 *   with the payment's amount, in the recorded transaction; so credits equal what moved;
 * - money never moves without a record: every transfer to payTo that carries an authorization the
 *   simulation signed has its payment row;
 * - a failed payment's authorization never moved money;
 * - a credit is reversed only when its transfer is not on chain and the chain says the
 *   authorization can never move money: cancelled, or unused at a block CONFIRMATION_BLOCKS deep
 *   whose time is at or past validBefore (checked on the step the reversal appears);
 * - the books balance (testkit/books.ts), and the buyers' balances are the credits.
 */
export function checkFunding(w: FundingWorld, s: FundingSnapshot, reversedBefore: Set<string>): string[] {
  const v: string[] = [];
  const signed = new Set(w.auths.map((a) => authKey(a.payer.address, a.nonce)));
  for (const p of s.payments) {
    for (const [kind, n] of Object.entries(p.journals)) {
      if (n > 1) v.push(`payment ${p.label}: ${n} ${kind} journals (credited more than once)`);
    }
    if (p.journals.confirmation && p.journals.reversal) v.push(`payment ${p.label}: both confirmed and reversed`);
    if (p.credited !== 0n && p.credited !== p.amount) {
      v.push(`payment ${p.label}: net credit ${usdc(p.credited)} is neither 0 nor its amount ${usdc(p.amount)}`);
    }
    const creditedStatus = p.status === "pending" || p.status === "confirmed";
    if (creditedStatus && p.credited !== p.amount) {
      v.push(`payment ${p.label} is ${p.status} but its net credit is ${usdc(p.credited)}, not ${usdc(p.amount)}`);
    }
    if (!creditedStatus && p.credited !== 0n)
      v.push(`payment ${p.label} is ${p.status} but credited ${usdc(p.credited)}`);
    const moved = s.chain.settlements.get(p.key) ?? [];
    if (moved.length > 1) v.push(`payment ${p.label}: its authorization moved money ${moved.length} times`);
    if (p.credited > 0n) {
      const t = moved[0];
      if (!t) v.push(`payment ${p.label} is credited ${usdc(p.credited)} without a transfer on chain`);
      else {
        if (t.valueMicroUsdc !== p.credited) {
          v.push(`payment ${p.label}: credited ${usdc(p.credited)} but ${usdc(t.valueMicroUsdc)} moved on chain`);
        }
        if (t.to.toLowerCase() !== w.payTo) v.push(`payment ${p.label}: its transfer went to ${t.to}, not payTo`);
        if (p.settlementTxHash?.toLowerCase() !== t.txHash.toLowerCase()) {
          v.push(`payment ${p.label}: recorded transaction ${p.settlementTxHash} is not its transfer's ${t.txHash}`);
        }
      }
      if (p.accountWallet !== p.payer) v.push(`payment ${p.label} credited to ${p.accountWallet}, not its payer`);
    }
    if (p.status === "failed" && moved.length > 0) {
      v.push(
        `payment ${p.label} is failed but its authorization moved ${usdc(moved[0]?.valueMicroUsdc ?? 0n)} on chain`,
      );
    }
    if (p.journals.reversal && !reversedBefore.has(p.id)) {
      // a reversal that appeared in this step: the chain must say the authorization can never move money
      if (moved.length > 0) v.push(`payment ${p.label}: its credit was reversed while its transfer is on chain`);
      const expired = p.validBefore !== null && s.chain.deepTime >= p.validBefore;
      if (!s.chain.cancelled.has(p.key) && !expired) {
        v.push(
          `payment ${p.label}: its credit was reversed with the authorization neither cancelled nor past validBefore (${w.rel(p.validBefore ?? 0)}; deep block at ${w.rel(s.chain.deepTime)})`,
        );
      }
    }
  }
  for (const [k, moved] of s.chain.settlements) {
    if (signed.has(k) && !s.byKey.has(k)) {
      v.push(`${usdc(moved[0]?.valueMicroUsdc ?? 0n)} moved on chain for ${k} with no payment row`);
    }
  }
  if (s.books) v.push(`the books do not balance: ${s.books}`);
  const credits = s.payments.reduce((sum, p) => sum + p.credited, 0n);
  if (s.balances !== credits) v.push(`buyers hold ${usdc(s.balances)} but the payments credited ${usdc(credits)}`);
  return v;
}

/**
 * After the drain (no lag, every held settlement released, the clock past every validBefore,
 * reconciliation and confirmations run until quiet):
 * - every payment whose authorization moved money is credited and confirmed: settled ⇒ credited;
 * - every other payment is failed and credited nothing; none is left settling or reconciling;
 * - an authorization cancelled on chain ended its payment as failed;
 * - every buyer's pending balance is zero and its confirmed balance its confirmed payments.
 */
export async function checkDrained(w: FundingWorld, s: FundingSnapshot): Promise<string[]> {
  const v: string[] = [];
  for (const p of s.payments) {
    const moved = s.chain.settlements.has(p.key);
    if (moved && p.status !== "confirmed") {
      v.push(`payment ${p.label} moved money on chain but ended ${p.status} (credited ${usdc(p.credited)})`);
    }
    if (!moved && p.status !== "failed") v.push(`payment ${p.label} never moved money but ended ${p.status}`);
    if (s.chain.cancelled.has(p.key) && p.status !== "failed") {
      v.push(`payment ${p.label}: its authorization was cancelled on chain but it ended ${p.status}`);
    }
  }
  const accounts = await w.db.account.findMany({
    select: { walletAddress: true, pendingMicroUsdc: true, confirmedMicroUsdc: true },
  });
  for (const a of accounts) {
    const mine = s.payments.filter((p) => p.accountWallet === a.walletAddress && p.status === "confirmed");
    const expected = mine.reduce((sum, p) => sum + p.amount, 0n);
    if (a.pendingMicroUsdc !== 0n) v.push(`account ${a.walletAddress} still has ${usdc(a.pendingMicroUsdc)} pending`);
    if (a.confirmedMicroUsdc !== expected) {
      v.push(
        `account ${a.walletAddress} holds ${usdc(a.confirmedMicroUsdc)} confirmed, its payments ${usdc(expected)}`,
      );
    }
  }
  return v;
}
