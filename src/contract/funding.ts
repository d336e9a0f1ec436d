import { DEFAULT_CEILING_CENTS } from "../lib/money.js";
import { ceilingCents } from "./account.js";
import { decimal6, uuid, walletAddress, z } from "./common.js";
import { parseWith } from "./parse.js";

/** SPEC "Funding flow" (x402 `exact` on Base) and "Payment requirement", "Funding results". */

/** SPEC "Limits": 1 to 1000 USDC per payment. */
export const MIN_PAYMENT_MICRO_USDC = 1_000_000;
export const MAX_PAYMENT_MICRO_USDC = 1_000_000_000;
/** The name of the key a signup issues when the body names none. */
export const DEFAULT_SIGNUP_KEY_NAME = "x402-signup";

const AMOUNT_TYPE_MESSAGE = "amountMicroUsdc must be an integer number of micro-USDC.";
const AMOUNT_RANGE_MESSAGE = "amountMicroUsdc must be 1000000-1000000000 (1 to 1000 USDC).";
const BODY_MESSAGE = "Body must be a JSON object with amountMicroUsdc.";

const amountMicroUsdc = z
  .number({ required_error: AMOUNT_TYPE_MESSAGE, invalid_type_error: AMOUNT_TYPE_MESSAGE })
  .int({ message: AMOUNT_TYPE_MESSAGE })
  .safe({ message: AMOUNT_TYPE_MESSAGE })
  .min(MIN_PAYMENT_MICRO_USDC, { message: AMOUNT_RANGE_MESSAGE })
  .max(MAX_PAYMENT_MICRO_USDC, { message: AMOUNT_RANGE_MESSAGE })
  .openapi({ format: "int64", description: "micro-USDC (1000000 = 1 USDC)", example: 5_000_000 });

/** `POST /v1/x402/top-up` and `POST /v1/x402/refill`. The paid retry must send the identical body. */
export const fundingBody = z
  .object({ amountMicroUsdc }, { required_error: BODY_MESSAGE, invalid_type_error: BODY_MESSAGE })
  .openapi("FundingRequest");

const KEY_NAME_MESSAGE = "keyName must be a string of at most 64 characters.";

/** `POST /v1/x402/signup`: no `walletAddress`, the payer is the account. */
export const signupBody = z
  .object(
    {
      amountMicroUsdc,
      keyName: z
        .string({ invalid_type_error: KEY_NAME_MESSAGE })
        .max(64, { message: KEY_NAME_MESSAGE })
        .optional()
        .openapi({ description: `name of the issued key (default \`${DEFAULT_SIGNUP_KEY_NAME}\`)` }),
      maxPriceCentsPerDollar: ceilingCents.optional().openapi({ description: "buyer ceiling, 30-80 (default 80)" }),
    },
    { required_error: BODY_MESSAGE, invalid_type_error: BODY_MESSAGE },
  )
  .openapi("SignupRequest");

/** The funding routes: signup, top-up (session) and refill (Bearer). */
export type FundingKind = "signup" | "top_up" | "refill";

/** A parsed funding body: the amount always; on signup the key's name and the buyer's ceiling (defaults applied). */
export interface FundingBody {
  amountMicroUsdc: bigint;
  keyName: string;
  maxPriceCentsPerDollar: number;
}

/**
 * The body of a funding call (SPEC "Funding flow"): `amountMicroUsdc` always; `keyName` (empty: the
 * default) and `maxPriceCentsPerDollar` (optional) on signup only, ignored elsewhere.
 * @throws invalid_request naming the field
 */
export function parseFundingRequest(kind: FundingKind, raw: unknown): FundingBody {
  if (kind !== "signup") {
    const b = parseWith(fundingBody, raw);
    return {
      amountMicroUsdc: BigInt(b.amountMicroUsdc),
      keyName: DEFAULT_SIGNUP_KEY_NAME,
      maxPriceCentsPerDollar: DEFAULT_CEILING_CENTS,
    };
  }
  const b = parseWith(signupBody, raw);
  return {
    amountMicroUsdc: BigInt(b.amountMicroUsdc),
    keyName: b.keyName || DEFAULT_SIGNUP_KEY_NAME,
    maxPriceCentsPerDollar: b.maxPriceCentsPerDollar ?? DEFAULT_CEILING_CENTS,
  };
}

export const paymentRequirements = z
  .object({
    scheme: z.literal("exact"),
    network: z.literal("base"),
    maxAmountRequired: z.string().openapi({ description: "integer micro-USDC as a string" }),
    resource: z.string().openapi({ description: "URL of the route that issued the challenge" }),
    description: z.string(),
    mimeType: z.string(),
    payTo: z.string(),
    maxTimeoutSeconds: z.number().int(),
    asset: z.string().openapi({ description: "USDC token contract address" }),
    extra: z.object({ name: z.string(), version: z.string() }),
  })
  .openapi("PaymentRequirements");

/**
 * 402 on a funding route: always `accepts`; no money moved. The body is the x402 v1 challenge (sign
 * one requirement, retry with X-PAYMENT); the PAYMENT-REQUIRED header carries it as x402 v2.
 */
export const paymentChallenge = z
  .object({
    x402Version: z.literal(1),
    error: z.object({ code: z.string(), message: z.string() }),
    accepts: z.array(paymentRequirements),
    amountMicroUsdc: z.number().int(),
  })
  .openapi("PaymentChallenge");

/** 200 of top-up and refill. */
export const fundedResponse = z
  .object({
    confirmedUsdc: decimal6,
    pendingUsdc: decimal6,
    topUpAmountUsdc: decimal6,
    walletAddress,
    transaction: z.string().nullable(),
    confirmationBlocks: z.number().int(),
    idempotent: z.literal(true).optional(),
  })
  .openapi("Funded");

/** 200 of signup: `apiKey` once; a replayed settlement answers `idempotent: true` and no key. */
export const signupResponse = z
  .object({
    walletAddress,
    accountId: uuid,
    pendingUsdc: decimal6,
    transaction: z.string().nullable(),
    confirmationBlocks: z.number().int(),
    apiKey: z.string().optional().openapi({ description: "plaintext `svc_…`, returned once" }),
    keyPrefix: z.string().optional(),
    keyName: z.string().optional(),
    idempotent: z.literal(true).optional(),
    keyIssued: z.literal(false).optional().openapi({
      description:
        "on a replay: no key was ever issued for this payment (it was credited from the chain after its answer was lost, or the wallet held 10 keys); sign in with the wallet (SIWE) and create one with POST /v1/account/api-keys",
    }),
  })
  .openapi("SignedUp");
