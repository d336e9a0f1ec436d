import type { MicroDiem, MicroUsdc } from "../../lib/money.js";

/**
 * What the accounts table stores: `x402` marks an account a paid signup created that no one has
 * signed in to yet. Internal: responses carry a `SignInProvider` (see auth-provider.ts).
 */
export type AuthProviderName = "idp" | "siwe" | "x402";

/** SPEC "Account" `authProvider`: enum `idp`, `siwe`; how a wallet signs in (a session's provider). */
export type SignInProvider = "idp" | "siwe";

/**
 * What the account reads need of the caller: whose account, and for a session caller the provider
 * it signed in with. identity's `Viewer` carries both; accounts sits below identity and names only
 * these two fields.
 */
export interface AccountCaller {
  accountId: string;
  authProvider?: SignInProvider;
}

export interface AccountIdentity {
  accountId: string;
  walletAddress: string;
  /** see `authProviderFor`: null only for a Bearer caller whose wallet has never signed in */
  authProvider: SignInProvider | null;
}

export interface Balances {
  confirmedMicroUsdc: MicroUsdc;
  pendingMicroUsdc: MicroUsdc;
  /** held by requests in flight (part of confirmed; an idle escrow slice's unused part is not), see `balancesOf` */
  reservedMicroUsdc: MicroUsdc;
  /** confirmed − reserved: what a new request can use, in any process */
  availableMicroUsdc: MicroUsdc;
  supplierPayableMicroUsdc: MicroUsdc;
}

export interface LedgerLine {
  id: string;
  /** what happened: top_up, confirmation, buyer_debit, supplier_credit, refund, payout… */
  kind: string;
  book: string;
  /** signed change to the book */
  amountMicroUsdc: MicroUsdc;
  transactionId: string;
  transactionKind: string;
  createdAt: Date;
}

export interface AccountSummary extends AccountIdentity {
  maxPriceCentsPerDollar: number;
  balances: Balances;
  hasEverFunded: boolean;
  firstFundedAt: Date | null;
  createdAt: Date;
  recentLedger: LedgerLine[];
}

export interface HistoryRow {
  requestId: string;
  supportReference: string;
  /** the API key the request was made with, and its name (null while a stream runs, or the key is gone) */
  keyId: string | null;
  keyName: string | null;
  route: string;
  modality: string;
  model: string;
  stream: boolean;
  status: string;
  errorCode: string | null;
  maxPriceCents: number;
  clearingPriceCents: number | null;
  promptTokens: number | null;
  completionTokens: number | null;
  /** cache reads among the prompt tokens */
  cachedTokens: number | null;
  /** cache writes among the prompt tokens (priced at the model's cache-write rate) */
  cacheWriteTokens: number | null;
  burnMicroDiem: MicroDiem | null;
  costMicroUsdc: MicroUsdc | null;
  attempts: number;
  startedAt: Date;
  firstByteAt: Date | null;
  completedAt: Date | null;
}

export interface Savings {
  clears: number;
  /** face value of the DIEM burned (1 DIEM = 1 USD) */
  faceMicroUsdc: MicroUsdc;
  /** what the burn would have cost at the buyer's ceiling at the time */
  atCeilingMicroUsdc: MicroUsdc;
  paidMicroUsdc: MicroUsdc;
  savedVsFaceMicroUsdc: MicroUsdc;
  savedVsCeilingMicroUsdc: MicroUsdc;
}
