/**
 * The funding routes' contract (SPEC "Funding flow"), pure: what a funding call carries, the body
 * rules (amount, signup key name and ceiling) and the shape of a funded answer. No I/O here;
 * FundingService (funding-service.ts) runs the x402 exchange between the two.
 */
import { DomainError } from "../../lib/errors.js";
import { DEFAULT_CEILING_CENTS, formatDecimal6 } from "../../lib/money.js";
import { assertCeiling } from "../accounts/account-service.js";
import { DEFAULT_SIGNUP_KEY_NAME, type Recorded } from "./settlement-record.js";

/** SPEC "Limits": 1 to 1000 USDC per payment. */
export const MIN_PAYMENT_MICRO = 1_000_000n;
export const MAX_PAYMENT_MICRO = 1_000_000_000n;

export type FundingKind = "signup" | "top_up" | "refill";

export interface FundingRequest {
  kind: FundingKind;
  /** the JSON body as received (validated here) */
  body: unknown;
  /** the `X-PAYMENT` header, if any */
  paymentHeader: string | undefined;
  /** absolute URL of the route (x402 `resource`) */
  resource: string;
  /** the caller: the session wallet (top-up) or the key's wallet (refill); none for signup */
  caller?: { accountId: string; walletAddress: string };
}

/** The code of a 402 challenge: none sent yet, or the one sent cannot settle (no money moved either way). */
export type ChallengeCode = "payment_required" | "invalid_payment";

export type FundingOutcome =
  | { type: "challenge"; status: 402; code: ChallengeCode; body: Record<string, unknown> }
  | { type: "funded"; status: 200; body: Record<string, unknown>; paymentResponse: string };

export interface ParsedBody {
  amountMicroUsdc: bigint;
  keyName: string;
  maxPriceCentsPerDollar: number;
}

/** The x402 requirement's `description`, per route. */
export const DESCRIPTIONS: Record<FundingKind, string> = {
  signup: "Create an account and API key, prepaid with USDC",
  top_up: "Add prepaid USDC to the signed-in account",
  refill: "Add prepaid USDC to the account of this API key",
};

/**
 * The body of a funding call: `amountMicroUsdc` always; `keyName` and `maxPriceCentsPerDollar`
 * (optional) on signup only.
 * @throws invalid_request naming the field
 */
export function parseFundingBody(kind: FundingKind, raw: unknown): ParsedBody {
  const b = (raw ?? {}) as Record<string, unknown>;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new DomainError("invalid_request", "Body must be a JSON object with amountMicroUsdc.");
  }
  const amount = b.amountMicroUsdc;
  if (typeof amount !== "number" || !Number.isSafeInteger(amount)) {
    throw new DomainError("invalid_request", "amountMicroUsdc must be an integer number of micro-USDC.", {
      field: "amountMicroUsdc",
    });
  }
  const amountMicroUsdc = BigInt(amount);
  if (amountMicroUsdc < MIN_PAYMENT_MICRO || amountMicroUsdc > MAX_PAYMENT_MICRO) {
    throw new DomainError("invalid_request", "amountMicroUsdc must be 1000000-1000000000 (1 to 1000 USDC).", {
      field: "amountMicroUsdc",
    });
  }
  let keyName = DEFAULT_SIGNUP_KEY_NAME;
  let maxPriceCentsPerDollar = DEFAULT_CEILING_CENTS;
  if (kind === "signup") {
    if (b.keyName !== undefined) {
      if (typeof b.keyName !== "string" || b.keyName.length > 64) {
        throw new DomainError("invalid_request", "keyName must be a string of at most 64 characters.", {
          field: "keyName",
        });
      }
      if (b.keyName.length > 0) keyName = b.keyName;
    }
    if (b.maxPriceCentsPerDollar !== undefined) maxPriceCentsPerDollar = assertCeiling(b.maxPriceCentsPerDollar);
  }
  return { amountMicroUsdc, keyName, maxPriceCentsPerDollar };
}

/**
 * The 200 answer for a recorded payment, fresh or replayed (`idempotent`). A signup that credited
 * but hit the wallet's key cap is not a 200.
 * @throws payment_unfinished (credited: true) when the signup's key could not be issued
 */
export function fundedOutcome(
  kind: FundingKind,
  r: Recorded,
  o: { paymentResponse: string; idempotent: boolean; confirmationBlocks: number },
): FundingOutcome {
  const a = r.account;
  const transaction = r.payment.settlementTxHash;
  if (kind === "signup") {
    if (r.keyCapReached) {
      throw new DomainError(
        "payment_unfinished",
        "Payment credited, but this wallet already holds 10 active API keys; no key was issued.",
        // credited: nothing to reconcile and nothing for a human to recover, so no `reconciling`
        // (SPEC funding rules 6 and 9 together; docs/decisions.md, issue 26)
        { transaction, credited: true, paymentResponse: o.paymentResponse },
      );
    }
    const body: Record<string, unknown> = {
      walletAddress: a.walletAddress,
      accountId: a.id,
      pendingUsdc: formatDecimal6(a.pendingMicroUsdc),
      transaction,
      confirmationBlocks: o.confirmationBlocks,
    };
    if (o.idempotent || !r.key) body.idempotent = true;
    else {
      body.apiKey = r.key.apiKey;
      body.keyPrefix = r.key.keyPrefix;
      body.keyName = r.key.name;
    }
    return { type: "funded", status: 200, body, paymentResponse: o.paymentResponse };
  }
  return {
    type: "funded",
    status: 200,
    body: {
      confirmedUsdc: formatDecimal6(a.confirmedMicroUsdc),
      pendingUsdc: formatDecimal6(a.pendingMicroUsdc),
      topUpAmountUsdc: formatDecimal6(r.payment.amountMicroUsdc),
      walletAddress: a.walletAddress,
      transaction,
      confirmationBlocks: o.confirmationBlocks,
      ...(o.idempotent ? { idempotent: true } : {}),
    },
    paymentResponse: o.paymentResponse,
  };
}
